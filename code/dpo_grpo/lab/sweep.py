"""The lab's controlled comparison: every method, several seeds, one command, one file.

``python -m dpo_grpo.lab.sweep --preset cpu`` runs the chain of methods that changes
one ingredient at a time (offline RFT, online RFT, RLOO, GRPO, PPO with its critic),
then DPO and DPO+NLL, from the same SFT start for the seeds :data:`DEFAULT_SEEDS`
(``0 .. 9``), then the robustness settings
(:data:`~dpo_grpo.lab.robustness.ROBUSTNESS`: GRPO and RFT at the preset's untuned
settings, at twice the budget, on-policy GRPO, GRPO without its KL term), and writes
``lab-<preset>.json`` in the working directory. Each run records the SFT start, the
final and the best held-out pass rate, greedy and sampled, both budget axes and, for
the online methods, their training curves.

Options (:mod:`dpo_grpo.lab.sweep_command`): ``--seeds`` lists seeds, each a number or
an inclusive range (``--seeds 0 1 2``, ``--seeds 0-9``, ``--seeds 0-4 7``; a lone number
is one seed: ``--seeds 10`` is seed 10 alone, not ten seeds); ``--methods`` picks among
:data:`METHODS`; ``--no-robustness`` skips the robustness settings; ``--tuned FILE``
runs each method at the settings a tuning file chose (:mod:`dpo_grpo.lab.tuning`);
``--workers N`` runs N processes (the results do not change); ``--out FILE`` writes
elsewhere. A rerun never replaces the file the package ships,
``code/dpo_grpo/data/lab_results/lab-<preset>.json``, which the lab chapter renders: a
maintainer refreshes it by naming it, from the repository root, with
:func:`refresh_command`'s command (``python -m dpo_grpo.lab.sweep --preset cpu --seeds
0-9 --tuned code/dpo_grpo/data/lab_results/lab-cpu-tuning.json --out
code/dpo_grpo/data/lab_results/lab-cpu.json``).

:func:`summarise` gives per-method mean, range and a 95% t-interval of the mean over
seeds; :func:`paired` gives the same for per-seed differences between two methods (same
seed = same SFT start, same task split) together with the exact two-sided sign test
(seeds ahead, binomial p); :func:`verdict` and :func:`robustness_table` turn those into
sentences and rows, so the chapter's conclusions are computed from the file. A
difference is called only when its t-interval excludes zero; otherwise it is "not
separated".
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import sys
import time

import numpy as np
import torch

from .. import _validation as v
from ..i18n import N_, tr
from ..stats import sign_test
from .config import LabConfig
from .progress import bar, wanted
from .robustness import robustness_settings
from .run import ALGORITHMS, budget, run_many
from .runtime import environment
from .task import make_task

#: the chain (offline RFT -> online RFT -> RLOO -> GRPO -> PPO), then DPO and DPO+NLL
METHODS = ("rft", "online_rft", "rloo", "grpo", "ppo", "dpo", "dpo+nll")
#: the seeds of a sweep unless told (``--seeds 0-9``)
DEFAULT_SEEDS = tuple(range(10))
#: where the package keeps a preset's results, relative to the repository root
SHIPPED = "code/dpo_grpo/data/lab_results/lab-{preset}.json"
#: the methods' names as the page shows them (``tr`` where shown: "online RFT" reads
#: 在线 RFT in Chinese; the acronyms stay)
NAMES = {
    "grpo": "GRPO",
    "ppo": "PPO",
    "dpo": "DPO",
    "dpo+nll": "DPO + NLL",
    "rft": "RFT",
    "online_rft": N_("online RFT"),
    "rloo": "RLOO",
}
METRICS = (
    "final_greedy",
    "final_sampled",
    "best_greedy",
    "best_sampled",
    "gain_greedy",
    "gain_sampled",
)
RESULTS_FORMAT = 4
#: formats :func:`load` still reads (format 1: no robustness runs, no PPO; format 2:
#: no chain, no token passes, no per-class pass rates; format 3: robustness overrides
#: shared by every method)
READABLE_FORMATS = (1, 2, 3, 4)
LEVEL = 0.95
#: per-step curves a results file keeps for the online methods
CURVES = ("train_pass_rate", "reward_mean", "kl", "explained_variance", "value_loss")
#: per-class held-out curves a results file keeps (carry / no carry, greedy / sampled)
CLASS_CURVES = (
    "heldout_pass_rate_carry",
    "heldout_pass_rate_nocarry",
    "heldout_pass_rate_sampled_carry",
    "heldout_pass_rate_sampled_nocarry",
)
#: the differences :func:`verdict` states, (a, b) for "a - b"
PAIRS = (
    ("online_rft", "rft"),
    ("rloo", "online_rft"),
    ("grpo", "rloo"),
    ("grpo", "dpo"),
    ("grpo", "dpo+nll"),
    ("grpo", "rft"),
    ("ppo", "grpo"),
    ("ppo", "rft"),
    ("dpo+nll", "rft"),
    ("dpo+nll", "dpo"),
)
#: fields of a run record that must be identical when the same run is repeated on the
#: same machine
GREEDY_COMPARED = ("sft_steps", "start_greedy", "heldout_pass_rate")
#: fields that may differ by one sample (:func:`compare`)
SAMPLED_COMPARED = ("start_sampled", "heldout_pass_rate_sampled")


def run_record(history) -> dict:
    """The numbers of one run that the results file keeps (curves included, weights
    not)."""
    g, s = list(history.heldout_pass_rate), list(history.heldout_pass_rate_sampled)
    if not g:
        raise ValueError("history must hold at least one evaluation")
    rec = {
        "seed": history.seed,
        "algorithm": history.algorithm,
        "sft_steps": history.sft_steps,
        "sft_probe_pass_rate": history.sft_probe_pass_rate,
        "eval_optimizer_steps": list(history.eval_optimizer_steps),
        "eval_completions_sampled": list(history.eval_completions_sampled),
        "eval_forward_tokens": list(history.eval_forward_tokens),
        "eval_backward_tokens": list(history.eval_backward_tokens),
        "heldout_pass_rate": g,
        "heldout_pass_rate_sampled": s,
        "start_greedy": g[0],
        "final_greedy": g[-1],
        "best_greedy": max(g),
        "best_greedy_optimizer_step": history.eval_optimizer_steps[int(np.argmax(g))],
        "gain_greedy": g[-1] - g[0],
        "start_sampled": s[0] if s else None,
        "final_sampled": s[-1] if s else None,
        "best_sampled": max(s) if s else None,
        "gain_sampled": (s[-1] - s[0]) if s else None,
        "optimizer_steps": history.optimizer_steps[-1]
        if history.optimizer_steps
        else 0,
        "completions_sampled": history.completions_sampled[-1]
        if history.completions_sampled
        else 0,
        "tokens_generated": history.tokens_generated[-1]
        if history.tokens_generated
        else 0,
        "train_wall_time_s": history.wall_time_s[-1] if history.wall_time_s else 0.0,
        "n_pairs": history.n_pairs,
        "n_heldout_prompts": history.n_heldout_prompts,
    }
    for name in CLASS_CURVES:
        curve = list(getattr(history, name))
        if curve:
            rec[name] = curve
    for name in CURVES:
        curve = list(getattr(history, name))
        if curve:
            rec[name] = curve
    return rec


def run_sweep(
    preset: str = "cpu",
    seeds=DEFAULT_SEEDS,
    methods=METHODS,
    *,
    device=None,
    log=None,
    progress: bool | None = None,
    robustness: bool = False,
    tuned=None,
    tuned_from=None,
    workers: int = 1,
    **overrides,
) -> dict:
    """Run every method for every seed from the preset's config (and, with
    ``robustness=True``, every setting of
    :data:`~dpo_grpo.lab.robustness.ROBUSTNESS`); return the results dict
    (JSON-ready). ``log(line)`` is called after each run; ``progress``: one bar over all
    runs (:mod:`dpo_grpo.lab.progress`). ``tuned``: ``{method: {field: value}}`` that
    replace the preset's for that method's main runs (a tuning file's ``best``, read
    from ``tuned_from``, :mod:`dpo_grpo.lab.tuning`); the robustness settings change
    each method's own config. ``workers``: processes
    (:func:`dpo_grpo.lab.run.run_many`; the results do not depend on it)."""
    seeds = [v.integer(s, "seeds", minimum=0) for s in v.sequence(list(seeds), "seeds")]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(
            f"seeds must be a non-empty list of distinct seeds, got {seeds}"
        )
    methods = list(v.sequence(list(methods), "methods"))
    for m in methods:
        if m not in ALGORITHMS:
            raise ValueError(
                f"methods must hold algorithms from {ALGORITHMS}, got {m!r}"
            )
    robustness = v.boolean(robustness, "robustness")
    show = wanted(progress)
    cfg = LabConfig.preset(
        preset, **({"device": device} if device is not None else {}), **overrides
    )
    if cfg.eval_samples == 0:
        raise ValueError("the sweep reports sampled pass@1: eval_samples must be > 0")
    tuned = dict(tuned or {})
    own = {m: dataclasses.replace(cfg, **tuned.get(m, {})) for m in methods}
    settings = robustness_settings(own, cfg, methods) if robustness else {}
    jobs = [(None, own[m], m, s) for s in seeds for m in methods] + [
        (name, st["configs"][m], m, s)
        for name, st in settings.items()
        for s in seeds
        for m in st["methods"]
    ]
    records = [None] * len(jobs)
    t0 = time.perf_counter()
    shown = bar(len(jobs), f"lab sweep ({preset})", show, unit="run")
    try:
        done = run_many([job[1:] for job in jobs], run_record, workers)
        for i, rec in done:
            records[i] = rec
            name, _, m, seed = jobs[i]
            where = "" if name is None else f"[{name}] "
            shown.set_postfix_str(f"{where}{NAMES[m]} seed {seed}", refresh=False)
            shown.update(1)
            if log is not None:
                log(
                    f"{where}seed {seed} {NAMES[m]:<10} greedy "
                    f"{rec['start_greedy']:.3f} -> {rec['final_greedy']:.3f} "
                    f"(best {rec['best_greedy']:.3f}); sampled "
                    f"{rec['start_sampled']:.3f} -> {rec['final_sampled']:.3f}  "
                    f"[{time.perf_counter() - t0:.0f} s]"
                )
    finally:
        shown.close()
    # in job order: per method, the seeds in order
    runs = {m: [] for m in methods}
    for st in settings.values():
        st["runs"] = {m: [] for m in st["methods"]}
    for (name, _, m, _), rec in zip(jobs, records):
        (runs if name is None else settings[name]["runs"])[m].append(rec)
    cfg_dict = cfg.to_dict()
    cfg_dict.pop("device")
    return {
        "format": RESULTS_FORMAT,
        "preset": preset,
        "overrides": overrides,
        "seeds": seeds,
        "methods": methods,
        "command": command_line(
            preset, seeds, methods, robustness=robustness, tuned=tuned_from
        ),
        # False: every method at the preset's settings; else each method's own
        "tuned": tuned or False,
        "config": cfg_dict,
        "n_heldout_prompts": len(make_task(cfg).heldout_prompts()),
        "budget": {m: budget(own[m], m) for m in methods},
        "environment": environment(),
        "device": str(torch.device(cfg.device)) if cfg.device else None,
        "total_seconds": time.perf_counter() - t0,
        "runs": runs,
        "robustness": {
            name: {
                "label": st["label"],
                "overrides": st["overrides"],
                "methods": st["methods"],
                "budget": {m: budget(c, m) for m, c in st["configs"].items()},
                "runs": st["runs"],
            }
            for name, st in settings.items()
        },
    }


def t_interval(x, level: float = LEVEL) -> dict:
    """Mean, min, max and the Student-t interval of the mean over the entries of ``x``
    (``mean +- t_{n-1} * sd / sqrt(n)``, sample sd; NaN bounds for one entry)."""
    from scipy import stats  # the book's pinned environment has it; Colab too

    x = v.as_float_array(x, "x", ndim=1)
    v.scalar(level, "level", open_unit=True)
    n, mean = len(x), float(x.mean())
    if n < 2:
        lo = hi = float("nan")
    else:
        half = stats.t.ppf((1 + level) / 2, n - 1) * x.std(ddof=1) / np.sqrt(n)
        lo, hi = mean - half, mean + half
    return {
        "mean": mean,
        "min": float(x.min()),
        "max": float(x.max()),
        "ci_low": float(lo),
        "ci_high": float(hi),
        "n": int(n),
    }


def _check_results(results):
    if (
        not isinstance(results, dict)
        or results.get("format") not in READABLE_FORMATS
        or "runs" not in results
    ):
        raise ValueError(
            "results must be the dict written by dpo_grpo.lab.sweep "
            f"(format {RESULTS_FORMAT})"
        )
    return results


def summarise(results) -> dict:
    """``{method: {metric: {mean, min, max, ci_low, ci_high, n}}}`` over seeds (95%
    t-intervals), plus ``"start"`` (the SFT start, shared by every method of a seed)."""
    _check_results(results)
    out = {}
    first = results["runs"][results["methods"][0]]
    out["start"] = {
        k: t_interval([r[k] for r in first]) for k in ("start_greedy", "start_sampled")
    }
    for m, rows in results["runs"].items():
        out[m] = {k: t_interval([r[k] for r in rows]) for k in METRICS}
    return out


def direction(p: dict) -> str:
    """``"ahead"`` / ``"behind"`` when the interval of ``p`` excludes zero, else
    ``"not separated"``."""
    if p["ci_low"] > 0:
        return "ahead"
    if p["ci_high"] < 0:
        return "behind"
    return "not separated"


def _runs(results, setting):
    """Per method, the runs of a robustness ``setting`` (None: the main runs); a
    method the setting did not rerun has its main runs."""
    runs = dict(results["runs"])
    if setting is not None:
        settings = results.get("robustness") or {}
        if setting not in settings:
            raise ValueError(
                f"setting must be one of {list(settings)}, got {setting!r}"
            )
        runs.update(settings[setting]["runs"])
    return runs


def paired(
    results, a: str, b: str, metric: str = "final_greedy", *, setting=None
) -> dict:
    """Per-seed difference ``a - b`` of ``metric`` (of a robustness ``setting``, if
    given): its t-interval over seeds, the sign test (:func:`sign_test`), the
    ``differences`` and their ``direction``."""
    _check_results(results)
    runs = _runs(results, setting)
    for name, m in (("a", a), ("b", b)):
        if m not in runs:
            raise ValueError(f"{name} must be one of {list(runs)}, got {m!r}")
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    ra = {r["seed"]: r[metric] for r in runs[a]}
    rb = {r["seed"]: r[metric] for r in runs[b]}
    seeds = sorted(set(ra) & set(rb))
    d = [ra[s] - rb[s] for s in seeds]
    out = t_interval(d)
    out.update(sign_test(d), differences=d)
    out["direction"] = direction(out)
    return out


def gain(results, method: str, metric: str = "final_greedy") -> dict:
    """:func:`paired`'s numbers for ``method``'s final minus its SFT start
    (``metric`` ``"final_greedy"`` or ``"final_sampled"``): whether it helped."""
    _check_results(results)
    if metric not in ("final_greedy", "final_sampled"):
        raise ValueError(
            f"metric must be 'final_greedy' or 'final_sampled', got {metric!r}"
        )
    if method not in results["runs"]:
        raise ValueError(
            f"method must be one of {list(results['runs'])}, got {method!r}"
        )
    d = [r[metric.replace("final", "gain")] for r in results["runs"][method]]
    out = t_interval(d)
    out.update(sign_test(d), differences=d)
    out["direction"] = direction(out)
    return out


_WHAT = {
    "final_greedy": N_("final greedy pass rate"),
    "final_sampled": N_("final sampled pass@1"),
    "best_greedy": N_("best greedy pass rate"),
    "best_sampled": N_("best sampled pass@1"),
    "gain_greedy": N_("greedy gain over the start"),
    "gain_sampled": N_("sampled gain over the start"),
}


def _span(p: dict, what: str = N_("difference")) -> str:
    return tr(
        "mean {what} {mean:+.3f}, 95% t-interval [{lo:+.3f}, {hi:+.3f}] over {n} "
        "seeds; ahead in {ahead}, behind in {behind}, tied in {ties}; exact two-sided "
        "sign test on the untied seeds p = {p:.3f}",
        what=tr(what),
        mean=p["mean"],
        lo=p["ci_low"],
        hi=p["ci_high"],
        n=p["n"],
        ahead=p["ahead"],
        behind=p["behind"],
        ties=p["ties"],
        p=p["sign_p"],
    )


def verdict(results, metric: str = "final_greedy") -> list:
    """Sentences on each difference of :data:`PAIRS` present in the results, computed
    from them: a difference is called only when its t-interval excludes zero, else the
    sentence says "not separated"; each gives the sign test too."""
    _check_results(results)
    if metric not in _WHAT:
        raise ValueError(f"metric must be one of {tuple(_WHAT)}, got {metric!r}")
    what = _WHAT[metric]
    lines = []
    for a, b in PAIRS:
        if a not in results["runs"] or b not in results["runs"]:
            continue
        p = paired(results, a, b, metric)
        d = p["direction"]
        says = {
            "ahead": N_("{a} is ahead of {b} on the {what} ({span})."),
            "behind": N_("{a} is behind {b} on the {what} ({span})."),
            "not separated": N_(
                "{a} versus {b} on the {what}: not separated ({span})."
            ),
        }[d]
        lines.append(
            tr(says, a=tr(NAMES[a]), b=tr(NAMES[b]), what=tr(what), span=_span(p))
        )
    return lines


def gain_verdict(results, metric: str = "final_greedy") -> list:
    """One sentence per method: did it end above its SFT start (t-interval of the
    per-seed gain), below it, or not separated from it."""
    _check_results(results)
    what = _WHAT.get(metric, metric)
    lines = []
    for m in results["runs"]:
        p = gain(results, m, metric)
        d = p["direction"]
        says = {
            "ahead": N_("{m} ends above its SFT start on the {what} ({span})."),
            "behind": N_("{m} ends below its SFT start on the {what} ({span})."),
            "not separated": N_(
                "{m} is not separated from its SFT start on the {what} ({span})."
            ),
        }[d]
        span = _span(p, N_("gain"))
        lines.append(tr(says, m=tr(NAMES[m]), what=tr(what), span=span))
    return lines


def robustness_table(
    results, a: str = "grpo", b: str = "rft", metric: str = "final_greedy"
) -> list:
    """One row per setting, the main one first: ``setting`` (key, None for the
    main runs), ``label``, the mean ``metric`` of ``a`` and of ``b`` and
    :func:`paired`'s numbers for ``a - b``."""
    _check_results(results)
    rows = []
    settings = results.get("robustness") or {}
    for key in [None, *settings]:
        runs = _runs(results, key)
        p = paired(results, a, b, metric, setting=key)
        rows.append(
            {
                "setting": key,
                "label": "main runs" if key is None else settings[key]["label"],
                a: float(np.mean([r[metric] for r in runs[a]])),
                b: float(np.mean([r[metric] for r in runs[b]])),
                **p,
            }
        )
    return rows


