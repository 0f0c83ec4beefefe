"""Group-relative advantages in PyTorch: the book's :func:`group_advantages` and TRL
1.16.0's :func:`reward_advantages`, on the rewards' device and dtype (half precision
computed in float32).

Same arguments, checks and results as :mod:`dpo_grpo.reference.advantages` and
:mod:`dpo_grpo.trl_exact.advantages` (tested equal); ``validate=False`` skips the one
value check that synchronises with the device.
"""

from __future__ import annotations

import math

import torch

from .. import _validation as v
from ..trl_exact.advantages import AGGREGATIONS, SCALE_REWARDS, RewardAdvantages
from .tensors import compute_dtype, scalar_like

__all__ = ["group_advantages", "reward_advantages", "RewardAdvantages"]


def _reward_tensor(x, name):
    if x is None or isinstance(x, (str, bytes, dict)):
        raise TypeError(f"{name} must be a tensor of numbers, got {type(x).__name__}")
    if isinstance(x, torch.Tensor):
        if x.is_complex():
            raise TypeError(f"{name} must be a real tensor, got dtype {x.dtype}")
        if not x.is_floating_point():
            x = x.to(torch.get_default_dtype())
        return x.to(compute_dtype(x.dtype))
    return torch.as_tensor(v.as_float_array(x, name, finite=False))


def group_advantages(rewards, eps=1e-4, ddof=0, *, validate=True):
    """Standardise each row: ``(r - mean) / (std + eps)``; ``rewards`` and the result
    have shape ``(prompts, G)``.

    ``ddof=0``: population std (the book's teaching default); ``ddof=1``: sample std
    (TRL's ``nanstd``).
    """
    r = _reward_tensor(rewards, "rewards")
    if r.dim() != 2:
        raise ValueError(f"rewards must be 2-D, got shape {tuple(r.shape)}")
    if r.numel() == 0:
        raise ValueError(f"rewards must not be empty, got shape {tuple(r.shape)}")
    if r.shape[1] < 2:
        raise ValueError(
            f"rewards must have shape (prompts, G) with G >= 2, got {tuple(r.shape)}"
        )
    eps = v.scalar(eps, "eps", positive=True)
    ddof = v.choice(v.integer(ddof, "ddof"), "ddof", (0, 1))
    if v.boolean(validate, "validate") and not bool(torch.isfinite(r).all()):
        raise ValueError("rewards must contain only finite values (found NaN or inf)")
    mean = r.mean(dim=1, keepdim=True)
    std = r.std(dim=1, keepdim=True, correction=ddof)
    return (r - mean) / (std + eps)


def _nanstd(x, dim=None, keepdim=False):
    """Sample std ignoring NaN (ddof 1 over the valid entries); NaN where fewer than two
    are valid (TRL's nanstd)."""
    count = (~torch.isnan(x)).sum(dim=dim, keepdim=True).to(x.dtype)
    mean = torch.nanmean(x, dim=dim, keepdim=True)
    var = torch.nanmean((x - mean) ** 2, dim=dim, keepdim=True)
    var = torch.where(count > 1, var * count / (count - 1), scalar_like(math.nan, var))
    std = var.sqrt()
    if keepdim:
        return std
    return std.reshape(()) if dim is None else std.squeeze(dim)


