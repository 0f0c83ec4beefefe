"""What a step costs. :func:`rollout_vs_train_time`: what a GRPO step spends its time
on, sampling L tokens against one training pass over them, for the lab's model shape.
:func:`ppo_vs_grpo_cost`: what the critic costs, PPO against GRPO on the same model
and batch (parameters, optimiser state, memory, time per step)."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch

from .. import _validation as v
from .config import LabConfig, checked_config
from .model import VOCAB, completion_logps, encode_prompts
from .model import count_parameters
from .run import LabRun
from .runtime import as_device, resolve_device, synchronize, torch_threads
from .model import make_model
from .task import make_task


def rollout_vs_train_time(
    cfg: LabConfig, device=None, lengths=(2, 4, 8, 16, 32, 48), batch=128, repeats=3
) -> list:
    """Seconds to sample L tokens (what :func:`~.model.generate` runs: L no-grad
    forward passes over a growing prefix) versus one training pass (forward + backward
    over prompt + L tokens), for ``batch`` sequences of the config's model shape
    (random weights, random tokens: the cost does not depend on them); median of
    ``repeats``. Returns one dict per length: ``completion_length``, ``rollout_s``,
    ``train_pass_s``, ``rollout_over_train``."""
    checked_config(cfg)
    device = resolve_device(cfg) if device is None else as_device(device)
    lengths = [
        v.integer(L, "lengths", minimum=1) for L in v.sequence(lengths, "lengths")
    ]
    if not lengths:
        raise ValueError("lengths must not be empty")
    batch = v.integer(batch, "batch", minimum=1)
    repeats = v.integer(repeats, "repeats", minimum=1)
    prompt_len = cfg.prompt_tokens
    with torch.random.fork_rng(
        devices=[device] if device.type == "cuda" else []
    ):  # leave the global RNG alone
        torch.manual_seed(0)
        model = make_model(
            dataclasses.replace(
                cfg,
                context_length=prompt_len + max(*lengths, cfg.max_completion_length),
            )
        ).to(device)
    task = make_task(cfg)
    pids, pmask = encode_prompts(task.train_prompts()[:batch], device)
    gen = torch.Generator(device=device).manual_seed(0)
    rows = []
    with torch_threads(cfg, device):
        for L in lengths:
            cids = torch.randint(
                len(VOCAB.specials),
                len(VOCAB),
                (pids.shape[0], L),
                generator=gen,
                device=device,
            )
            cmask = torch.ones_like(cids, dtype=torch.bool)
            t_roll, t_train = [], []
            for _ in range(repeats):
                synchronize(device)
                t0 = time.perf_counter()
                with torch.no_grad():
                    for t in range(
                        L
                    ):  # what generate() runs: one forward per new token
                        model(
                            torch.cat([pids, cids[:, :t]], 1),
                            torch.cat([pmask, cmask[:, :t]], 1),
                        )
                synchronize(device)
                t1 = time.perf_counter()
                logps = completion_logps(model, pids, pmask, cids, cmask)
                (-(logps * cmask).sum()).backward()
                model.zero_grad(set_to_none=True)
                synchronize(device)
                t2 = time.perf_counter()
                t_roll.append(t1 - t0)
                t_train.append(t2 - t1)
            r, tr = float(np.median(t_roll)), float(np.median(t_train))
            rows.append(
                {
                    "completion_length": L,
                    "rollout_s": r,
                    "train_pass_s": tr,
                    "rollout_over_train": r / tr,
                }
            )
    return rows


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of every tensor in ``optimizer``'s state (AdamW: two moments a
    parameter, and a step counter)."""
    return sum(
        x.numel() * x.element_size()
        for state in optimizer.state.values()
        for x in state.values()
        if torch.is_tensor(x)
    )


PHASES = ("rollout_time_s", "score_time_s", "reference_time_s", "train_time_s")


def ppo_vs_grpo_cost(cfg: LabConfig, steps: int = 3, seed: int = 0, device=None):
    """PPO (with its critic) against GRPO on the same config, seed, SFT model and
    number of completions per step: ``steps`` steps of each (no evaluation), then for
    each ``{"grpo": ..., "ppo": ...}``:

    - ``parameters``: per model (``policy``, ``reference``, PPO's ``critic``) and
      ``trainable_parameters`` (policy, + critic);
    - ``optimizer_state_bytes``: every optimiser's state after the steps;
    - ``training_state_bytes``: weights of every model, plus a gradient and the
      optimiser state of every trainable one (what a step holds besides
      activations; comparable on a CPU, where ``peak_memory_bytes`` is the process's
      resident set size, which only grows from one run to the next);
    - ``peak_memory_bytes``: the largest of the steps' (GPU: peak allocated);
    - ``step_seconds_median`` (the first step left out when ``steps > 1``) and
      ``phase_seconds_median`` (rollout, score, reference + values, train);

    and ``"ppo_over_grpo"``, the ratios of the scalar ones."""
    checked_config(cfg)
    steps = v.integer(steps, "steps", minimum=1)
    seed = v.integer(seed, "seed", minimum=0)
    # never finished, never evaluated within the measured steps
    run_cfg = dataclasses.replace(cfg, grpo_steps=steps + 1, eval_every=steps + 1)
    out = {}
    for algorithm in ("grpo", "ppo"):
        run = LabRun(run_cfg, algorithm, seed, device=device)
        for _ in range(steps):
            run.step()
        models = {"policy": run.policy, "reference": run.ref}
        optimizers = [run.opt]
        if algorithm == "ppo":
            models["critic"] = run.critic
            optimizers.append(run.critic_opt)
        h = run.history
        skip = 1 if steps > 1 else 0
        seconds = np.diff([0.0, *h.wall_time_s])[skip:]
        trainable = [
            p for m in models.values() for p in m.parameters() if p.requires_grad
        ]
        opt_bytes = sum(optimizer_state_bytes(o) for o in optimizers)
        weight_bytes = sum(
            p.numel() * p.element_size()
            for m in models.values()
            for p in m.parameters()
        )
        grad_bytes = sum(p.numel() * p.element_size() for p in trainable)
        out[algorithm] = {
            "parameters": {k: count_parameters(m) for k, m in models.items()},
            "trainable_parameters": sum(p.numel() for p in trainable),
            "optimizer_state_bytes": opt_bytes,
            "training_state_bytes": weight_bytes + grad_bytes + opt_bytes,
            "peak_memory_bytes": int(max(h.peak_memory_bytes)),
            "step_seconds_median": float(np.median(seconds)),
            "phase_seconds_median": {
                k.replace("_time_s", ""): float(np.median(getattr(h, k)[skip:]))
                for k in PHASES
            },
            "completions_per_step": cfg.prompts_per_step * cfg.num_generations,
            "optimizer_steps_per_step": cfg.num_iterations,
            "steps": steps,
        }
    out["ppo_over_grpo"] = {
        k: out["ppo"][k] / out["grpo"][k]
        for k in (
            "trainable_parameters",
            "optimizer_state_bytes",
            "training_state_bytes",
            "peak_memory_bytes",
            "step_seconds_median",
        )
    }
    return out