def robustness_lines(results, metric: str = "final_greedy") -> list:
    """One line per robustness setting: GRPO - RFT under it (the rows of
    :func:`robustness_table` after the main one), as the command prints them."""
    return [
        f"[{row['setting']}] {row['label']}: GRPO - RFT {_span(row)}"
        for row in robustness_table(results, metric=metric)[1:]
    ]


def sample_size(results) -> float:
    """One sample's share of a sampled pass@1 in ``results``: 1 / (held-out prompts x
    ``eval_samples``)."""
    _check_results(results)
    n = results.get("n_heldout_prompts")
    if n is None:  # format 1
        cfg = LabConfig(**results["config"])
        n = len(make_task(cfg).heldout_prompts())
    return 1.0 / (n * results["config"]["eval_samples"])


def compare(history_or_record, results, method: str) -> dict:
    """Compare a live run with the file's run of the same method and seed.

    What the platform promises is held strictly: the SFT steps, the SFT start and the
    greedy held-out curve (an argmax per token) must be equal (``greedy_exact``). What
    it cannot promise is tolerated: a sampled pass@1 may differ by one sample
    (``sample``, :func:`sample_size`), because a draw that falls within the last bit
    of a probability boundary can flip when a floating-point sum is rounded
    differently. ``within_tolerance`` is both; ``exact`` is bit-for-bit equality,
    ``max_abs_diff`` the largest difference of any compared number,
    ``sampled_max_diff`` that of the sampled pass@1s and ``same_environment`` whether
    the torch build and CPU model are the file's (only then is ``within_tolerance``
    expected)."""
    _check_results(results)
    rec = (
        history_or_record
        if isinstance(history_or_record, dict)
        else run_record(history_or_record)
    )
    rows = {r["seed"]: r for r in results["runs"].get(method, [])}
    if rec["seed"] not in rows:
        raise ValueError(f"the results hold no {method!r} run with seed {rec['seed']}")
    ref = rows[rec["seed"]]

    def worst(keys) -> float:
        out = 0.0
        for k in keys:
            x = np.atleast_1d(np.asarray(rec[k], dtype=float))
            y = np.atleast_1d(np.asarray(ref[k], dtype=float))
            if x.shape != y.shape:
                return float("inf")
            out = max(out, float(np.max(np.abs(x - y))) if x.size else 0.0)
        return out

    greedy = worst(GREEDY_COMPARED)
    sampled = worst(SAMPLED_COMPARED)
    sample = sample_size(results)
    if ref.get("n_heldout_prompts"):  # format 3: each seed has its own split
        sample = 1.0 / (ref["n_heldout_prompts"] * results["config"]["eval_samples"])
    return {
        "exact": greedy == 0.0 and sampled == 0.0,
        "max_abs_diff": max(greedy, sampled),
        "greedy_exact": greedy == 0.0,
        "sampled_max_diff": sampled,
        "sample": sample,
        "within_tolerance": greedy == 0.0 and sampled <= sample * (1 + 1e-9),
        "same_environment": environment() == results["environment"],
    }


