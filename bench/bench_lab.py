"""Where the time of a GRPO step goes in the tiny-transformer lab: rollout vs scoring vs reference vs training.

Runs the lab's GRPO trainer (``dpo_grpo.lab``) in a few configurations and splits each step's wall time into

- ``rollout``: sampling the completions token by token from pi_old (one forward pass per generated token),
- ``score``: decoding and verifying them, and forming the group advantages,
- ``reference``: one no-grad forward pass of the frozen reference,
- ``train``: ``num_iterations`` forward + backward passes of the policy and the optimizer steps.

Scenarios (real GRPO runs): the preset as it is; the preset with one optimisation epoch per rollout
(``num_iterations=1``, TRL's default); and a length-bonus reward with room for 9 completion tokens, in which the
completions grow over the run, so the per-step records show the rollout's share rising with the completion length.

Controlled sweep: for completion lengths L = 2 ... 48, the same operations the sampler and the trainer run (L
forward passes over a growing prefix without gradients, versus one forward + backward pass over the whole sequence),
on the preset's model shape with a longer context. Together they show the article's point that sampling becomes the
main cost of GRPO as answers get longer. (This lab's sampler has no KV cache; a production engine has one, which makes
each token cheaper but leaves the generation sequential.)

Usage::

    .venv/bin/python bench/bench_lab.py                 # CPU preset -> code/dpo_grpo/data/bench_results/lab-<host>.json
    .venv/bin/python bench/bench_lab.py --preset gpu    # on a GPU machine
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import pathlib
import platform
import socket
import time

import numpy as np
import torch

from dpo_grpo import lab, torch_ops
from dpo_grpo.lab import LabConfig, run_lab

PHASES = ("rollout_time_s", "score_time_s", "reference_time_s", "train_time_s")


def scenarios(preset: str, steps: int) -> dict:
    base = {"grpo_steps": steps, "eval_every": steps}  # evaluate only at the end (evaluation is not timed anyway)
    return {
        "preset": dict(base),
        "one_epoch_per_rollout": dict(base, num_iterations=1),
        "length_bonus_long": dict(base, grpo_steps=max(steps, 45), eval_every=max(steps, 45),
                                  reward="length_bonus", length_bonus=1.0, max_completion_length=9),
    }


def summarise(h) -> dict:
    steps = len(h.step)
    per_phase = {k: np.asarray(getattr(h, k)) for k in PHASES}
    total = sum(per_phase.values())
    skip = 1 if steps > 3 else 0  # the first step pays one-off warm-up costs
    mean = {k.replace("_time_s", ""): float(v[skip:].mean()) for k, v in per_phase.items()}
    tot = sum(mean.values())
    return {
        "steps": steps,
        "mean_seconds_per_step": mean,
        "share": {k: v / tot for k, v in mean.items()},
        "step_seconds_mean": float(total[skip:].mean()),
        "completion_length_mean": float(np.mean(h.completion_length)),
        "tokens_per_s_mean": float(np.mean(h.tokens_per_s[skip:])),
        "peak_memory_bytes": int(max(h.peak_memory_bytes)),
        "heldout_pass_rate": [h.heldout_pass_rate[0], h.heldout_pass_rate[-1]],
        "per_step": [
            {"step": int(s), "completion_length": float(L),
             **{k.replace("_time_s", ""): float(per_phase[k][i]) for k in PHASES}}
            for i, (s, L) in enumerate(zip(h.step, h.completion_length))
        ],
    }


def length_bins(per_step, edges=(0, 4, 6, 8, 100)) -> list:
    """Rollout share of the step time, grouped by the step's mean completion length."""
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        rows = [r for r in per_step[1:] if lo <= r["completion_length"] < hi]
        if not rows:
            continue
        tot = {p: sum(r[p] for r in rows) for p in ("rollout", "score", "reference", "train")}
        out.append({"completion_length": [lo, hi], "steps": len(rows),
                    "rollout_share": tot["rollout"] / sum(tot.values()),
                    "train_share": tot["train"] / sum(tot.values())})
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="cpu", choices=("cpu", "gpu"))
    parser.add_argument("--steps", type=int, default=20, help="GRPO steps per scenario (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results", type=pathlib.Path, default=None,
                        help="output JSON (default code/dpo_grpo/data/bench_results/lab-<host>.json)")
    args = parser.parse_args(argv)

    device = torch_ops.default_device()
    host = socket.gethostname().split(".")[0] or "host"
    out_path = args.results or pathlib.Path(__file__).resolve().parents[1] / "code" / "dpo_grpo" / "data" / "bench_results" / f"lab-{host}.json"
    cfg = LabConfig.preset(args.preset, device=str(device))
    record = {
        "benchmark": "bench_lab.py: GRPO step time split in the tiny-transformer lab",
        "host": host,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(0),
        "cpu_threads": cfg.cpu_threads if device.type == "cpu" else None,
        "cpu_count": __import__("os").cpu_count(),
        "preset": args.preset,
        "seed": args.seed,
        "note": ("wall-clock times on a possibly shared machine; the first step of each scenario is excluded from "
                 "the means (warm-up). SFT is run once per model shape and is not part of any split."),
        "scenarios": {},
    }
    t0 = time.perf_counter()
    for name, overrides in scenarios(args.preset, args.steps).items():
        run_cfg = dataclasses.replace(cfg, **overrides)
        h = run_lab(run_cfg, algorithm="grpo", seed=args.seed)
        s = summarise(h)
        s["overrides"] = overrides
        if name == "length_bonus_long":
            s["rollout_share_by_length"] = length_bins(s["per_step"])
        record["scenarios"][name] = s
        share = " ".join(f"{k} {v:5.1%}" for k, v in s["share"].items())
        print(f"{name:<24} {s['step_seconds_mean'] * 1e3:7.1f} ms/step  length {s['completion_length_mean']:.2f}  "
              f"{share}", flush=True)
        for b in s.get("rollout_share_by_length", []):
            print(f"{'':<24} steps with mean length in {b['completion_length']}: rollout {b['rollout_share']:.1%}, "
                  f"train {b['train_share']:.1%} ({b['steps']} steps)")
    record["length_sweep"] = lab.rollout_vs_train_time(cfg, device)
    print("controlled sweep (batch 128): completion length -> sampling time / one training pass")
    for row in record["length_sweep"]:
        print(f"  L = {row['completion_length']:3d}: rollout {row['rollout_s'] * 1e3:7.1f} ms, "
              f"train pass {row['train_pass_s'] * 1e3:6.1f} ms, ratio {row['rollout_over_train']:.1f}")
    record["total_seconds"] = time.perf_counter() - t0
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out_path} ({record['total_seconds']:.0f} s)")
    lab.clear_sft_cache()


if __name__ == "__main__":
    main()
