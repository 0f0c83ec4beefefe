"""Number-for-number parity of the NumPy package with TRL 1.16.0, on fixtures produced
by TRL's own code.

The fixtures in ``code/dpo_grpo/data/trl_fixtures/`` were written by
``scripts/make_trl_fixtures.py`` (TRL 1.16.0, torch 2.13.0, transformers 5.24.0, CPU,
offline) from real trainer objects built on a tiny random Llama:

* ``trl_grpo_loss.json``: ``trl.GRPOTrainer._compute_loss`` (float64 ``new_logps`` leaf
  fed through an instance patch of ``_get_per_token_logps_and_entropies``; gradient by
  ``loss.backward()``; metrics from ``trainer._metrics``);
* ``trl_advantages.json``: ``trl.GRPOTrainer._generate_and_score_completions`` (real
  method; fixed completion ids; the rewards come from reward functions that return the
  fixture table, ``None`` for null);
* ``trl_dpo_loss.json``: ``trl.DPOTrainer._compute_loss`` (stub fused-LM-head forward
  returning chosen per-token log-probs; reference log-probs passed as precomputed
  ``ref_chosen_logps``/``ref_rejected_logps``).

This module does not need TRL or torch. Tolerances: GRPO/DPO loss and gradients agree to
1e-10 absolute (float64 on both sides); the ``kl`` and ``rewards/*`` margins/means
metrics to 1e-10. TRL computes the ``clip_ratio/*`` metrics and ``rewards/accuracies``
in float32 (``bool_tensor.float()``) and the advantages, rewards and their metrics in
float32 end to end, so those are compared at float32 precision.

Tests marked ``fixtures`` rerun the script into a temporary folder (about 21 s) and
compare the result with the committed files; ``make test`` runs them, ``pytest -m "not
fixtures"`` leaves them out of a quick unit run. They need TRL: they run when ``import
trl`` works here, or when ``DPO_GRPO_TRL_PYTHON`` names an interpreter that has it (for
example ``DPO_GRPO_TRL_PYTHON=.venv-trl/bin/python``); otherwise they are skipped.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from dpo_grpo.trl_exact import dpo_loss, grpo_loss, reward_advantages
from testing_support import TRL_FIXTURES, dpo_case, grpo_case, nan_array, trl_fixture

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "make_trl_fixtures.py"
FILES = ("trl_grpo_loss.json", "trl_advantages.json", "trl_dpo_loss.json")
#: checked by tests/trl_exact/test_loss_types.py; regenerated and compared here too
NEW_FILES = ("trl_grpo_loss_types.json", "trl_dpo_loss_family.json", "trl_rloo.json")
TRL_VERSION = "1.16.0"

EXACT = dict(rtol=0.0, atol=1e-10)  # float64 on both sides
FLOAT32_RATIO = dict(
    rtol=0.0, atol=1e-7
)  # TRL's float32 ratios in [0, 1] (half an ulp is <= 3e-8)
FLOAT32 = dict(rtol=1e-5, atol=1e-6)  # TRL's float32 advantage pipeline
CLIP_METRICS = (
    "clip_ratio/low_mean",
    "clip_ratio/high_mean",
    "clip_ratio/region_mean",
    "clip_ratio/low_min",
    "clip_ratio/high_max",
)


GRPO = trl_fixture("trl_grpo_loss.json")
ADV = trl_fixture("trl_advantages.json")
DPO = trl_fixture("trl_dpo_loss.json")


def _ids(cases):
    return [c["name"] for c in cases]


# --------------------------------------------------------------------------------------
# GRPO loss
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", GRPO["cases"], ids=_ids(GRPO["cases"]))
def test_grpo_loss_matches_trl(case):
    args, options = grpo_case(case)
    out = grpo_loss(*args, **options)
    np.testing.assert_allclose(out.loss, case["loss"], **EXACT, err_msg="loss")
    mask = np.array(case["inputs"]["mask"], dtype=bool)
    grad = np.asarray(out.grad)
    np.testing.assert_allclose(
        grad, np.array(case["grad_new_logps"]), **EXACT, err_msg="d loss / d new_logps"
    )
    assert np.all(grad[~mask] == 0.0), "gradient must be exactly zero on padding"
    assert set(out.metrics) == set(case["metrics"]), "metric names differ from TRL's"
    for name, trl_value in case["metrics"].items():
        tol = FLOAT32_RATIO if name in CLIP_METRICS else EXACT
        np.testing.assert_allclose(out.metrics[name], trl_value, **tol, err_msg=name)


# --------------------------------------------------------------------------------------
# Advantages
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ADV["cases"], ids=_ids(ADV["cases"]))
def test_reward_advantages_match_trl(case):
    o = case["options"]
    out = reward_advantages(
        nan_array(case["inputs"]["rewards_per_func"]),
        o["num_generations"],
        reward_weights=o["reward_weights"],
        scale_rewards=o["scale_rewards"],
        multi_objective_aggregation=o["multi_objective_aggregation"],
    )
    np.testing.assert_allclose(
        out.advantages, np.array(case["advantages"]), **FLOAT32, err_msg="advantages"
    )
    for name, trl_value in case["metrics"].items():
        np.testing.assert_allclose(
            out.metrics[name], trl_value, **FLOAT32, err_msg=name
        )


# --------------------------------------------------------------------------------------
# DPO
# --------------------------------------------------------------------------------------


def _dpo(case, label_smoothing):
    """The case's DPO loss with ``label_smoothing`` passed whatever the loss type."""
    arrays, beta, options = dpo_case(case)
    return dpo_loss(*arrays, beta, **{**options, "label_smoothing": label_smoothing})


