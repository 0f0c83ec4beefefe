"""How the lab scores a policy: :func:`heldout_pass_rate`, the verified fraction of
greedy (or sampled) completions on prompts it never trained on, and
:func:`error_profile`, what its wrong greedy answers are."""

from __future__ import annotations

import collections
import dataclasses
from typing import NamedTuple

import torch

from .. import _validation as v
from .config import LabConfig, checked_config
from .model import VOCAB, encode_prompts, generate, verify
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


class ErrorProfile(NamedTuple):
    """:func:`error_profile`'s answer."""

    pass_rate: float  #: greedy held-out pass rate
    no_carry_share: float  #: share of the wrong answers that are the no-carry answer
    top_wrong: str  #: the most common wrong answer ("" if none is wrong)
    top_wrong_share: float  #: its share of the wrong answers


def error_profile(model, task, cfg: LabConfig, device) -> ErrorProfile:
    """The greedy completions of ``model`` on ``task``'s held-out prompts: the pass
    rate, the share of wrong answers that are exactly the demonstrator's no-carry
    answer (:meth:`~dpo_grpo.lab.task.AdditionTask.no_carry_answer`), and the most
    common wrong answer with its share of the wrong answers (shares are 0 when no
    answer is wrong). ``task``: :func:`~dpo_grpo.lab.make_task`'s; ``cfg`` gives the
    completion length."""
    checked_config(cfg)
    prompts = task.heldout_prompts()
    ids, mask = encode_prompts(prompts, as_device(device))
    ro = generate(model, ids, mask, cfg.max_completion_length, greedy=True)
    texts = [VOCAB.decode(row) for row in ro.completion_ids.tolist()]
    ok = [
        done and verify(p, t)
        for p, t, done in zip(prompts, texts, ro.finished.tolist())
    ]
    wrong = [
        (t, terms)
        for t, terms, good in zip(texts, task.heldout_problems, ok)
        if not good
    ]
    no_carry = sum(t == task.no_carry_answer(terms) for t, terms in wrong)
    top, n_top = (
        collections.Counter(t for t, _ in wrong).most_common(1)[0] if wrong else ("", 0)
    )
    return ErrorProfile(
        sum(ok) / len(ok),
        no_carry / max(len(wrong), 1),
        top,
        n_top / max(len(wrong), 1),
    )
