"""Step 7 of the GRPO update (section 5.1): the optimizer step on the toy policy's
logits (Adam, a warm-up schedule), the numbers to log, and the three warning signs
read off them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validation as v
from ..i18n import tr
from .rollout import EOS, Rollout, as_theta, require_rollout
from .scoring import GroupStats
from .token_loss import LossOutput


@dataclass
class Adam:
    """Adam on one array: ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``, step
    ``lr m_hat / (sqrt(v_hat) + eps)``."""

    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    t: int = 0
    m: np.ndarray | None = None
    v: np.ndarray | None = None

    def __post_init__(self):
        for name in ("b1", "b2"):
            b = v.scalar(getattr(self, name), name, nonnegative=True)
            if b >= 1:
                raise ValueError(f"{name} must lie in [0, 1), got {b}")
        v.scalar(self.eps, "eps", positive=True)
        v.integer(self.t, "t", minimum=0)

    def step(self, params, grad, lr):
        params = v.as_float_array(params, "params")
        grad = v.as_float_array(grad, "grad")
        v.same_shape(params=params, grad=grad)
        lr = v.scalar(lr, "lr", positive=True)
        if self.m is None:
            self.m, self.v = np.zeros_like(params), np.zeros_like(params)
        self.t += 1
        self.m = self.b1 * self.m + (1 - self.b1) * grad
        self.v = self.b2 * self.v + (1 - self.b2) * grad**2
        m_hat = self.m / (1 - self.b1**self.t)
        v_hat = self.v / (1 - self.b2**self.t)
        return params - lr * m_hat / (np.sqrt(v_hat) + self.eps)

    def state_dict(self):
        return {
            "b1": self.b1,
            "b2": self.b2,
            "eps": self.eps,
            "t": self.t,
            "m": None if self.m is None else self.m.copy(),
            "v": None if self.v is None else self.v.copy(),
        }

    @classmethod
    def from_state_dict(cls, d):
        return cls(
            d["b1"],
            d["b2"],
            d["eps"],
            d["t"],
            None if d["m"] is None else d["m"].copy(),
            None if d["v"] is None else d["v"].copy(),
        )


def linear_warmup_lr(step, base_lr, warmup_steps):
    """Scheduler: ``base_lr x min(1, (step + 1) / warmup_steps)``."""
    step = v.integer(step, "step", minimum=0)
    warmup = v.integer(warmup_steps, "warmup_steps", minimum=1)
    return v.scalar(base_lr, "base_lr", positive=True) * min(1.0, (step + 1) / warmup)


def apply_update(theta, grad_theta, optimizer: Adam, lr):
    """Step 7 (update): one optimizer step on the logits table; returns the new
    table."""
    if not isinstance(optimizer, Adam):
        raise TypeError(f"optimizer must be an Adam, got {type(optimizer).__name__}")
    th = as_theta(theta)
    g = v.as_float_array(grad_theta, "grad_theta")
    v.same_shape(theta=th, grad_theta=g)
    return optimizer.step(th, g, v.scalar(lr, "lr", positive=True))


def monitor(
    rollout: Rollout,
    stats: GroupStats,
    rewards_per_func,
    out: LossOutput,
    *,
    reward_names=None,
    epoch=0,
):
    """Step 7 (monitor): the numbers to log every update (TRL's names where TRL logs
    them).

    ``reward``/``reward_std`` (aggregated reward), ``rewards/<name>/mean|std`` per
    function, ``frac_reward_zero_std``, ``kl`` (when beta > 0),
    ``clip_ratio/region_mean``, ``completion_length`` (mean, max, and the fraction of
    completions that hit the maximum length without EOS), ``policy_version`` and the
    epoch over this rollout.
    """
    require_rollout(rollout)
    if not isinstance(stats, GroupStats):
        raise TypeError(f"stats must be a GroupStats, got {type(stats).__name__}")
    if not isinstance(out, LossOutput):
        raise TypeError(f"out must be a LossOutput, got {type(out).__name__}")
    rpf = v.as_float_array(
        rewards_per_func, "rewards_per_func", ndim=(1, 2), finite=False
    )
    rpf = rpf[:, None] if rpf.ndim == 1 else rpf
    if np.isinf(rpf).any():
        raise ValueError(
            "rewards_per_func must not contain inf (use NaN for 'reward function "
            "returned None')"
        )
    if rpf.shape[0] != rollout.token_ids.shape[0]:
        raise ValueError(
            "rewards_per_func must have one row per completion "
            f"({rollout.token_ids.shape[0]}), "
            f"got shape {rpf.shape}"
        )
    names = (
        [f"r{k}" for k in range(rpf.shape[1])]
        if reward_names is None
        else v.sequence(reward_names, "reward_names")
    )
    if len(names) != rpf.shape[1]:
        raise ValueError(
            f"reward_names must name each of the {rpf.shape[1]} reward functions, got "
            f"{len(names)}"
        )
    epoch = v.integer(epoch, "epoch", minimum=0)
    lengths = rollout.lengths
    last = rollout.token_ids[np.arange(lengths.size), np.maximum(lengths - 1, 0)]
    log = {
        "reward": stats.metrics["reward"],
        "reward_std": stats.metrics["reward_std"],
        "frac_reward_zero_std": stats.metrics["frac_reward_zero_std"],
    }
    for k, name in enumerate(names):
        col = rpf[:, k]
        log[f"rewards/{name}/mean"] = (
            float(np.nanmean(col)) if np.isfinite(col).any() else float("nan")
        )
        log[f"rewards/{name}/std"] = (
            float(np.nanstd(col, ddof=1))
            if np.isfinite(col).sum() > 1
            else float("nan")
        )
    if "kl" in out.grpo.metrics:
        log["kl"] = out.grpo.metrics["kl"]
    log["clip_ratio/region_mean"] = out.grpo.metrics["clip_ratio/region_mean"]
    log["completions/mean_length"] = float(lengths.mean())
    log["completions/max_length"] = int(lengths.max())
    log["completions/clipped_ratio"] = float(np.mean(last != EOS))
    log["policy_version"] = rollout.policy_version
    log["epoch"] = epoch
    return log


def warning_signs(
    history, *, length_growth=1.5, kl_spike=3.0, zero_std_rise=0.2, window=3
):
    """Flag the three warning signs in a list of monitoring dicts (oldest first);
    returns a list of strings.

    - reward up while length explodes: mean reward and mean length both rise, length by
      more than ``length_growth`` x over the history;
    - KL spike: the last ``kl`` exceeds ``kl_spike`` x the median of the earlier values;
    - more zero-std groups: ``frac_reward_zero_std`` of the last ``window`` entries
      exceeds the first ``window``'s by more than ``zero_std_rise``.
    """
    if not isinstance(history, (list, tuple)) or len(history) < 2:
        raise ValueError("history must be a list of at least two monitoring dicts")
    for row in history:
        if (
            not isinstance(row, dict)
            or "frac_reward_zero_std" not in row
            or (
                "completions/mean_length" in history[0]
                and not {"reward", "completions/mean_length"} <= set(row)
            )
        ):
            raise ValueError(
                "history must hold the dicts returned by monitor() (with 'reward', "
                "'completions/mean_length' and 'frac_reward_zero_std')"
            )
    length_growth = v.scalar(length_growth, "length_growth", nonnegative=True)
    kl_spike = v.scalar(kl_spike, "kl_spike", nonnegative=True)
    zero_std_rise = v.scalar(zero_std_rise, "zero_std_rise")
    flags = []
    w = min(v.integer(window, "window", minimum=1), len(history) // 2 or 1)
    first, last = history[:w], history[-w:]
    mean = lambda rows, k: float(np.mean([r[k] for r in rows]))  # noqa: E731
    if "completions/mean_length" in history[0]:
        r0, r1 = mean(first, "reward"), mean(last, "reward")
        l0, l1 = (
            mean(first, "completions/mean_length"),
            mean(last, "completions/mean_length"),
        )
        if r1 > r0 and l1 > length_growth * l0:
            flags.append(
                tr(
                    "reward up ({r0:.3g} -> {r1:.3g}) while completion length grows "
                    "{growth:.2f}x: check the reward for a length loophole",
                    r0=r0,
                    r1=r1,
                    growth=l1 / l0,
                )
            )
    kls = [r["kl"] for r in history if "kl" in r]
    if (
        len(kls) >= 3
        and kls[-1] > kl_spike * float(np.median(kls[:-1]))
        and kls[-1] > 0
    ):
        flags.append(
            tr(
                "KL spike: last kl {kl:.3g} > {spike:g} x median {median:.3g}",
                kl=kls[-1],
                spike=kl_spike,
                median=np.median(kls[:-1]),
            )
        )
    z0, z1 = mean(first, "frac_reward_zero_std"), mean(last, "frac_reward_zero_std")
    if z1 - z0 > zero_std_rise:
        flags.append(
            tr(
                "zero-std groups rise from {z0:.2f} to {z1:.2f}: fewer prompts carry a "
                "reward gradient",
                z0=z0,
                z1=z1,
            )
        )
    return flags