def _check_dpo(out, case):
    np.testing.assert_allclose(out.loss, case["loss"], **EXACT, err_msg="loss")
    np.testing.assert_allclose(
        out.grad_policy_chosen,
        case["grad_policy_chosen"],
        **EXACT,
        err_msg="d loss / d policy_chosen",
    )
    np.testing.assert_allclose(
        out.grad_policy_rejected,
        case["grad_policy_rejected"],
        **EXACT,
        err_msg="d loss / d policy_rejected",
    )
    # TRL does not log the logits; its rewards/margins is their mean (margins = beta *
    # (chosen - rejected log-ratio)).
    np.testing.assert_allclose(
        np.mean(out.logits),
        case["metrics"]["rewards/margins"],
        **EXACT,
        err_msg="logits",
    )
    ours = out.metrics
    assert set(ours) <= set(case["metrics"]), "metric names differ from TRL's"
    for name, value in ours.items():
        tol = FLOAT32_RATIO if name == "rewards/accuracies" else EXACT
        np.testing.assert_allclose(value, case["metrics"][name], **tol, err_msg=name)


@pytest.mark.parametrize("case", DPO["cases"], ids=_ids(DPO["cases"]))
def test_dpo_loss_matches_trl(case):
    o = case["options"]
    if o["loss_type"] != "robust" and o["label_smoothing"] != 0.0:
        # TRL 1.16.0's DPOTrainer._compute_loss reads label_smoothing only for
        # robust/exo_pair/aot/aot_unpaired: "sigmoid" is -logsigmoid(beta * delta) and
        # "hinge" relu(1 - beta * delta) whatever its value (no conservative-DPO
        # smoothing, no warning). We refuse the silently ignored argument instead...
        with pytest.raises(ValueError, match="label_smoothing"):
            _dpo(case, o["label_smoothing"])
        # ...and TRL's number is exactly our label_smoothing=0 result.
        _check_dpo(_dpo(case, 0.0), case)
    else:
        _check_dpo(_dpo(case, o["label_smoothing"]), case)


def test_trl_ignores_label_smoothing_for_sigmoid_and_hinge():
    """The fixture pairs ls0.0/ls0.2 share their inputs: TRL gives identical results for
    sigmoid and hinge only."""
    by_name = {c["name"]: c for c in DPO["cases"]}
    for loss_type, beta in itertools.product(
        ("sigmoid", "hinge", "robust"), (0.1, 0.5)
    ):
        a, b = (
            by_name[f"{loss_type}-beta{beta}-ls0.0"],
            by_name[f"{loss_type}-beta{beta}-ls0.2"],
        )
        assert a["inputs"] == b["inputs"]
        if loss_type == "robust":
            assert a["loss"] != b["loss"]
        else:
            assert (a["loss"], a["grad_policy_chosen"]) == (
                b["loss"],
                b["grad_policy_chosen"],
            )


