"""The lab's controlled comparison: every method, several seeds, one command, one results file.

``python -m dpo_grpo.lab.sweep --preset cpu --seeds 5`` runs GRPO, DPO, DPO+NLL and RFT (the NLL-only control on
the same selected data) from the same SFT start for seeds ``0 .. 4`` and writes ``code/dpo_grpo/data/lab_results/
lab-<preset>.json``, which ships with the package and which the lab chapter renders. Each run records the SFT
start, the final and the best held-out pass rate, greedy and sampled, and both budget axes.

:func:`summarise` gives per-method mean, range and a seeded percentile-bootstrap interval of the mean over seeds;
:func:`paired` does the same for per-seed differences between two methods (same seed = same SFT start, same task
split); :func:`verdict` turns those into sentences, so the chapter's conclusions are computed from the file.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import sys
import time

import numpy as np
import torch

from .. import _validation as v
from .config import LabConfig
from .run import ALGORITHMS, budget, run_lab

METHODS = ("grpo", "dpo", "dpo+nll", "rft")
NAMES = {
    "grpo": "GRPO",
    "ppo": "PPO",
    "dpo": "DPO",
    "dpo+nll": "DPO + NLL",
    "rft": "RFT",
}
METRICS = (
    "final_greedy",
    "final_sampled",
    "best_greedy",
    "best_sampled",
    "gain_greedy",
    "gain_sampled",
)
RESULTS_FORMAT = 1
#: fields of a run record that must be identical when the same run is repeated on the same machine
COMPARED = (
    "sft_steps",
    "start_greedy",
    "start_sampled",
    "heldout_pass_rate",
    "heldout_pass_rate_sampled",
)


def environment() -> dict:
    """What the results depend on besides the config and seed: torch build, CPU model, thread count."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(
                (
                    line.split(":", 1)[1].strip()
                    for line in fh
                    if line.startswith("model name")
                ),
                cpu,
            )
    except OSError:
        pass
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu": cpu,
    }


def run_record(history) -> dict:
    """The numbers of one run that the results file keeps (curves included, weights not)."""
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
    }
    return rec


def run_sweep(
    preset: str = "cpu",
    seeds=range(5),
    methods=METHODS,
    *,
    device=None,
    log=None,
    **overrides,
) -> dict:
    """Run every method for every seed from the preset's config; return the results dict (JSON-ready)."""
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
    cfg = LabConfig.preset(
        preset, **({"device": device} if device is not None else {}), **overrides
    )
    if cfg.eval_samples == 0:
        raise ValueError("the sweep reports sampled pass@1: eval_samples must be > 0")
    runs = {m: [] for m in methods}
    t0 = time.perf_counter()
    for seed in seeds:
        for m in methods:
            h = run_lab(cfg, algorithm=m, seed=seed)
            rec = run_record(h)
            runs[m].append(rec)
            if log is not None:
                log(
                    f"seed {seed} {NAMES[m]:<10} greedy {rec['start_greedy']:.3f} -> {rec['final_greedy']:.3f} "
                    f"(best {rec['best_greedy']:.3f}); sampled {rec['start_sampled']:.3f} -> "
                    f"{rec['final_sampled']:.3f}  [{time.perf_counter() - t0:.0f} s]"
                )
    cfg_dict = cfg.to_dict()
    cfg_dict.pop("device")
    return {
        "format": RESULTS_FORMAT,
        "preset": preset,
        "overrides": overrides,
        "seeds": seeds,
        "methods": methods,
        "command": f"python -m dpo_grpo.lab.sweep --preset {preset} --seeds {len(seeds)}",
        "config": cfg_dict,
        "budget": {m: budget(cfg, m) for m in methods},
        "environment": environment(),
        "device": str(torch.device(cfg.device)) if cfg.device else None,
        "total_seconds": time.perf_counter() - t0,
        "runs": runs,
    }


