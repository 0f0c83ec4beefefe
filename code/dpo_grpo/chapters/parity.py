"""The evidence that this package matches TRL 1.16.0: rerun every fixture case and
tabulate the differences.

The fixtures (``dpo_grpo/data/trl_fixtures/trl_*.json``,
:data:`dpo_grpo.data.TRL_FIXTURES`) were written by ``scripts/make_trl_fixtures.py``
from real TRL 1.16.0 trainer objects (``GRPOTrainer._compute_loss``,
``GRPOTrainer._generate_and_score_completions``, ``DPOTrainer._compute_loss``).
:func:`parity_report` feeds each case's inputs to the TRL-exact layer
(:func:`dpo_grpo.trl_exact.grpo_loss`, :func:`dpo_grpo.trl_exact.reward_advantages` or
:func:`dpo_grpo.trl_exact.dpo_loss`) and returns one row per case with the maximum
absolute differences (loss, gradient, metrics). Tolerances are those of the package's
TRL parity tests.

Also here: TRL 1.16.0's GRPO defaults next to the paper's (:data:`TRL_GRPO_DEFAULTS`,
:data:`PAPER_GRPO`). The tables of the torch benchmark results are in
:mod:`dpo_grpo.chapters.benchmarks`; the benchmarks appendix reaches them through this
module (``parity.load_benchmarks``, ...), which imports them.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from .. import _validation as v
from ..i18n import N_, tr
from ..trl_exact.advantages import reward_advantages
from ..data import TRL_FIXTURES
from ..trl_exact.dpo import (
    LABEL_SMOOTHING_LOSS_TYPES,
    LENGTH_NORMALISED_LOSS_TYPES,
    dpo_loss,
)
from ..trl_exact.grpo import CLIP_METRICS, grpo_loss
from .benchmarks import (  # noqa: F401 (the benchmarks appendix uses parity.<name>)
    BENCH_RESULTS_HEADERS,
    TORCH_VARIANTS,
    benchmark_hardware,
    benchmark_matrix,
    benchmark_pivot,
    benchmark_rows,
    benchmark_sections,
    load_benchmarks,
    logprob_rows,
    target_summary,
)

TRL_VERSION = "1.16.0"
FIXTURE_FILES = {
    "grpo": "trl_grpo_loss.json",
    "advantages": "trl_advantages.json",
    "dpo": "trl_dpo_loss.json",
    "grpo_loss_types": "trl_grpo_loss_types.json",
    "dpo_loss_family": "trl_dpo_loss_family.json",
}
#: (rtol, atol) as in tests/trl_exact/test_trl_parity.py and
#: tests/trl_exact/test_loss_types.py ("float32_log": exo_pair, whose log(eps) and
#: log1p(-eps) are float32 in TRL and may differ from ours by one float32 ulp)
TOLERANCES = {
    "float64": (0.0, 1e-10),
    "float32_ratio": (0.0, 1e-7),
    "float32": (1e-5, 1e-6),
    "float32_log": (0.0, 1e-6),
}
#: metrics TRL computes in float32 (bool.float()) in the GRPO loss fixtures
FLOAT32_GRPO_METRICS = (*CLIP_METRICS, "cispo_clip_ratio")
#: the SAPO/VESPO options recorded in trl_grpo_loss_types.json
NEW_GRPO_OPTIONS = (
    "sapo_temperature_pos",
    "sapo_temperature_neg",
    "vespo_k_pos",
    "vespo_lambda_pos",
    "vespo_k_neg",
    "vespo_lambda_neg",
)

#: ``GRPOConfig`` defaults of TRL 1.16.0 that differ from (or matter next to)
#: DeepSeekMath's GRPO, and the ``max_completion_length`` that decides how a ragged
#: batch is averaged (``dr_grpo``). The one copy of TRL's defaults in the package;
#: ``std_ddof`` is not an option (TRL's ``torch.std`` divides by G - 1).
TRL_GRPO_DEFAULTS = {
    "beta": 0.0,
    "loss_type": "dapo",
    "use_bias_correction_kl": True,
    "scale_rewards": "group",
    "epsilon": 0.2,
    "epsilon_high": None,
    "importance_sampling_level": "token",
    "num_generations": 8,
    "num_iterations": 1,
    "std_ddof": 1,
    "max_completion_length": 512,
}
#: DeepSeekMath's GRPO as the article writes it (beta 0.04 is the paper's RL setting).
#: None: the paper does not state it. Neither the std nor the clip radius is given; with
#: one update per exploration stage (num_iterations 1) every ratio is 1 and the clip
#: never binds, so any epsilon gives the same objective.
PAPER_GRPO = {
    "beta": 0.04,
    "loss_type": "grpo",
    "use_bias_correction_kl": False,
    "scale_rewards": "group",
    "epsilon": None,
    "epsilon_high": None,
    "importance_sampling_level": "token",
    "num_generations": 64,
    "num_iterations": 1,
    "std_ddof": None,
}


# --------------------------------------------------------------------------------------
# Locating and loading the fixtures
# --------------------------------------------------------------------------------------


def find_fixtures(directory=None) -> Path:
    """The folder holding ``trl_*.json``: ``directory`` if given, else the copy shipped
    inside the package (:data:`dpo_grpo.data.TRL_FIXTURES`)."""
    if directory is not None and not isinstance(directory, (str, os.PathLike)):
        raise TypeError(
            "directory must be a path (str or os.PathLike) or None, got "
            f"{type(directory).__name__}"
        )
    folder = TRL_FIXTURES if directory is None else Path(directory)
    missing = [f for f in FIXTURE_FILES.values() if not (folder / f).is_file()]
    if missing:
        raise FileNotFoundError(
            f"TRL fixtures not found in {folder} (missing {', '.join(missing)})"
        )
    return folder


def load_fixtures(directory=None, expected_version=TRL_VERSION) -> dict:
    """``{"grpo": ..., "advantages": ..., "dpo": ..., "grpo_loss_types": ...,
    "dpo_loss_family": ...}``: the fixture files as parsed JSON.

    Raises ``ValueError`` if a file was produced by another TRL than
    ``expected_version`` (None accepts any: use it to compare the package with fixtures
    regenerated under another TRL release).
    """
    root = find_fixtures(directory)
    out = {}
    for key, name in FIXTURE_FILES.items():
        with open(root / name, encoding="utf-8") as fh:
            data = json.load(fh)
        if expected_version is not None and data.get("trl_version") != expected_version:
            raise ValueError(
                f"{name} was produced by TRL {data.get('trl_version')!r}, expected "
                f"{expected_version}"
            )
        out[key] = data
    return out


#: How the shipped fixtures were produced (their ``produced_by``, written by
#: ``scripts/make_trl_fixtures.py``), marked for the Chinese catalog: the appendix
#: prints them in the reader's language (:func:`fixture_summary`).
PRODUCED_BY = (
    N_(
        "GRPOTrainer._compute_loss (real trainer per case; instance patch: "
        "_get_per_token_logps_and_entropies returns the new_logps leaf)"
    ),
    N_(
        "GRPOTrainer._generate_and_score_completions (real method; instance patch: "
        "_generate_single_turn returns fixed completion ids; rewards from reward "
        "functions returning the table, None for null)"
    ),
    N_(
        "DPOTrainer._compute_loss (real trainer per case; stub policy forward returns "
        "per-token log-probs; precompute_ref_logps=True with "
        "ref_chosen_logps/ref_rejected_logps in the batch)"
    ),
)


def fixture_summary(key: str, data: dict) -> str:
    """Two lines on the fixture file ``FIXTURE_FILES[key]`` (``data``: as
    :func:`load_fixtures` returns it), in the reader's language: the TRL, torch and
    transformers versions it was written with and its number of cases; then how it
    was produced (a ``produced_by`` other than :data:`PRODUCED_BY`'s stays as
    written)."""
    v.choice(key, "key", tuple(FIXTURE_FILES))
    if not isinstance(data, dict):
        raise TypeError(f"data must be a dict, got {type(data).__name__}")
    return (
        f"{FIXTURE_FILES[key]:22s} "
        + tr(
            "TRL {trl}, torch {torch}, transformers {transformers}: {n} cases",
            trl=data["trl_version"],
            torch=data["torch_version"],
            transformers=data["transformers_version"],
            n=len(data["cases"]),
        )
        + f"\n{'':22s} "
        + tr("produced by {how}", how=tr(data["produced_by"]))
    )


def _nan_rows(rows):
    return np.array(
        [[math.nan if x is None else x for x in row] for row in rows], dtype=np.float64
    )


def _maxdiff(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def _within(diff, kind):
    """``diff <= atol`` of ``kind`` (the float64 and float32-ratio tolerances have rtol
    0)."""
    return diff <= TOLERANCES[kind][1]


# --------------------------------------------------------------------------------------
# One row per case
# --------------------------------------------------------------------------------------


def _case(case, keys):
    """A fixture case: a dict holding ``keys`` (a ``ValueError`` names the first missing
    one)."""
    if not isinstance(case, dict):
        raise TypeError(
            f"case must be a dict from the fixture file, got {type(case).__name__}"
        )
    missing = [k for k in keys if k not in case]
    if missing:
        raise ValueError(f"case is not a fixture case: missing keys {missing}")
    return case


def grpo_case_row(case) -> dict:
    """Rerun one ``trl_grpo_loss.json`` (or ``trl_grpo_loss_types.json``) case with
    :func:`dpo_grpo.trl_exact.grpo_loss`; differences to TRL's results."""
    _case(case, ("name", "options", "inputs", "loss", "grad_new_logps", "metrics"))
    o, x = case["options"], case["inputs"]
    new = np.array(x["new_logps"])
    # null = on-policy (TRL: detach)
    old = new.copy() if x["old_logps"] is None else np.array(x["old_logps"])
    ref = None if x["ref_logps"] is None else np.array(x["ref_logps"])
    out = grpo_loss(
        new,
        old,
        ref,
        np.array(x["advantages"]),
        np.array(x["mask"]),
        epsilon=o["epsilon"],
        beta=o["beta"],
        loss_type=o["loss_type"],
        importance_sampling_level=o["importance_sampling_level"],
        epsilon_high=o["epsilon_high"],
        delta=o["delta"],
        use_bias_correction_kl=o["use_bias_correction_kl"],
        max_completion_length=o["max_completion_length"],
        num_items_in_batch=o["num_items_in_batch"],
        gradient_accumulation_steps=o["gradient_accumulation_steps"],
        steps_per_generation=o["steps_per_generation"],
        num_processes=o["num_processes"],
        **{k: o[k] for k in NEW_GRPO_OPTIONS if k in o},
    )
    if set(out.metrics) != set(case["metrics"]):
        raise ValueError(f"{case['name']}: metric names differ from TRL's")
    f64 = [
        abs(out.metrics[k] - case["metrics"][k])
        for k in case["metrics"]
        if k not in FLOAT32_GRPO_METRICS
    ]
    f32 = [
        abs(out.metrics[k] - case["metrics"][k])
        for k in case["metrics"]
        if k in FLOAT32_GRPO_METRICS
    ]
    row = {
        "case": case["name"],
        "loss_type": o["loss_type"],
        "is_level": o["importance_sampling_level"],
        "beta": o["beta"],
        "bias_kl": o["use_bias_correction_kl"],
        "epsilon_high": o["epsilon_high"],
        "loss_ours": out.loss,
        "loss_trl": case["loss"],
        "loss_diff": abs(out.loss - case["loss"]),
        "grad_diff": _maxdiff(out.grad, case["grad_new_logps"]),
        "kl_diff": max(f64) if f64 else 0.0,
        "clip_metric_diff": max(f32) if f32 else 0.0,
    }
    row["ok"] = (
        _within(row["loss_diff"], "float64")
        and _within(row["grad_diff"], "float64")
        and _within(row["kl_diff"], "float64")
        and _within(row["clip_metric_diff"], "float32_ratio")
    )
    return row


