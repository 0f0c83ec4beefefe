"""Choosing each method's learning rate on a validation split, never the held-out set.

:func:`tune` runs every method of :data:`dpo_grpo.lab.sweep.METHODS` at each learning
rate of :data:`LEARNING_RATES` (``grpo_lr`` for the online methods, ``dpo_lr`` for the
offline ones) with ``eval_split="validation"``: the runs train on the training problems
minus a validation set carved from them (:func:`dpo_grpo.lab.task.validation_task`) and
are scored on that set. :func:`best_settings` keeps, per method, the learning rate with
the highest mean final sampled pass@1 over the seeds. Epochs are not in the grid: they
change the optimiser steps, which the comparison keeps matched.

``python -m dpo_grpo.lab.tuning --seeds 0 1 --out FILE`` writes the grid's scores and
the chosen settings (JSON, with the command that made it).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np

from .. import _validation as v
from .config import LabConfig
from .run import run_lab

#: the learning rates tried for every method
LEARNING_RATES = (1e-4, 3e-4, 1e-3, 3e-3)
#: which learning rate a method reads
LR_FIELD = {
    "rft": "dpo_lr",
    "dpo": "dpo_lr",
    "dpo+nll": "dpo_lr",
    "online_rft": "grpo_lr",
    "rloo": "grpo_lr",
    "grpo": "grpo_lr",
    "ppo": "grpo_lr",
}


def best_settings(scores: dict) -> dict:
    """``{method: {field: value}}``: per method, the setting whose list of per-seed
    scores has the highest mean (the first such on a tie). ``scores``: ``{method:
    {(field, value): [score per seed]}}``."""
    out = {}
    for m, grid in scores.items():
        if not grid:
            raise ValueError(f"scores[{m!r}] must not be empty")
        (field, value), _ = max(grid.items(), key=lambda kv: float(np.mean(kv[1])))
        out[m] = {field: value}
    return out


def tune(preset="cpu", seeds=(0, 1), methods=tuple(LR_FIELD), *, log=None, **overrides):
    """Run the grid on the validation split; return the JSON-ready results: the grid,
    the seeds, the scores (final sampled pass@1 on the validation set) and ``best``
    (:func:`best_settings`)."""
    seeds = [v.integer(s, "seeds", minimum=0) for s in v.sequence(list(seeds), "seeds")]
    for m in methods:
        v.choice(m, "methods", tuple(LR_FIELD))
    base = LabConfig.preset(preset, eval_split="validation", **overrides)
    scores = {m: {} for m in methods}
    t0 = time.perf_counter()
    for m in methods:
        for lr in LEARNING_RATES:
            cfg = base.__class__(**{**base.to_dict(), LR_FIELD[m]: lr})
            vals = []
            for s in seeds:
                h = run_lab(cfg, algorithm=m, seed=s, progress=False)
                vals.append(h.heldout_pass_rate_sampled[-1])
            scores[m][LR_FIELD[m], lr] = vals
            if log is not None:
                log(
                    f"{m:<10} {LR_FIELD[m]}={lr:g}: validation sampled pass@1 "
                    f"{np.mean(vals):.3f}  [{time.perf_counter() - t0:.0f} s]"
                )
    best = best_settings(scores)
    return {
        "preset": preset,
        "overrides": overrides,
        "seeds": seeds,
        "learning_rates": list(LEARNING_RATES),
        "metric": "final sampled pass@1 on the validation split",
        "scores": {
            m: [
                {"field": f, "value": x, "per_seed": vals} for (f, x), vals in g.items()
            ]
            for m, g in scores.items()
        },
        "best": best,
        "command": "python -m dpo_grpo.lab.tuning --preset "
        f"{preset} --seeds {' '.join(map(str, seeds))}",
        "total_seconds": time.perf_counter() - t0,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpo_grpo.lab.tuning")
    parser.add_argument("--preset", default="cpu", choices=("cpu", "gpu"))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--out", type=pathlib.Path, default=None)
    args = parser.parse_args(argv)
    out = args.out or pathlib.Path(f"lab-{args.preset}-tuning.json")
    res = tune(args.preset, args.seeds, log=lambda s: print(s, flush=True))
    out.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print(f"best: {res['best']}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