# --------------------------------------------------------------------------------------
# The fixture files cover the whole grid (a truncated or hand-edited file fails here)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("data", [GRPO, ADV, DPO], ids=FILES)
def test_fixture_headers(data):
    assert data["trl_version"] == TRL_VERSION
    assert data["generated_by"] == "scripts/make_trl_fixtures.py"
    assert data["torch_version"].startswith("2.13.0")
    assert data["produced_by"].split(" ")[0] in {
        "GRPOTrainer._compute_loss",
        "GRPOTrainer._generate_and_score_completions",
        "DPOTrainer._compute_loss",
    }
    names = _ids(data["cases"])
    assert len(names) == len(set(names)), "duplicate case names"


def _is_plain(case):
    """A case of the main 64-case grid: nothing but the five grid options departs from
    the defaults."""
    o, x = case["options"], case["inputs"]
    return (
        o["delta"] is None
        and o["max_completion_length"] == len(x["mask"][0])
        and o["gradient_accumulation_steps"] == 1
        and o["steps_per_generation"] == 1
        and o["num_items_in_batch"] == int(np.sum(x["mask"]))
        and x["old_logps"] is not None
        and np.ndim(x["advantages"]) == 1
        and o["num_processes"] == 1
    )


def test_grpo_fixture_covers_grid():
    cases = GRPO["cases"]
    assert len(cases) == 89
    key = lambda c: (
        c["options"]["loss_type"],
        c["options"]["importance_sampling_level"],
        c["options"]["beta"],
        c["options"]["use_bias_correction_kl"],
        c["options"]["epsilon_high"],
    )
    grid = sorted(key(c) for c in cases if _is_plain(c))
    expected = sorted(
        itertools.product(
            ("grpo", "bnpo", "dr_grpo", "dapo"),
            ("token", "sequence"),
            (0.0, 0.04),
            (False, True),
            (0.2, 0.28),
        )
    )
    assert grid == expected
    assert all(c["options"]["epsilon"] == 0.2 for c in cases)

    extra = [c for c in cases if not _is_plain(c)]
    delta = [c for c in extra if c["options"]["delta"] is not None]
    assert {c["options"]["loss_type"] for c in delta} == {
        "grpo",
        "bnpo",
        "dr_grpo",
        "dapo",
    }
    assert all(c["options"]["delta"] == 1.5 for c in delta)
    assert any(
        c["options"]["loss_type"] == "dr_grpo"
        and c["options"]["max_completion_length"] > 7
        for c in extra
    )
    on_policy = [c for c in extra if c["inputs"]["old_logps"] is None]
    assert {c["options"]["loss_type"] for c in on_policy} == {
        "grpo",
        "bnpo",
        "dr_grpo",
        "dapo",
    }
    gas = [c for c in extra if c["options"]["gradient_accumulation_steps"] == 2]
    assert {"grpo", "dapo"} <= {c["options"]["loss_type"] for c in gas}
    dapo = [c for c in extra if c["options"]["loss_type"] == "dapo"]
    assert any(
        c["options"]["steps_per_generation"]
        != c["options"]["gradient_accumulation_steps"]
        for c in dapo
    )
    assert any(
        c["options"]["num_items_in_batch"] > np.sum(c["inputs"]["mask"]) for c in dapo
    )
    adv2d = [c for c in extra if np.ndim(c["inputs"]["advantages"]) == 2]
    assert {c["options"]["importance_sampling_level"] for c in adv2d} == {
        "token",
        "sequence",
    }
    for c in cases:
        assert (c["inputs"]["ref_logps"] is None) == (c["options"]["beta"] == 0.0)
        assert ("kl" in c["metrics"]) == (c["options"]["beta"] != 0.0)