def advantage_case_row(case) -> dict:
    """Rerun one ``trl_advantages.json`` case with
    :func:`dpo_grpo.trl_exact.reward_advantages`."""
    _case(case, ("name", "options", "inputs", "advantages", "metrics"))
    o = case["options"]
    rpf = _nan_rows(case["inputs"]["rewards_per_func"])
    out = reward_advantages(
        rpf,
        o["num_generations"],
        reward_weights=o["reward_weights"],
        scale_rewards=o["scale_rewards"],
        multi_objective_aggregation=o["multi_objective_aggregation"],
    )
    trl_adv = np.array(case["advantages"])
    rtol, atol = TOLERANCES["float32"]
    adv_ok = bool(
        np.all(np.abs(out.advantages - trl_adv) <= atol + rtol * np.abs(trl_adv))
    )
    mdiff = max(abs(out.metrics[k] - v) for k, v in case["metrics"].items())
    m_ok = all(
        abs(out.metrics[k] - v) <= atol + rtol * abs(v)
        for k, v in case["metrics"].items()
    )
    return {
        "case": case["name"],
        "scenario": case["name"].split("-")[0],
        "aggregation": o["multi_objective_aggregation"],
        # TRL's argument as written (False is a setting, not a failed check)
        "scale_rewards": repr(o["scale_rewards"]),
        "unscorable_rows": int(np.isnan(rpf).all(axis=1).sum()),
        "adv_diff": _maxdiff(out.advantages, trl_adv),
        "metric_diff": float(mdiff),
        "ok": adv_ok and m_ok,
    }


