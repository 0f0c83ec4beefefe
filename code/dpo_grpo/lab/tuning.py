"""Choosing each method's settings on a validation split, never the held-out set.

:func:`tune` runs every method of :data:`GRID` at every point of its grid with
``eval_split="validation"``: the runs train on the training problems minus a validation
set carved from them (:func:`dpo_grpo.lab.task.validation_task`) and are scored on that
set. Every grid point samples the same completions as the preset, so none gets more
data than the comparison allows; some take fewer optimiser steps. The grid: the learning
rate and the passes over each batch of samples for every method (the offline methods'
``dpo_steps`` 40 or 80, about 4 or 8 epochs over their pairs; the online methods'
``num_iterations`` 1 or 2); for GRPO also the group size at a fixed number of
completions a step (8 or 4, with 16 or 32 prompts) and the KL weight; for PPO also the
critic's learning rate and its warm-up. :func:`best_settings` keeps, per method, the
grid point with the highest mean final sampled pass@1 over the seeds.

``python -m dpo_grpo.lab.tuning --seeds 0 1 2 --workers 2 --out FILE`` writes the
grid's scores and the chosen settings (JSON, with the command that made it).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import pathlib
import sys
import time

import numpy as np

from .. import _validation as v
from ..i18n import tr
from .config import LabConfig
from .run import run_many


def _each(field: str, values) -> tuple:
    return tuple({field: x} for x in values)


_OFFLINE = (_each("dpo_lr", (3e-4, 1e-3, 3e-3)), _each("dpo_steps", (40, 80)))
_ONLINE_LR = _each("grpo_lr", (1e-4, 3e-4, 1e-3))
_FAST_LR = _each("grpo_lr", (3e-4, 1e-3, 3e-3))
_EPOCHS = _each("num_iterations", (1, 2))
#: each method's grid: one tuple of settings per dimension; a grid point is one
#: setting of each, merged (a setting may move two fields together: group size at a
#: fixed number of completions a step)
GRID = {
    "rft": _OFFLINE,
    "dpo": _OFFLINE,
    "dpo+nll": _OFFLINE,
    "online_rft": (_ONLINE_LR, _EPOCHS),
    "rloo": (_ONLINE_LR, _EPOCHS),
    "grpo": (
        _FAST_LR,
        _EPOCHS,
        (
            {"num_generations": 8, "prompts_per_step": 16},
            {"num_generations": 4, "prompts_per_step": 32},
        ),
        _each("beta", (0.04, 0.0)),
    ),
    "ppo": (
        _FAST_LR,
        _EPOCHS,
        _each("critic_lr", (3e-4, 3e-3)),
        _each("critic_warmup", (0, 5)),
    ),
}


def grid_points(method: str) -> list:
    """The settings (dicts of fields) :func:`tune` tries for ``method``."""
    v.choice(method, "method", tuple(GRID))
    return [
        {k: x for setting in point for k, x in setting.items()}
        for point in itertools.product(*GRID[method])
    ]


def grid_text(method: str) -> str:
    """``method``'s grid in one line, a dimension per factor: ``grpo_lr in {0.0003,
    0.001, 0.003} x num_iterations in {1, 2} x ...``."""
    v.choice(method, "method", tuple(GRID))
    parts = []
    for dim in GRID[method]:
        fields = list(dim[0])
        name = fields[0] if len(fields) == 1 else "(" + ", ".join(fields) + ")"
        values = [
            f"{s[fields[0]]:g}"
            if len(fields) == 1
            else "(" + ", ".join(f"{s[f]:g}" for f in fields) + ")"
            for s in dim
        ]
        parts.append(tr("{name} in {{{values}}}", name=name, values=", ".join(values)))
    return " x ".join(parts)


def best_settings(scores: dict) -> dict:
    """``{method: settings}``: per method, the settings whose per-seed scores have the
    highest mean (the first such on a tie). ``scores``: ``{method: [{"settings":
    {field: value}, "per_seed": [score, ...]}, ...]}``."""
    out = {}
    for m, rows in scores.items():
        if not rows:
            raise ValueError(f"scores[{m!r}] must not be empty")
        out[m] = dict(
            max(rows, key=lambda r: float(np.mean(r["per_seed"])))["settings"]
        )
    return out


def final_sampled(history) -> float:
    """The final sampled pass@1 of a run (what the grid is scored on)."""
    return float(history.heldout_pass_rate_sampled[-1])


def tune(
    preset="cpu",
    seeds=(0, 1, 2),
    methods=tuple(GRID),
    *,
    workers=1,
    log=None,
    **overrides,
):
    """Run every grid point of every method, for every seed, on the validation split;
    return the JSON-ready results: the seeds, per method the scores of every grid point
    (final sampled pass@1 on the validation set) and ``best``
    (:func:`best_settings`). ``workers``: processes (:func:`dpo_grpo.lab.run.run_many`;
    the scores do not depend on it)."""
    seeds = [v.integer(s, "seeds", minimum=0) for s in v.sequence(list(seeds), "seeds")]
    methods = [v.choice(m, "methods", tuple(GRID)) for m in methods]
    base = LabConfig.preset(preset, eval_split="validation", **overrides)
    points = [(m, p) for m in methods for p in grid_points(m)]
    jobs = [(dataclasses.replace(base, **p), m, s) for m, p in points for s in seeds]
    scores = [[None] * len(seeds) for _ in points]
    t0 = time.perf_counter()
    for done, (i, score) in enumerate(run_many(jobs, final_sampled, workers), 1):
        scores[i // len(seeds)][i % len(seeds)] = score
        if log is not None:
            m, p = points[i // len(seeds)]
            log(
                f"[{done}/{len(jobs)}] {m} {p} seed {seeds[i % len(seeds)]}: "
                f"{score:.3f}  [{time.perf_counter() - t0:.0f} s]"
            )
    table = {m: [] for m in methods}
    for (m, p), per_seed in zip(points, scores):
        table[m].append({"settings": p, "per_seed": per_seed})
    return {
        "preset": preset,
        "overrides": overrides,
        "seeds": seeds,
        "metric": "final sampled pass@1 on the validation split",
        "scores": table,
        "best": best_settings(table),
        "command": "python -m dpo_grpo.lab.tuning --preset "
        f"{preset} --seeds {' '.join(map(str, seeds))}",
        "total_seconds": time.perf_counter() - t0,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpo_grpo.lab.tuning")
    parser.add_argument("--preset", default="cpu", choices=("cpu", "gpu"))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--workers", type=int, default=1, help="processes (the scores do not change)"
    )
    parser.add_argument("--out", type=pathlib.Path, default=None)
    args = parser.parse_args(argv)
    out = args.out or pathlib.Path(f"lab-{args.preset}-tuning.json")
    res = tune(
        args.preset,
        args.seeds,
        workers=args.workers,
        log=lambda s: print(s, flush=True),
    )
    out.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print(f"best: {res['best']}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