def _ratios(case):
    x = case["inputs"]
    mask = np.array(x["mask"], dtype=bool)
    log_ratio = np.array(x["new_logps"]) - np.array(x["old_logps"])
    adv = np.array(x["advantages"])
    if case["options"]["importance_sampling_level"] == "sequence":
        r = np.exp(np.where(mask, log_ratio, 0).sum(1) / mask.sum(1))
        return r, (adv if adv.ndim == 1 else adv[:, 0])
    a = np.broadcast_to(adv[:, None], mask.shape) if adv.ndim == 1 else adv
    return np.exp(log_ratio)[mask], a[mask]


def test_grpo_fixture_inputs_exercise_every_branch():
    """Ragged masks, garbage padding, and ratios beyond both clip bounds with both
    advantage signs."""
    for c in GRPO["cases"]:
        x, o = c["inputs"], c["options"]
        mask = np.array(x["mask"], dtype=bool)
        assert mask.shape == (6, 7) and mask.sum(1).min() >= 1
        assert mask.all(1).any() and (~mask.all(1)).any(), "needs full and short rows"
        new = np.array(x["new_logps"])
        assert np.isfinite(new).all() and np.abs(new[~mask]).max() > 5.0, (
            "padding must hold garbage"
        )
        adv = np.array(x["advantages"])
        assert (adv > 0).any() and (adv < 0).any()
        if x["old_logps"] is None:
            continue
        r, a = _ratios(c)
        lo, hi = r < 1 - o["epsilon"], r > 1 + o["epsilon_high"]
        assert (lo & (a < 0)).any() and (hi & (a > 0)).any(), c[
            "name"
        ]  # both clip platforms are reached
        if o["importance_sampling_level"] == "token":
            assert (lo & (a > 0)).any() and (hi & (a < 0)).any(), c["name"]
        if o["delta"] is not None:
            assert ((r > o["delta"]) & (a < 0)).any(), f"{c['name']}: delta never binds"
    # the clip metrics are non-trivial somewhere
    assert max(c["metrics"]["clip_ratio/low_mean"] for c in GRPO["cases"]) > 0
    assert max(c["metrics"]["clip_ratio/high_max"] for c in GRPO["cases"]) > 0


def test_advantage_fixture_covers_grid():
    cases = ADV["cases"]
    assert len(cases) == 40
    scenarios = {"all_finite", "some_nan", "nan_rows", "zero_std_and_nan_group"}
    combos = sorted(
        (
            c["name"].split("-")[0],
            c["options"]["multi_objective_aggregation"],
            json.dumps(c["options"]["scale_rewards"]),
        )
        for c in cases
    )
    expected = sorted(
        (s, agg, json.dumps(scale))
        for s, agg, scale in itertools.product(
            scenarios,
            ("sum_then_normalize", "normalize_then_sum"),
            ("group", "batch", "none", True, False),
        )
    )
    assert combos == expected
    weights = [c["options"]["reward_weights"] for c in cases]
    assert None in weights and any(w is not None and len(set(w)) > 1 for w in weights)
    for c in cases:
        assert c["options"]["num_generations"] == 4
        r = nan_array(c["inputs"]["rewards_per_func"])
        assert r.shape == (16, 2)
        assert np.array_equal(
            r[~np.isnan(r)].astype(np.float32).astype(np.float64), r[~np.isnan(r)]
        )
        nan, all_nan = np.isnan(r), np.isnan(r).all(1)
        valid_per_group = (~all_nan).reshape(-1, 4).sum(1)
        scenario = c["name"].split("-")[0]
        if scenario == "all_finite":
            assert not nan.any()
        elif scenario == "some_nan":
            assert nan.any() and not all_nan.any()
        elif scenario == "nan_rows":
            assert all_nan.any() and (valid_per_group == 1).any()
        else:
            groups = r.reshape(-1, 4, 2)
            assert (valid_per_group == 0).any()
            assert any(np.all(g == g[0]) for g in groups if not np.isnan(g).any())
            if (
                c["options"]["multi_objective_aggregation"] == "sum_then_normalize"
                and c["options"]["scale_rewards"] != "batch"
            ):
                assert (
                    c["metrics"]["frac_reward_zero_std"] > 0
                )  # per-group std is zero for one group


