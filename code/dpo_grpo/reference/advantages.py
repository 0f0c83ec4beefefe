"""Group-relative advantages (chapter 3, section 3.4): each answer is scored against its
own group.

Shapes: ``rewards`` is ``(prompts, G)``, one row per prompt, one column per sampled
answer; results have the same shape. TRL's production form (several reward functions,
NaN rewards, ``scale_rewards``) is
:func:`dpo_grpo.trl_exact.advantages.reward_advantages`, equal to
:func:`group_advantages` here at ``ddof=1``.
"""

from __future__ import annotations

import numpy as np

from .. import _validation as v


def group_advantages(rewards, eps=1e-4, ddof=0):
    """A_i = (r_i - mean(r)) / (std(r) + eps) within each row (section 3.4).

    rewards and result: shape (prompts, G). ddof=0: population std (divide by G, this
    book's teaching default); ddof=1: sample std (divide by G - 1, as TRL does).
    """
    r = _grouped(rewards)
    eps = v.scalar(eps, "eps", positive=True)
    ddof = v.choice(v.integer(ddof, "ddof"), "ddof", (0, 1))
    mean = r.mean(axis=1, keepdims=True)
    std = r.std(axis=1, keepdims=True, ddof=ddof)
    return (r - mean) / (std + eps)


def centered_advantages(rewards):
    """``r_i - mean(r)`` per row, no scaling (section 3.4); its expected gradient is
    ``(1 - 1/G)`` x the true one."""
    r = _grouped(rewards)
    return r - r.mean(axis=1, keepdims=True)


def leave_one_out_advantages(rewards):
    """``r_i - mean_{j≠i} r_j`` per row (RLOO's baseline, section 3.4): an unbiased
    policy-gradient estimate."""
    r = _grouped(rewards)
    g = r.shape[1]
    others_mean = (r.sum(axis=1, keepdims=True) - r) / (g - 1)
    return r - others_mean


def _grouped(rewards) -> np.ndarray:
    r = v.as_float_array(rewards, "rewards", ndim=2)
    if r.shape[1] < 2:
        raise ValueError(
            f"rewards must have shape (prompts, G) with G >= 2, got {r.shape}"
        )
    return r
