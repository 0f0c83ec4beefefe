"""Pitfall 5's mechanism (chapter 5): how each ``loss_type`` weights the tokens of long
and short answers.

Dr. GRPO's argument (Liu et al. 2025): with the paper's per-answer mean 1/|y_i|, every
answer's tokens share one fixed budget ``A_i / G``. A long wrong answer spreads its
penalty over many tokens, so each of its tokens is pushed down *less* than a token of a
short wrong answer; a short right answer concentrates its reward, so each of its tokens
is pushed up *more*. Among wrong answers the update therefore prefers the long ones. A
token-level denominator (``bnpo``, ``dapo``, ``dr_grpo``) gives every token of a group
the same weight, so only the advantage decides.

:func:`length_group` builds a group of right and wrong answers of two lengths;
:func:`per_token_push` evaluates the on-policy GRPO loss (ratio 1, beta 0) with
:func:`dpo_grpo.trl_exact.grpo.grpo_loss` and returns each answer's per-token gradient
and its total over the answer, per loss type.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validation as v
from ..reference.advantages import group_advantages
from ..trl_exact.grpo import LOSS_TYPES, grpo_loss

__all__ = [
    "LENGTH_GROUP",
    "length_group",
    "Push",
    "per_token_push",
]

#: Four answers: right and short, right and long, wrong and short, wrong and long (token
#: counts).
LENGTH_GROUP = {
    "rewards": (1.0, 1.0, 0.0, 0.0),
    "lengths": (20, 80, 20, 80),
    "labels": ("right, short", "right, long", "wrong, short", "wrong, long"),
}


def length_group(rewards=None, lengths=None):
    """``(advantages, mask)`` of one group (defaults: :data:`LENGTH_GROUP`), population
    std, eps = 1e-4."""
    r = v.as_float_array(
        LENGTH_GROUP["rewards"] if rewards is None else rewards, "rewards", ndim=1
    )
    n = v.integer_array(
        LENGTH_GROUP["lengths"] if lengths is None else lengths, "lengths", ndim=1
    )
    if r.shape != n.shape:
        raise ValueError(
            f"rewards and lengths must have the same shape, got {r.shape} and {n.shape}"
        )
    if (n < 1).any():
        raise ValueError("lengths must be >= 1")
    mask = (np.arange(n.max())[None, :] < n[:, None]).astype(float)
    return group_advantages(r[None, :])[0], mask


class Push(NamedTuple):
    #: (G,) d loss / d log pi(token), the same for every token of an answer
    per_token: np.ndarray
    #: (G,) the sum over the answer's tokens: d loss / d log pi(y_i)
    per_answer: np.ndarray


def per_token_push(
    loss_type="grpo", rewards=None, lengths=None, *, max_completion_length=None
) -> Push:
    """On-policy gradient of the GRPO loss (ratio 1, beta = 0) with respect to each
    token's log-prob."""
    v.choice(loss_type, "loss_type", LOSS_TYPES)
    adv, mask = length_group(rewards, lengths)
    zeros = np.zeros_like(mask)
    out = grpo_loss(
        zeros,
        zeros,
        None,
        adv,
        mask,
        beta=0.0,
        loss_type=loss_type,
        max_completion_length=max_completion_length,
    )
    return Push(out.grad[:, 0].copy(), out.grad.sum(axis=1))
