"""What a GRPO step spends its time on: :func:`rollout_vs_train_time`, sampling L tokens
against one training pass over them, for the lab's model shape."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch

from .. import _validation as v
from .config import LabConfig, checked_config
from .model import VOCAB, completion_logps, encode_prompts
from .runtime import as_device, resolve_device, synchronize, torch_threads
from .task import make_model, make_task


def rollout_vs_train_time(
    cfg: LabConfig, device=None, lengths=(2, 4, 8, 16, 32, 48), batch=128, repeats=3
) -> list:
    """Seconds to sample L tokens (what :func:`generate` runs: L no-grad forward passes
    over a growing prefix) versus one training pass (forward + backward over prompt + L
    tokens), for ``batch`` sequences of the config's model shape (random weights, random
    tokens: the cost does not depend on them); median of ``repeats``. Returns one dict
    per length: ``completion_length``, ``rollout_s``, ``train_pass_s``,
    ``rollout_over_train``."""
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