def results_path(preset: str = "cpu") -> pathlib.Path:
    """Where the shipped results of a preset live inside the installed package."""
    if preset not in ("cpu", "gpu"):
        raise ValueError(f"preset must be 'cpu' or 'gpu', got {preset!r}")
    return (
        pathlib.Path(__file__).resolve().parents[1]
        / "data"
        / "lab_results"
        / f"lab-{preset}.json"
    )


def load(preset: str = "cpu", path=None):
    """The results of a preset: the file the package ships, or, given ``path``, a file
    the sweep wrote (``lab-<preset>.json`` in its working directory); ``None`` when
    that file does not exist."""
    shipped = results_path(preset)
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a file path, got {type(path).__name__}")
    path = shipped if path is None else pathlib.Path(path)
    if not path.is_file():
        return None
    with open(path, encoding="utf-8") as fh:
        return _check_results(json.load(fh))


def refresh_command(preset: str = "cpu") -> str:
    """The command, run from the repository root, that rewrites the results file the
    package ships for ``preset`` (the only way the sweep writes into the package): at
    the settings of the tuning file shipped beside it, if there is one."""
    tuning = results_path(preset).with_name(f"lab-{preset}-tuning.json")
    line = f"python -m dpo_grpo.lab.sweep --preset {preset} --seeds "
    line += format_seeds(DEFAULT_SEEDS)
    if tuning.is_file():
        line += " --tuned " + str(pathlib.Path(SHIPPED).parent / tuning.name)
    return line + " --out " + SHIPPED.format(preset=preset)