def reward_advantages(
    rewards_per_func,
    num_generations,
    *,
    reward_weights=None,
    scale_rewards="group",
    multi_objective_aggregation="sum_then_normalize",
    eps=1e-4,
    validate=True,
) -> RewardAdvantages:
    """Advantages exactly as TRL 1.16.0's ``GRPOTrainer`` forms them (see
    :func:`dpo_grpo.trl_exact.reward_advantages`).

    ``rewards_per_func``: (N, K) (or (N,)), rows in consecutive groups of
    ``num_generations``, NaN = "returned None". ``sum_then_normalize``:
    ``r = nansum_k w_k r_k``, ``A = (r - nanmean_group r) / (nanstd + eps)`` with the
    std over the group, the batch, or none; ``normalize_then_sum``: standardise each
    function per group, sum with weights, standardise over the batch. NaN advantages
    become 0. ``validate`` checks for inf (one sync).
    """
    rpf = _reward_tensor(rewards_per_func, "rewards_per_func")
    if rpf.dim() not in (1, 2):
        raise ValueError(
            f"rewards_per_func must be 1-D or 2-D, got shape {tuple(rpf.shape)}"
        )
    if rpf.numel() == 0:
        raise ValueError(
            f"rewards_per_func must not be empty, got shape {tuple(rpf.shape)}"
        )
    if rpf.dim() == 1:
        rpf = rpf[:, None]
    n, k = rpf.shape
    g = v.integer(num_generations, "num_generations", minimum=2)
    if n % g:
        raise ValueError(
            f"num_generations={g} must divide the number of rows of rewards_per_func "
            f"({n})"
        )
    if reward_weights is None:
        w = torch.ones(k, dtype=rpf.dtype, device=rpf.device)
    else:
        w = _reward_tensor(reward_weights, "reward_weights").to(
            device=rpf.device, dtype=rpf.dtype
        )
        if w.dim() != 1:
            raise ValueError(f"reward_weights must be 1-D, got shape {tuple(w.shape)}")
        if w.shape != (k,):
            raise ValueError(
                f"reward_weights must have one weight per reward function ({k}), got "
                f"{w.shape[0]}"
            )
    v.choice(scale_rewards, "scale_rewards", SCALE_REWARDS)
    scale = {True: "group", False: "none"}.get(scale_rewards, scale_rewards)
    v.choice(multi_objective_aggregation, "multi_objective_aggregation", AGGREGATIONS)
    eps = v.scalar(eps, "eps", positive=True)
    if v.boolean(validate, "validate"):
        bad = torch.stack([torch.isinf(rpf).any(), ~torch.isfinite(w).all()]).tolist()
        if bad[0]:
            raise ValueError(
                "rewards_per_func must not contain inf (use NaN for 'reward function "
                "returned None')"
            )
        if bad[1]:
            raise ValueError(
                "reward_weights must contain only finite values (found NaN or inf)"
            )

    nan = scalar_like(math.nan, rpf)
    unscorable = torch.isnan(rpf).all(dim=1)
    if multi_objective_aggregation == "sum_then_normalize":
        rewards = torch.where(unscorable, nan, torch.nansum(rpf * w, dim=1))
        groups = rewards.reshape(-1, g)
        mean = torch.nanmean(groups, dim=1).repeat_interleave(g)
        if scale == "batch":
            std = _nanstd(rewards).expand(n)
        elif scale in ("group", "none"):  # "none": std only counts zero-std groups
            std = _nanstd(groups, dim=1).repeat_interleave(g)
        else:
            raise ValueError(f"scale_rewards {scale!r} has no implementation here")
        advantages = rewards - mean
        if scale != "none":
            advantages = advantages / (std + eps)
    else:
        grouped = rpf.reshape(-1, g, k)
        z = (grouped - torch.nanmean(grouped, dim=1, keepdim=True)) / (
            _nanstd(grouped, dim=1, keepdim=True) + eps
        )
        rewards = torch.where(unscorable, nan, torch.nansum(z.reshape(n, k) * w, dim=1))
        std = _nanstd(rewards).expand(n)
        advantages = (rewards - torch.nanmean(rewards)) / (std + eps)
    # NaN is not "zero std"
    zero_std = torch.isclose(std, torch.zeros_like(std), rtol=1e-5, atol=1e-8)
    advantages = torch.nan_to_num(advantages, nan=0.0)

    logged = torch.where(unscorable, nan, torch.nansum(rpf * w, dim=1))
    metrics = {
        "reward": torch.nanmean(logged),
        "reward_std": _nanstd(logged),
        "frac_reward_zero_std": zero_std.to(rpf.dtype).mean(),
    }
    return RewardAdvantages(advantages=advantages, rewards=rewards, metrics=metrics)
