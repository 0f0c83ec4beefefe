"""The SFT warm-up every lab run starts from: supervised fine-tuning on deliberately
flawed demonstrations, stopped early at a target pass rate (:func:`sft_warmup`), cached
per process so that DPO and GRPO start from the very same weights."""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
import torch

from .. import _validation as v
from .config import LabConfig, checked_config
from .evaluation import heldout_pass_rate
from .model import completion_logps, encode_completions, encode_prompts
from .runtime import as_device, derived_seed, synchronize, torch_threads
from .model import make_model
from .task import block_log_softmax, make_task

_SFT_CACHE: dict = {}
_SFT_FIELDS = (
    "n_terms",
    "n_digits",
    "n_heldout",
    "task_seed",
    "split_per_seed",
    "eval_split",
    "d_model",
    "n_layers",
    "n_heads",
    "d_ff",
    "context_length",
    "sft_steps",
    "sft_batch_size",
    "sft_lr",
    "sft_carry_noise",
    "sft_target_pass_rate",
    "cpu_threads",
)
# Only read for early stopping. (max_completion_length is not needed: any valid limit
# fits the longest correct answer, and greedy decoding is the same prefix by prefix, so
# the probe's pass rate does not depend on it.)
_SFT_STOP_FIELDS = ("sft_check_every", "sft_probe_size")


class SFTResult(NamedTuple):
    model: torch.nn.Module
    #: wall time of the SFT run (of the original run when the result comes from the
    #: cache)
    seconds: float
    steps: int  #: steps taken
    #: greedy pass rate on the probe of training prompts at the last check
    probe_pass_rate: float


def sft_warmup(cfg: LabConfig, seed: int, device) -> SFTResult:
    """Supervised fine-tuning on ``prompt -> answer EOS`` (loss on completion tokens
    only), stopped early.

    Every ``sft_check_every`` steps the greedy pass rate on a fixed probe of
    ``sft_probe_size`` *training* prompts is measured (held-out prompts are never looked
    at); SFT stops at the first check that reaches ``sft_target_pass_rate``, or after
    ``sft_steps`` steps. This makes the start mediocre by design, whatever the seed. The
    result is cached in-process by the fields that determine it, so the DPO and GRPO
    runs of one notebook share one SFT; a cached copy is bit-identical to a fresh one.
    """
    checked_config(cfg)
    seed = v.integer(seed, "seed", minimum=0)
    device = as_device(device)
    threads = (
        (cfg.cpu_threads or torch.get_num_threads()) if device.type == "cpu" else None
    )
    fields = _SFT_FIELDS + (
        _SFT_STOP_FIELDS if cfg.sft_target_pass_rate is not None else ()
    )
    key = (tuple(getattr(cfg, f) for f in fields), threads, seed, str(device))
    if key in _SFT_CACHE:
        state, seconds, steps, probe = _SFT_CACHE[key]
        model = make_model(cfg).to(device)
        model.load_state_dict(state)
        return SFTResult(model, seconds, steps, probe)
    with torch_threads(cfg, device):
        out = _sft(cfg, seed, device)
    _SFT_CACHE[key] = (
        {k: t.detach().clone() for k, t in out.model.state_dict().items()},
        out.seconds,
        out.steps,
        out.probe_pass_rate,
    )
    return out


def _sft(cfg: LabConfig, seed: int, device: torch.device) -> SFTResult:
    t0 = time.perf_counter()
    task = make_task(cfg, seed)
    torch.manual_seed(derived_seed(seed, "init"))
    model = make_model(cfg).to(device)
    opt = torch.optim.AdamW(
        model.parameters(), lr=cfg.sft_lr, weight_decay=0.0, foreach=False
    )
    rng = np.random.default_rng(derived_seed(seed, "sft-data"))
    pairs = task.train_problems
    train = task.train_prompts()
    # every training problem encoded once; a step gathers its rows and trims the
    # all-padding columns
    all_pids, all_pmask = encode_prompts(train, device)
    width = cfg.max_completion_length
    good_ids, good_mask = encode_completions(
        [task.answer(x) for x in pairs], width, device
    )
    flaw_ids, flaw_mask = encode_completions(
        [task.no_carry_answer(x) for x in pairs], width, device
    )
    probe_idx = np.random.default_rng(derived_seed(seed, "sft-probe")).permutation(
        len(train)
    )[: cfg.sft_probe_size]
    probe = [train[i] for i in probe_idx]
    steps, probe_pass = 0, float("nan")
    target = cfg.sft_target_pass_rate
    while steps < cfg.sft_steps:
        if target is not None and steps % cfg.sft_check_every == 0 and steps > 0:
            # greedy: uses no random numbers
            probe_pass = heldout_pass_rate(model, probe, cfg, device)
            if probe_pass >= target:
                break
        idx = torch.as_tensor(
            rng.integers(0, len(pairs), cfg.sft_batch_size), device=device
        )
        noisy = torch.as_tensor(
            rng.random(cfg.sft_batch_size) < cfg.sft_carry_noise, device=device
        )[:, None]
        pids, pmask = all_pids[idx], all_pmask[idx]
        first = int(pmask.any(0).long().argmax())
        pids, pmask = pids[:, first:], pmask[:, first:]
        cids = torch.where(noisy, flaw_ids[idx], good_ids[idx])
        cmask = torch.where(noisy, flaw_mask[idx], good_mask[idx])
        last = int(cmask.sum(1).max())
        cids, cmask = cids[:, :last], cmask[:, :last]
        logps = completion_logps(
            model, pids, pmask, cids, cmask, log_softmax_fn=block_log_softmax
        )
        loss = -(logps * cmask).sum() / cmask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        steps += 1
    if target is None or steps == cfg.sft_steps:
        probe_pass = heldout_pass_rate(model, probe, cfg, device)
    synchronize(device)
    return SFTResult(model, time.perf_counter() - t0, steps, probe_pass)


def clear_sft_cache():
    _SFT_CACHE.clear()