def test_dpo_fixture_covers_grid():
    cases = DPO["cases"]
    combos = sorted(
        (
            c["options"]["loss_type"],
            c["options"]["beta"],
            c["options"]["label_smoothing"],
        )
        for c in cases
    )
    assert combos == sorted(
        itertools.product(("sigmoid", "hinge", "robust"), (0.1, 0.5), (0.0, 0.2))
    )
    for c in cases:
        x = c["inputs"]
        assert all(max(v) < 0 for v in x.values()), "log-probs are negative"
        logits = c["options"]["beta"] * (
            (np.array(x["policy_chosen"]) - x["ref_chosen"])
            - (np.array(x["policy_rejected"]) - x["ref_rejected"])
        )
        assert (
            (logits < 0).any()
            and (logits > 1).any()
            and ((logits > 0) & (logits < 1)).any()
        )


# --------------------------------------------------------------------------------------
# Regenerate with TRL (optional)
# --------------------------------------------------------------------------------------


def _trl_python():
    override = os.environ.get("DPO_GRPO_TRL_PYTHON")
    if override:
        return override
    try:
        import trl  # noqa: F401
    except ImportError:
        pytest.skip(
            "trl is not installed (set DPO_GRPO_TRL_PYTHON to an interpreter that has "
            "TRL 1.16.0)"
        )
    return sys.executable


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    python = _trl_python()
    out = tmp_path_factory.mktemp("trl-fixtures")
    proc = subprocess.run(
        [python, str(SCRIPT), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def _assert_same(ours, theirs, path="$", rel_tol=1e-12, abs_tol=1e-13):
    if isinstance(theirs, float) or isinstance(ours, float):
        assert isinstance(ours, (int, float)) and isinstance(theirs, (int, float)), path
        assert math.isclose(ours, theirs, rel_tol=rel_tol, abs_tol=abs_tol), (
            f"{path}: {ours!r} != {theirs!r}"
        )
    elif isinstance(theirs, dict):
        assert isinstance(ours, dict) and ours.keys() == theirs.keys(), path
        for k in theirs:
            _assert_same(ours[k], theirs[k], f"{path}.{k}", rel_tol, abs_tol)
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _assert_same(a, b, f"{path}[{i}]", rel_tol, abs_tol)
    else:
        assert ours == theirs, f"{path}: {ours!r} != {theirs!r}"


# one xdist worker runs the script (about 21 s) for all the files, not one run per
# worker; marked `fixtures`: `make test` runs it, `-m "not fixtures"` leaves it out
@pytest.mark.fixtures
@pytest.mark.xdist_group("trl-regenerate")
@pytest.mark.parametrize("name", FILES + NEW_FILES)
def test_regenerated_fixtures_match_committed(regenerated, name):
    new = json.loads((regenerated / name).read_text(encoding="utf-8"))
    committed = trl_fixture(name)
    assert new["trl_version"] == committed["trl_version"] == TRL_VERSION
    if (regenerated / name).read_bytes() == (TRL_FIXTURES / name).read_bytes():
        # same pinned stack on the same kind of CPU: the script is deterministic, the
        # files are identical
        return
    # Another CPU (or torch build) rounds TRL's float32 reductions differently in the
    # last bit or two: the numbers must still agree to float32 precision, far below any
    # formula change (dropping eps = 1e-4 from an advantage's denominator changes it by
    # about 1e-4, relative).
    _assert_same(new["cases"], committed["cases"], name, rel_tol=1e-6, abs_tol=1e-7)


def test_make_test_runs_the_fixture_regeneration():
    """The regeneration carries its own marker, and ``make test`` runs pytest on every
    marker: no ``-m`` deselects it there."""
    marks = {m.name for m in test_regenerated_fixtures_match_committed.pytestmark}
    assert "fixtures" in marks
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    command = next(line for line in recipe.splitlines() if "pytest tests" in line)
    pytest_args = command.split("pytest tests", 1)[1].split()
    assert "-m" not in pytest_args and "fixtures" not in command, command