def dpo_case_row(case) -> dict:
    """Rerun one ``trl_dpo_loss.json`` (or ``trl_dpo_loss_family.json``) case with
    :func:`dpo_grpo.trl_exact.dpo_loss`.

    TRL 1.16.0 reads ``label_smoothing`` only for ``robust``, ``exo_pair``, ``aot`` and
    ``aot_unpaired`` (:data:`~dpo_grpo.trl_exact.dpo.LABEL_SMOOTHING_LOSS_TYPES`,
    checked against TRL's ``DPOTrainer`` in the tests) and ignores it for every other
    type (e.g. ``sigmoid``, ``hinge``); our function refuses it there, so those cases
    are rerun with ``label_smoothing=0`` (column ``ls_ignored_by_trl``). In the
    loss-family file ``loss_type`` is a list (combined with ``loss_weights``) and the
    token counts are given for ``ipo``, ``sigmoid_norm`` and ``sft``. ``exo_pair`` is
    compared at the ``float32_log`` tolerance.
    """
    _case(
        case,
        (
            "name",
            "options",
            "inputs",
            "loss",
            "grad_policy_chosen",
            "grad_policy_rejected",
            "metrics",
        ),
    )
    o, x = case["options"], case["inputs"]
    types = (
        [o["loss_type"]] if isinstance(o["loss_type"], str) else list(o["loss_type"])
    )
    ignored = o["label_smoothing"] != 0.0 and not any(
        t in LABEL_SMOOTHING_LOSS_TYPES for t in types
    )
    kw = {
        "loss_weights": o.get("loss_weights"),
        "discopop_tau": o.get("discopop_tau", 0.05),
    }
    if any(t in LENGTH_NORMALISED_LOSS_TYPES for t in types):
        kw["chosen_lengths"] = np.array(x["chosen_lengths"])
    if any(t in ("ipo", "sigmoid_norm") for t in types):
        kw["rejected_lengths"] = np.array(x["rejected_lengths"])
    out = dpo_loss(
        np.array(x["policy_chosen"]),
        np.array(x["policy_rejected"]),
        np.array(x["ref_chosen"]),
        np.array(x["ref_rejected"]),
        o["beta"],
        loss_type=types[0] if len(types) == 1 else types,
        label_smoothing=0.0 if ignored else o["label_smoothing"],
        **kw,
    )
    mdiff = max(
        abs(v - case["metrics"][k])
        for k, v in out.metrics.items()
        if k != "rewards/accuracies"
    )
    row = {
        "case": case["name"],
        "loss_type": "+".join(types),
        "beta": o["beta"],
        "label_smoothing": o["label_smoothing"],
        # a fact about the case, shown as text (a bool would read as a failed check)
        "ls_ignored_by_trl": "yes" if ignored else "no",
        "loss_ours": out.loss,
        "loss_trl": case["loss"],
        "loss_diff": abs(out.loss - case["loss"]),
        "grad_diff": max(
            _maxdiff(out.grad_policy_chosen, case["grad_policy_chosen"]),
            _maxdiff(out.grad_policy_rejected, case["grad_policy_rejected"]),
        ),
        "metric_diff": float(mdiff),
        "accuracy_diff": abs(
            out.metrics["rewards/accuracies"] - case["metrics"]["rewards/accuracies"]
        ),
    }
    kind = "float32_log" if "exo_pair" in types else "float64"
    row["ok"] = (
        _within(row["loss_diff"], kind)
        and _within(row["grad_diff"], kind)
        and _within(row["metric_diff"], "float64")
        and _within(row["accuracy_diff"], "float32_ratio")
    )
    return row


