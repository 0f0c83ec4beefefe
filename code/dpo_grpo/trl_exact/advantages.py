"""Group-relative advantages exactly as TRL 1.16.0's ``GRPOTrainer`` forms them.

``rewards_per_func (N, K)`` with rows in consecutive groups of ``num_generations`` ->
advantages ``(N,)``. The textbook form is :mod:`dpo_grpo.reference.advantages`; with one
reward function and no NaN the two agree at ``ddof=1``.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from .. import _validation as v

SCALE_REWARDS = ("group", "batch", "none", True, False)
AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")


def _nanmean(x, axis=None, keepdims=False):
    with warnings.catch_warnings():
        # all-NaN slices give NaN, as torch.nanmean does
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(x, axis=axis, keepdims=keepdims)


def _nanstd(x, axis=None, keepdims=False):
    """Sample std ignoring NaN (ddof 1 over the valid entries); NaN where fewer than two
    are valid (as TRL's)."""
    count = np.sum(~np.isnan(x), axis=axis, keepdims=keepdims)
    mean = _nanmean(x, axis=axis, keepdims=True)
    var = _nanmean((x - mean) ** 2, axis=axis, keepdims=keepdims)
    with np.errstate(divide="ignore", invalid="ignore"):
        var = np.where(count > 1, var * count / (count - 1), np.nan)
    return np.sqrt(var)


def _nansum(x, axis):
    return np.nansum(x, axis=axis)


class RewardAdvantages(NamedTuple):
    """Result of :func:`reward_advantages`: ``advantages`` (N,), the aggregated
    ``rewards`` (N,), TRL's metrics (floats).
    :func:`dpo_grpo.torch_ops.reward_advantages` returns it with tensors (metrics as 0-d
    tensors)."""

    advantages: np.ndarray
    rewards: np.ndarray
    metrics: dict


def reward_advantages(
    rewards_per_func,
    num_generations,
    *,
    reward_weights=None,
    scale_rewards="group",
    multi_objective_aggregation="sum_then_normalize",
    eps=1e-4,
) -> RewardAdvantages:
    """Advantages exactly as TRL 1.16.0's ``GRPOTrainer`` forms them from per-function
    rewards.

    ``rewards_per_func`` has shape ``(N, K)``: N completions in consecutive groups of
    ``num_generations``, K reward functions; NaN means "this function returned None". A
    row that is NaN for every function is unscorable.

    - ``sum_then_normalize``: ``r = nansum_k w_k r_k`` (unscorable rows NaN), then
      ``A = r - nanmean_group(r)``, divided by ``nanstd + eps`` over the group
      (``"group"``/``True``) or the whole batch (``"batch"``), or not at all
      (``"none"``/``False``).
    - ``normalize_then_sum``: each function is standardised within its group (nan-aware,
      ddof 1), the results are summed with weights, and the sum is standardised over the
      batch. ``scale_rewards`` is not read on this path.

    Standard deviations are sample stds over the valid entries (NaN if fewer than two);
    any NaN advantage (unscorable row, group with <= 1 valid reward) becomes 0. Metrics:
    ``reward`` and ``reward_std`` of the weighted sum over scorable rows,
    ``frac_reward_zero_std`` = fraction of rows whose std is zero (``isclose``, atol
    1e-8).
    """
    if isinstance(rewards_per_func, (str, bytes)) or rewards_per_func is None:
        raise TypeError(
            "rewards_per_func must be an array of numbers, got "
            f"{type(rewards_per_func).__name__}"
        )
    rpf = v.as_float_array(
        rewards_per_func, "rewards_per_func", ndim=(1, 2), finite=False
    )
    if rpf.ndim == 1:
        rpf = rpf[:, None]
    if np.isinf(rpf).any():
        raise ValueError(
            "rewards_per_func must not contain inf (use NaN for 'reward function "
            "returned None')"
        )
    n, k = rpf.shape
    g = v.integer(num_generations, "num_generations", minimum=2)
    if n % g:
        raise ValueError(
            f"num_generations={g} must divide the number of rows of rewards_per_func "
            f"({n})"
        )
    if reward_weights is None:
        w = np.ones(k)
    else:
        w = v.as_float_array(reward_weights, "reward_weights", ndim=1)
        if w.shape != (k,):
            raise ValueError(
                f"reward_weights must have one weight per reward function ({k}), got "
                f"{w.shape[0]}"
            )
    v.choice(scale_rewards, "scale_rewards", SCALE_REWARDS)
    scale = {True: "group", False: "none"}.get(scale_rewards, scale_rewards)
    v.choice(multi_objective_aggregation, "multi_objective_aggregation", AGGREGATIONS)
    eps = v.scalar(eps, "eps", positive=True)

    unscorable = np.isnan(rpf).all(axis=1)
    if multi_objective_aggregation == "sum_then_normalize":
        rewards = _nansum(rpf * w, axis=1)
        rewards[unscorable] = np.nan
        groups = rewards.reshape(-1, g)
        mean = np.repeat(_nanmean(groups, axis=1), g)
        if scale == "batch":
            std = np.full(n, _nanstd(rewards))
        elif scale in ("group", "none"):  # "none": std only counts zero-std groups
            std = np.repeat(_nanstd(groups, axis=1), g)
        else:
            raise ValueError(f"scale_rewards {scale!r} has no implementation here")
        advantages = rewards - mean
        if scale != "none":
            advantages = advantages / (std + eps)
    else:
        grouped = rpf.reshape(-1, g, k)
        z = (grouped - _nanmean(grouped, axis=1, keepdims=True)) / (
            _nanstd(grouped, axis=1, keepdims=True) + eps
        )
        rewards = _nansum(z.reshape(n, k) * w, axis=1)
        rewards[unscorable] = np.nan
        std = np.full(n, _nanstd(rewards))
        advantages = (rewards - _nanmean(rewards)) / (std + eps)
    # NaN std is not "zero std", as in torch.isclose
    zero_std = np.isclose(std, 0.0, rtol=1e-5, atol=1e-8)
    advantages = np.nan_to_num(advantages, nan=0.0)

    logged = _nansum(rpf * w, axis=1)
    logged[unscorable] = np.nan
    metrics = {
        "reward": float(_nanmean(logged)),
        "reward_std": float(_nanstd(logged)),
        "frac_reward_zero_std": float(zero_std.mean()),
    }
    return RewardAdvantages(advantages=advantages, rewards=rewards, metrics=metrics)
