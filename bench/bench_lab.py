"""Where the time of a GRPO step goes in the tiny-transformer lab: rollout vs scoring vs
reference vs training.

Runs the lab's GRPO trainer (``dpo_grpo.lab``) in a few configurations and splits each
step's wall time into

- ``rollout``: sampling the completions token by token from pi_old (one forward pass per
  generated token),
- ``score``: decoding and verifying them, and forming the group advantages,
- ``reference``: one no-grad forward pass of the frozen reference,
- ``train``: ``num_iterations`` forward + backward passes of the policy and the
  optimizer steps.

Scenarios (real GRPO runs): the preset as it is; the preset with one optimisation epoch
per rollout (``num_iterations=1``, TRL's default); and a length-bonus reward with room
for 9 completion tokens, in which the completions grow over the run, so the per-step
records show the rollout's share rising with the completion length.

Controlled sweep: for completion lengths L = 2 ... 48, the same operations the sampler
and the trainer run (L forward passes over a growing prefix without gradients, versus
one forward + backward pass over the whole sequence), on the preset's model shape with a
longer context. Together they show the article's point that sampling becomes the main
cost of GRPO as answers get longer. (This lab's sampler has no KV cache; a production
engine has one, which makes each token cheaper but leaves the generation sequential.)

Side by side (``--trl``, on by default when TRL is installed): this book's GRPO step on
a Hugging Face model (``dpo_grpo.lab.hf.run_hf_grpo``) against TRL 1.16.0's
``GRPOTrainer`` step, on the same tiny random Qwen2 model, the same prompts, batch,
completion length and options, timed from the start of a step (sampling included) to the
end of its optimiser step; medians over the steps after the first.

What the critic costs (``ppo_vs_grpo``): ``dpo_grpo.lab.ppo_vs_grpo_cost``, PPO with its
critic against GRPO on the same model, seed and batch (the same completions per step):
parameters, optimiser-state bytes, training-state bytes, peak memory and the median time
per step (``--ppo-steps`` steps each; ``--ppo-only`` runs this section alone and writes
it into the existing results file, keeping its other sections).

The results go to ``lab-<host>.json`` in the working directory (or ``--results FILE``);
bench/README.md says how to refresh the copy the package ships
(``code/dpo_grpo/data/bench_results/``, read by the lab pages).

Usage::

    # CPU preset -> ./lab-<host>.json
    .venv/bin/python bench/bench_lab.py
    # on a GPU machine
    .venv/bin/python bench/bench_lab.py --preset gpu
    # PPO vs GRPO cost only
    .venv/bin/python bench/bench_lab.py --ppo-only --ppo-steps 3
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
    # evaluate only at the end (evaluation is not timed anyway)
    base = {
        "grpo_steps": steps,
        "eval_every": steps,
    }
    return {
        "preset": dict(base),
        "one_epoch_per_rollout": dict(base, num_iterations=1),
        "length_bonus_long": dict(
            base,
            grpo_steps=max(steps, 45),
            eval_every=max(steps, 45),
            reward="length_bonus",
            length_bonus=1.0,
            max_completion_length=9,
        ),
    }


def summarise(h) -> dict:
    steps = len(h.step)
    per_phase = {k: np.asarray(getattr(h, k)) for k in PHASES}
    total = sum(per_phase.values())
    skip = 1 if steps > 3 else 0  # the first step pays one-off warm-up costs
    mean = {
        k.replace("_time_s", ""): float(v[skip:].mean()) for k, v in per_phase.items()
    }
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
            {
                "step": int(s),
                "completion_length": float(L),
                **{k.replace("_time_s", ""): float(per_phase[k][i]) for k in PHASES},
            }
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
        tot = {
            p: sum(r[p] for r in rows)
            for p in ("rollout", "score", "reference", "train")
        }
        out.append(
            {
                "completion_length": [lo, hi],
                "steps": len(rows),
                "rollout_share": tot["rollout"] / sum(tot.values()),
                "train_share": tot["train"] / sum(tot.values()),
            }
        )
    return out


def trl_vs_lab(
    steps: int = 6,
    prompts_per_step: int = 4,
    num_generations: int = 8,
    max_completion_length: int = 8,
):
    """Median seconds per GRPO step: the lab's loop (run_hf_grpo) and TRL's GRPOTrainer,
    same tiny model and batch."""
    import tempfile
    import warnings

    import transformers
    import trl

    from dpo_grpo.lab import hf, trl_scale

    warnings.filterwarnings("ignore", category=FutureWarning)
    transformers.utils.logging.disable_progress_bar()
    if not torch.cuda.is_available():
        # as the lab runs: one intra-op thread on a CPU (more oversubscribe a shared
        # machine)
        torch.set_num_threads(1)
    cfg = hf.HFLabConfig.preset(
        "tiny-random",
        grpo_steps=steps,
        num_iterations=1,
        prompts_per_step=prompts_per_step,
        num_generations=num_generations,
        max_completion_length=max_completion_length,
        eval_every=steps,
        eval_prompts=8,
    )
    model, tok = hf.tiny_random_model(0)
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        tok.save_pretrained(d)
        ours = hf.run_hf_grpo(cfg, model, tok, seed=0)["step_time_s"]

        class Clock(transformers.TrainerCallback):
            def __init__(self):
                self.times, self.t0 = [], None

            def on_step_begin(self, args, state, control, **kw):
                self.t0 = time.perf_counter()

            def on_step_end(self, args, state, control, **kw):
                self.times.append(time.perf_counter() - self.t0)

        clock = Clock()
        args = trl.GRPOConfig(
            **trl_scale.grpo_args(
                cfg,
                d + "/out",
                use_cpu=not torch.cuda.is_available(),
                bf16=False,
                seed=0,
                disable_tqdm=True,
            )
        )
        trainer = trl.GRPOTrainer(
            model=d,
            reward_funcs=[trl_scale.verifier_reward(tok.eos_token_id)],
            args=args,
            train_dataset=trl_scale.prompt_dataset(cfg, steps * prompts_per_step),
            processing_class=tok,
            callbacks=[clock],
        )
        trainer.remove_callback(transformers.PrinterCallback)
        trainer.train()
    med = lambda xs: float(np.median(xs[1:] if len(xs) > 2 else xs))  # noqa: E731
    return {
        "model": (
            "tiny random Qwen2ForCausalLM "
            f"({sum(p.numel() for p in model.parameters())} parameters)"
        ),
        "batch": {
            "prompts_per_step": prompts_per_step,
            "num_generations": num_generations,
            "max_completion_length": max_completion_length,
            "num_iterations": 1,
            "beta": cfg.beta,
        },
        "steps": steps,
        "torch_threads": torch.get_num_threads(),
        "trl": trl.__version__,
        "transformers": transformers.__version__,
        "lab_step_seconds_median": med(ours),
        "trl_step_seconds_median": med(clock.times),
        "lab_step_seconds": ours,
        "trl_step_seconds": clock.times,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="cpu", choices=("cpu", "gpu"))
    parser.add_argument(
        "--steps", type=int, default=20, help="GRPO steps per scenario (default 20)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--trl",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=(
            "also time TRL's GRPOTrainer against the lab's step (default: when trl is "
            "installed)"
        ),
    )
    parser.add_argument(
        "--ppo-steps",
        type=int,
        default=10,
        help="steps of PPO and of GRPO in the cost comparison (default 10)",
    )
    parser.add_argument(
        "--ppo-only",
        action="store_true",
        help="run only the PPO-vs-GRPO cost section",
    )
    parser.add_argument(
        "--results",
        type=pathlib.Path,
        default=None,
        help="output JSON (default: lab-<host>.json in the working directory)",
    )
    args = parser.parse_args(argv)

    device = torch_ops.default_device()
    host = socket.gethostname().split(".")[0] or "host"
    out_path = args.results or pathlib.Path(f"lab-{host}.json")
    cfg = LabConfig.preset(args.preset, device=str(device))
    record = {
        "benchmark": (
            "bench_lab.py: GRPO step time split in the tiny-transformer lab; "
            "PPO (critic) vs GRPO cost"
        ),
        "host": host,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"
        ),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": str(device)
        if device.type == "cpu"
        else torch.cuda.get_device_name(0),
        "cpu_threads": cfg.cpu_threads if device.type == "cpu" else None,
        "cpu_count": __import__("os").cpu_count(),
        "preset": args.preset,
        "seed": args.seed,
        "note": (
            "wall-clock times on a possibly shared machine; the first step of each "
            "scenario is excluded from the means (warm-up). SFT is run once per model "
            "shape and is not part of any split."
        ),
        "scenarios": {},
    }
    t0 = time.perf_counter()
    record["ppo_vs_grpo"] = ppo_section(cfg, args.ppo_steps, args.seed)
    if args.ppo_only:
        # the other sections of an existing results file are kept
        if out_path.is_file():
            kept = json.loads(out_path.read_text())
            kept["ppo_vs_grpo"] = dict(
                record["ppo_vs_grpo"],
                measured={k: record[k] for k in ("date", "host", "torch", "device")},
            )
            kept["ppo_vs_grpo"]["seconds"] = time.perf_counter() - t0
            out_path.write_text(json.dumps(kept, indent=1) + "\n")
            print(f"wrote the ppo_vs_grpo section into {out_path}")
            return
        finish(record, out_path, t0)
        return
    for name, overrides in scenarios(args.preset, args.steps).items():
        run_cfg = dataclasses.replace(cfg, **overrides)
        h = run_lab(run_cfg, algorithm="grpo", seed=args.seed)
        s = summarise(h)
        s["overrides"] = overrides
        if name == "length_bonus_long":
            s["rollout_share_by_length"] = length_bins(s["per_step"])
        record["scenarios"][name] = s
        share = " ".join(f"{k} {v:5.1%}" for k, v in s["share"].items())
        print(
            f"{name:<24} {s['step_seconds_mean'] * 1e3:7.1f} ms/step  length "
            f"{s['completion_length_mean']:.2f}  {share}",
            flush=True,
        )
        for b in s.get("rollout_share_by_length", []):
            print(
                f"{'':<24} steps with mean length in {b['completion_length']}: "
                f"rollout {b['rollout_share']:.1%}, train {b['train_share']:.1%} "
                f"({b['steps']} steps)"
            )
    record["length_sweep"] = lab.rollout_vs_train_time(cfg, device)
    print(
        "controlled sweep (batch 128): completion length -> sampling time / one "
        "training pass"
    )
    for row in record["length_sweep"]:
        print(
            f"  L = {row['completion_length']:3d}: rollout "
            f"{row['rollout_s'] * 1e3:7.1f} ms, train pass "
            f"{row['train_pass_s'] * 1e3:6.1f} ms, ratio "
            f"{row['rollout_over_train']:.1f}"
        )
    use_trl = args.trl
    if use_trl is None:
        import importlib.util

        use_trl = importlib.util.find_spec("trl") is not None
    if use_trl:
        record["trl_vs_lab"] = trl_vs_lab()
        r = record["trl_vs_lab"]
        print(
            f"GRPO step on {r['model']}, batch {r['batch']}: lab "
            f"{r['lab_step_seconds_median'] * 1e3:.0f} ms, TRL {r['trl']} "
            f"{r['trl_step_seconds_median'] * 1e3:.0f} ms (medians)"
        )
    finish(record, out_path, t0)


def ppo_section(cfg, steps: int, seed: int) -> dict:
    """``lab.ppo_vs_grpo_cost`` on ``cfg``, printed as a small table."""
    out = lab.ppo_vs_grpo_cost(cfg, steps=steps, seed=seed)
    print(f"PPO (critic) vs GRPO, {steps} steps each, same model and batch:")
    for alg in ("grpo", "ppo"):
        r = out[alg]
        print(
            f"  {alg:<4} trainable {r['trainable_parameters']:>10,d} params, "
            f"optimiser state {r['optimizer_state_bytes'] / 2**20:8.2f} MiB, training "
            f"state {r['training_state_bytes'] / 2**20:8.2f} MiB, peak "
            f"{r['peak_memory_bytes'] / 2**20:8.1f} MiB, "
            f"{r['step_seconds_median'] * 1e3:7.1f} ms/step"
        )
    ratio = ", ".join(f"{k} x{v:.2f}" for k, v in out["ppo_over_grpo"].items())
    print(f"  PPO / GRPO: {ratio}")
    return out


def finish(record: dict, out_path: pathlib.Path, t0: float):
    record["total_seconds"] = time.perf_counter() - t0
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out_path} ({record['total_seconds']:.0f} s)")
    lab.clear_sft_cache()


if __name__ == "__main__":
    main()