def _interval(x, *, seed: int = 0, n_boot: int = 10_000, level: float = 0.95) -> dict:
    """Mean, min, max and a percentile-bootstrap interval of the mean (resampling seeds, seeded)."""
    x = np.asarray(x, dtype=float)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), (n_boot, len(x)))].mean(1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return {
        "mean": float(x.mean()),
        "min": float(x.min()),
        "max": float(x.max()),
        "ci_low": float(lo),
        "ci_high": float(hi),
        "n": int(len(x)),
    }


def _check_results(results):
    if (
        not isinstance(results, dict)
        or results.get("format") != RESULTS_FORMAT
        or "runs" not in results
    ):
        raise ValueError(
            f"results must be the dict written by dpo_grpo.lab.sweep (format {RESULTS_FORMAT})"
        )
    return results


def summarise(results) -> dict:
    """``{method: {metric: {mean, min, max, ci_low, ci_high, n}}}`` over seeds, plus ``"start"`` (the SFT start,
    shared by every method of a seed)."""
    _check_results(results)
    out = {}
    first = results["runs"][results["methods"][0]]
    out["start"] = {
        k: _interval([r[k] for r in first]) for k in ("start_greedy", "start_sampled")
    }
    for m, rows in results["runs"].items():
        out[m] = {k: _interval([r[k] for r in rows]) for k in METRICS}
    return out


def paired(results, a: str, b: str, metric: str = "final_greedy") -> dict:
    """Per-seed difference ``a - b`` of ``metric``: interval over seeds, and how many seeds ``a`` was ahead."""
    _check_results(results)
    for name, m in (("a", a), ("b", b)):
        if m not in results["runs"]:
            raise ValueError(
                f"{name} must be one of {list(results['runs'])}, got {m!r}"
            )
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    ra = {r["seed"]: r[metric] for r in results["runs"][a]}
    rb = {r["seed"]: r[metric] for r in results["runs"][b]}
    seeds = sorted(set(ra) & set(rb))
    d = [ra[s] - rb[s] for s in seeds]
    out = _interval(d)
    out.update(
        ahead=int(sum(x > 0 for x in d)),
        behind=int(sum(x < 0 for x in d)),
        differences=d,
    )
    # "ahead" / "behind": the interval excludes zero; else "unresolved"
    out["direction"] = _direction(out)
    return out


def _direction(p: dict) -> str:
    if p["ci_low"] > 0:
        return "ahead"
    if p["ci_high"] < 0:
        return "behind"
    return "unresolved"


def verdict(results, metric: str = "final_greedy") -> list:
    """Sentences on GRPO against each offline method and on the NLL control, computed from the results: a
    difference is called only when its bootstrap interval excludes zero; otherwise the sentence says so."""
    _check_results(results)
    what = {
        "final_greedy": "final greedy pass rate",
        "final_sampled": "final sampled pass@1",
        "best_greedy": "best greedy pass rate",
        "best_sampled": "best sampled pass@1",
        "gain_greedy": "greedy gain over the start",
        "gain_sampled": "sampled gain over the start",
    }[metric]
    n = len(results["seeds"])
    lines = []
    pairs = [("grpo", m) for m in ("dpo", "dpo+nll", "rft")] + [
        ("dpo+nll", "rft"),
        ("dpo+nll", "dpo"),
    ]
    for a, b in pairs:
        if a not in results["runs"] or b not in results["runs"]:
            continue
        p = paired(results, a, b, metric)
        span = (
            f"mean difference {p['mean']:+.3f}, 95% bootstrap interval [{p['ci_low']:+.3f}, {p['ci_high']:+.3f}], "
            f"ahead in {p['ahead']} of {n} seeds"
        )
        d = _direction(p)
        if d == "unresolved":
            lines.append(
                f"{NAMES[a]} versus {NAMES[b]} on the {what}: not resolved by {n} seeds ({span})."
            )
        else:
            lines.append(
                f"{NAMES[a]} is {'ahead of' if d == 'ahead' else 'behind'} {NAMES[b]} on the {what} "
                f"({span})."
            )
    return lines


def compare(history_or_record, results, method: str) -> dict:
    """Compare a live run with the file's run of the same method and seed: ``max_abs_diff`` over the logged
    start, SFT steps and pass-rate curves, ``exact`` (bit-for-bit equal) and ``same_environment`` (same torch build
    and CPU model as the file; only then is an exact match expected)."""
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
    worst = 0.0
    for k in COMPARED:
        x, y = (
            np.atleast_1d(np.asarray(rec[k], dtype=float)),
            np.atleast_1d(np.asarray(ref[k], dtype=float)),
        )
        if x.shape != y.shape:
            return {
                "exact": False,
                "max_abs_diff": float("inf"),
                "same_environment": environment() == results["environment"],
            }
        worst = max(worst, float(np.max(np.abs(x - y))) if x.size else 0.0)
    return {
        "exact": worst == 0.0,
        "max_abs_diff": worst,
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


def load(preset: str = "cpu"):
    """The shipped results of a preset, or ``None`` when the package holds none."""
    path = results_path(preset)
    if not path.is_file():
        return None
    with open(path, encoding="utf-8") as fh:
        return _check_results(json.load(fh))


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Run every lab method for several seeds; write the results file."
    )
    parser.add_argument("--preset", default="cpu", choices=("cpu", "gpu"))
    parser.add_argument(
        "--seeds", type=int, default=5, help="seeds 0 .. N-1 (default 5)"
    )
    parser.add_argument(
        "--out",
        type=pathlib.Path,
        default=None,
        help="default: the package's lab_results folder",
    )
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be >= 1")
    results = run_sweep(
        args.preset, range(args.seeds), log=lambda s: print(s, flush=True)
    )
    out = args.out or results_path(args.preset)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    for line in verdict(results):
        print(line)
    print(f"wrote {out} ({results['total_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
