"""Steps 3 and 4 of the GRPO update (section 5.1): score a rollout with reward
functions, then group statistics over complete groups (TRL's advantages)."""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import numpy as np

from .. import _validation as v
from ..i18n import tr
from ..trl_exact.advantages import reward_advantages
from .rollout import EOS, Rollout, as_array, require_rollout


# --------------------------------------------------------------------------------------
# Step 3: score
# --------------------------------------------------------------------------------------

RewardFn = Callable[[int, np.ndarray], "float | None"]


def score(rollout: Rollout, reward_fns: Sequence[RewardFn]):
    """Step 3: ``(N, K)`` rewards; ``reward_fns[k](prompt_id, completion_ids)`` may
    return None (stored as NaN).

    Each function sees the valid token ids of one completion (the EOS included), never
    re-tokenised text.
    """
    require_rollout(rollout)
    if callable(reward_fns):
        reward_fns = [reward_fns]
    reward_fns = v.sequence(reward_fns, "reward_fns")
    if not reward_fns or not all(callable(f) for f in reward_fns):
        raise TypeError("reward_fns must be a non-empty sequence of callables")
    out = np.empty((rollout.token_ids.shape[0], len(reward_fns)))
    for i, (p, row, m) in enumerate(
        zip(rollout.prompt_ids, rollout.token_ids, rollout.mask)
    ):
        completion = row[m.astype(bool)]
        for k, f in enumerate(reward_fns):
            r = f(int(p), completion)
            try:
                out[i, k] = np.nan if r is None else float(r)
            except (TypeError, ValueError):
                raise TypeError(
                    f"reward_fns[{k}] must return a number or None, got "
                    f"{type(r).__name__}"
                ) from None
    return out


def target_token_reward(targets):
    """A verifier-style reward: 1.0 if the completion contains ``targets[prompt_id]``,
    else 0.0."""
    tg = v.integer_array(targets, "targets", ndim=1)

    def correct(prompt_id, completion):
        pid = v.integer(prompt_id, "prompt_id", minimum=0)
        if pid >= tg.size:
            raise ValueError(
                f"prompt_id must be < the number of targets ({tg.size}), got {pid}"
            )
        return float(np.any(completion == tg[pid]))

    correct.__name__ = "correct"
    return correct


def length_penalty(per_token=0.02):
    """A second reward: ``-per_token x`` number of tokens before EOS."""
    c = v.scalar(per_token, "per_token", nonnegative=True)

    def brevity(prompt_id, completion):
        return -c * float(np.sum(completion != EOS))

    brevity.__name__ = "brevity"
    return brevity


# --------------------------------------------------------------------------------------
# Step 4: group statistics over complete groups
# --------------------------------------------------------------------------------------


def assert_complete_groups(prompt_ids, group_size):
    """Raise ``ValueError`` unless the rows form consecutive blocks of ``group_size``
    rows of one prompt each, and no prompt owns more than one block (each prompt has
    exactly ``group_size`` rows)."""
    ids = as_array(prompt_ids, "prompt_ids")
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError(
            f"prompt_ids must be a non-empty 1-D array, got shape {ids.shape}"
        )
    g = v.integer(group_size, "group_size", minimum=1)
    if ids.size % g:
        raise ValueError(f"{ids.size} rows do not split into groups of group_size={g}")
    blocks = ids.reshape(-1, g)
    bad = np.flatnonzero((blocks != blocks[:, :1]).any(axis=1))
    if bad.size:
        j = int(bad[0])
        raise ValueError(
            tr(
                "group boundary broken: block {j} (rows {first}..{last}) mixes prompt "
                "ids {ids}",
                j=j,
                first=j * g,
                last=j * g + g - 1,
                ids=sorted(set(blocks[j].tolist())),
            )
        )
    firsts = blocks[:, 0]
    uniq, counts = np.unique(firsts, return_counts=True)
    if (counts > 1).any():
        raise ValueError(
            tr(
                "prompt {prompt!r} owns more than one block of {g} rows: each prompt "
                "must have exactly group_size rows (gather the whole group before "
                "computing statistics)",
                prompt=uniq[counts > 1][0],
                g=g,
            )
        )


class GroupStats(NamedTuple):
    """Output of :func:`group_statistics`: ``advantages`` (N,), aggregated ``rewards``
    (N,), per-group ``mean``, ``std`` (sample std, NaN if < 2 valid), ``zero_std``
    (bool) with shape (N // G,), and TRL's ``metrics``."""

    advantages: np.ndarray
    rewards: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    zero_std: np.ndarray
    metrics: dict


def group_statistics(
    rewards_per_func,
    prompt_ids,
    group_size,
    *,
    reward_weights=None,
    scale_rewards="group",
    multi_objective_aggregation="sum_then_normalize",
    eps=1e-4,
):
    """Step 4: check the group boundaries, then TRL's advantages
    (:func:`dpo_grpo.trl_exact.reward_advantages`).

    ``rewards_per_func`` (N, K) or (N,); the statistics are computed on complete groups,
    which in data-parallel training means *after* gathering every row of a prompt from
    every process.
    """
    assert_complete_groups(prompt_ids, group_size)
    out = reward_advantages(
        rewards_per_func,
        group_size,
        reward_weights=reward_weights,
        scale_rewards=scale_rewards,
        multi_objective_aggregation=multi_objective_aggregation,
        eps=eps,
    )
    if out.advantages.size != np.asarray(prompt_ids).size:
        raise ValueError(
            "rewards_per_func must have one row per prompt id "
            f"({np.asarray(prompt_ids).size}), "
            f"got {out.advantages.size} rows"
        )
    rpf = np.asarray(rewards_per_func, dtype=np.float64)
    rpf = rpf[:, None] if rpf.ndim == 1 else rpf
    w = (
        np.ones(rpf.shape[1])
        if reward_weights is None
        else np.asarray(reward_weights, dtype=np.float64)
    )
    total = np.nansum(rpf * w, axis=1)
    total[np.isnan(rpf).all(axis=1)] = np.nan
    groups = total.reshape(-1, group_size)
    valid = (~np.isnan(groups)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(
            valid > 0, np.nansum(groups, axis=1) / np.maximum(valid, 1), np.nan
        )
        var = np.nansum((groups - mean[:, None]) ** 2, axis=1) / np.maximum(
            valid - 1, 1
        )
    std = np.where(valid > 1, np.sqrt(var), np.nan)
    zero = np.isclose(std, 0.0, rtol=1e-5, atol=1e-8)
    return GroupStats(out.advantages, total, mean, std, zero, out.metrics)