def format_seeds(seeds) -> str:
    """``seeds`` as ``--seeds`` takes them, runs of consecutive seeds as ranges:
    ``[0, 1, 2, 5]`` -> ``"0-2 5"``."""
    seeds = [v.integer(s, "seeds", minimum=0) for s in v.sequence(seeds, "seeds")]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct seeds, at least one, got {seeds}")
    parts, run = [], []
    for s in sorted(seeds):
        if run and s != run[-1] + 1:
            parts.append(run)
            run = []
        run.append(s)
    parts.append(run)
    return " ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in parts if r)


def command_line(
    preset: str, seeds, methods, *, robustness: bool = True, tuned=None
) -> str:
    """The ``python -m dpo_grpo.lab.sweep`` command that runs these seeds and methods
    (``--methods`` only for some of :data:`METHODS`); a results file records it."""
    v.choice(preset, "preset", ("cpu", "gpu"))
    methods = [v.choice(m, "methods", METHODS) for m in v.sequence(methods, "methods")]
    robustness = v.boolean(robustness, "robustness")
    line = (
        f"python -m dpo_grpo.lab.sweep --preset {preset} --seeds {format_seeds(seeds)}"
    )
    if list(methods) != list(METHODS):
        line += " --methods " + " ".join(methods)
    line += "" if robustness else " --no-robustness"
    return line + (f" --tuned {tuned}" if tuned else "")


if __name__ == "__main__":  # the command's options and main: sweep_command
    from dpo_grpo.lab.sweep_command import main

    sys.exit(main())
