"""How the lab scores a policy: :func:`heldout_pass_rate`, the verified fraction of
greedy (or sampled) completions on prompts it never trained on."""

from __future__ import annotations

import dataclasses

import torch

from .. import _validation as v
from .config import LabConfig, checked_config
from .model import encode_prompts, generate
from .runtime import as_device, torch_threads
from .task import score


@torch.no_grad()
def heldout_pass_rate(
    model,
    prompts,
    cfg: LabConfig,
    device,
    *,
    samples: int = 0,
    generator=None,
    batch_size: int = 1024,
) -> float:
    """Fraction of ``prompts`` whose greedy completion the verifier accepts
    (``samples=0``; uses no random numbers), or the mean verified fraction of
    ``samples`` completions per prompt sampled at ``cfg.temperature`` with ``generator``
    (pass@1 estimated with ``samples`` draws)."""
    checked_config(cfg)
    prompts = v.sequence(prompts, "prompts")
    if not prompts:
        raise ValueError("prompts must not be empty")
    samples = v.integer(samples, "samples", minimum=0)
    batch_size = v.integer(batch_size, "batch_size", minimum=1)
    rows = prompts if samples == 0 else [p for p in prompts for _ in range(samples)]
    device = as_device(device)
    strict = dataclasses.replace(cfg, reward="correct")
    hits = 0
    with torch_threads(cfg, device):
        for i in range(0, len(rows), batch_size):
            chunk = rows[i : i + batch_size]
            ids, mask = encode_prompts(chunk, device)
            ro = generate(
                model,
                ids,
                mask,
                cfg.max_completion_length,
                greedy=samples == 0,
                temperature=cfg.temperature,
                generator=generator,
            )
            hits += int(
                score(chunk, ro.completion_ids, ro.finished, strict)[:, 0].sum().item()
            )
    return hits / len(rows)