def parity_report(fixtures=None) -> dict:
    """``{"grpo": rows, "advantages": rows, "dpo": rows, "grpo_loss_types": rows,
    "dpo_loss_family": rows}`` for every fixture case (``fixtures`` from
    :func:`load_fixtures`; loaded when None)."""
    fx = load_fixtures() if fixtures is None else fixtures
    return {
        "grpo": [grpo_case_row(c) for c in fx["grpo"]["cases"]],
        "advantages": [advantage_case_row(c) for c in fx["advantages"]["cases"]],
        "dpo": [dpo_case_row(c) for c in fx["dpo"]["cases"]],
        "grpo_loss_types": [grpo_case_row(c) for c in fx["grpo_loss_types"]["cases"]],
        "dpo_loss_family": [dpo_case_row(c) for c in fx["dpo_loss_family"]["cases"]],
    }


def _rows(rows) -> list:
    rows = v.sequence(rows, "rows")
    if not all(isinstance(r, dict) for r in rows):
        raise TypeError("rows must be a sequence of dicts (one per case)")
    return rows


def _columns(columns, name) -> list:
    columns = v.sequence(columns, name)
    if not all(isinstance(c, str) for c in columns):
        raise TypeError(
            f"{name} must be a sequence of column names (strings), got {columns!r}"
        )
    return columns


def _require(rows, keys):
    for r in rows:
        missing = [k for k in keys if k not in r]
        if missing:
            raise ValueError(f"rows lack the columns {missing}")


def summarize(rows, diff_columns) -> dict:
    """``{"cases": n, "all_ok": bool, <column>: max over rows}`` for the given
    difference columns."""
    rows = _rows(rows)
    if not rows:
        raise ValueError("rows must not be empty")
    diff_columns = _columns(diff_columns, "diff_columns")
    _require(rows, ["ok", *diff_columns])
    out = {"cases": len(rows), "all_ok": all(r["ok"] for r in rows)}
    for c in diff_columns:
        out[c] = max(r[c] for r in rows)
    return out


def group_rows(rows, by, diff_columns) -> list:
    """Collapse rows sharing the values of ``by`` (a tuple of column names) into one
    row: count, max diffs."""
    rows = _rows(rows)
    by = _columns(by, "by")
    _require(rows, by)
    groups: dict = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in by), []).append(r)
    out = []
    for key, rs in groups.items():
        row = dict(zip(by, key))
        row.update(summarize(rs, diff_columns))
        out.append(row)
    return out
