"""GRPO's objective as DeepSeekMath writes it (chapter 3, section 3.5): PPO's clipped
ratio plus a k3 KL penalty.

Shapes: per-token log-probs of the sampled answers ``new_logps``, ``old_logps``,
``ref_logps`` and the 0/1 ``mask`` are ``(B, T)`` (B answers padded to T tokens);
``advantages`` is ``(B,)``, one per answer, shared by its tokens. :func:`grpo_loss`
here is the readable one the chapters print (``dpo_grpo.grpo_loss``). Every TRL option
(``loss_type``, ``epsilon_high``, ``delta``, GSPO, ...) is in the TRL-exact
:func:`dpo_grpo.trl_exact.grpo.grpo_loss` (``dpo_grpo.trl_exact.grpo_loss``), equal to
:func:`grpo_loss` here at its defaults (``loss_type="grpo"``, the paper's objective).
"""

from __future__ import annotations

import numpy as np

from .. import _validation as v


def grpo_loss(
    new_logps, old_logps, ref_logps, advantages, mask, epsilon=0.2, beta=0.04
):
    """DeepSeekMath's GRPO loss and its gradient d loss / d new_logps (section 3.5).

    loss = 1/B Σ_i 1/|y_i| Σ_t [-min(ρ A_i, clip(ρ, 1-ε, 1+ε) A_i) + β k3],
    ρ = exp(new - old), k3 = exp(ref - new) - (ref - new) - 1.
    Returns (loss, grad); grad has the shape (B, T) of new_logps.
    """
    new, old, ref, A, mask = _checked_batch(
        new_logps, old_logps, ref_logps, advantages, mask, epsilon, beta
    )
    ratio = np.exp(new - old)  # ρ = π_θ / π_old, per token
    unclipped = ratio * A
    clipped = np.clip(ratio, 1 - epsilon, 1 + epsilon) * A
    surrogate = np.minimum(unclipped, clipped)  # PPO's pessimistic bound
    log_ref_ratio = ref - new
    k3 = np.exp(log_ref_ratio) - log_ref_ratio - 1
    per_token = -surrogate + beta * k3
    # 1/B · 1/|y_i| on real tokens, 0 on padding
    weight = mask / mask.sum(axis=1, keepdims=True) / len(new)
    loss = float((weight * per_token).sum())
    # d(ρA)/d new = ρA on the unclipped branch; the clip's flat platform gives 0
    d_surrogate = np.where(unclipped <= clipped, unclipped, 0.0)
    d_k3 = 1 - np.exp(log_ref_ratio)
    grad = weight * (-d_surrogate + beta * d_k3)
    return loss, grad


def clipped_objective(ratio, advantage, epsilon=0.2, epsilon_high=None, delta=None):
    """PPO's per-token objective (to maximise), elementwise (section 3.5):
    ``min(min(ρ, δ) A, clip(ρ, 1-ε_low, 1+ε_high) A)``.

    ``epsilon_high=None``: symmetric clip (``ε_high = ε_low = epsilon``);
    ``delta=None``: no cap on the unclipped branch (INTELLECT-2's ``δ`` when given).
    ``ratio`` and ``advantage`` broadcast together.
    """
    rho, a = _ratio_advantage(ratio, advantage)
    eps_low, eps_high, delta = clip_bounds(epsilon, epsilon_high, delta)
    capped = rho if delta is None else np.minimum(rho, delta)
    return np.minimum(capped * a, np.clip(rho, 1 - eps_low, 1 + eps_high) * a)


def clipped_objective_grad(
    ratio, advantage, epsilon=0.2, epsilon_high=None, delta=None
):
    """d/dρ of :func:`clipped_objective` (section 3.5): ``A`` where the unclipped branch
    is active, 0 on the flat platforms (and above ``delta``)."""
    rho, a = _ratio_advantage(ratio, advantage)
    eps_low, eps_high, delta = clip_bounds(epsilon, epsilon_high, delta)
    platform = ((a > 0) & (rho > 1 + eps_high)) | ((a < 0) & (rho < 1 - eps_low))
    capped = False if delta is None else rho > delta
    return np.where(platform | capped, 0.0, a * np.ones_like(rho))


def clip_region(ratio, advantage, epsilon=0.2, epsilon_high=None):
    """Where each (ρ, A) sits (section 3.5): ``"platform"`` (clipped, gradient 0),
    ``"wrong_direction"`` (outside the interval on the harmful side: not clipped,
    still penalised) or ``"inside"``."""
    rho, a = _ratio_advantage(ratio, advantage)
    eps_low, eps_high, _ = clip_bounds(epsilon, epsilon_high)
    platform = ((a > 0) & (rho > 1 + eps_high)) | ((a < 0) & (rho < 1 - eps_low))
    wrong = ((a < 0) & (rho > 1 + eps_high)) | ((a > 0) & (rho < 1 - eps_low))
    return np.where(platform, "platform", np.where(wrong, "wrong_direction", "inside"))


def clip_bounds(epsilon=0.2, epsilon_high=None, delta=None):
    """The clip's options (section 3.5), checked: ``(eps_low, eps_high, delta)``.

    ``epsilon`` in (0, 1); ``epsilon_high >= 0`` or None (then ``epsilon``, as in TRL);
    ``delta > 1`` or None (it caps ratios above 1).
    """
    eps_low = v.scalar(epsilon, "epsilon", open_unit=True)
    eps_high = v.scalar(epsilon_high, "epsilon_high", nonnegative=True, allow_none=True)
    delta = v.scalar(delta, "delta", allow_none=True)
    if delta is not None and delta <= 1.0:
        raise ValueError(
            "delta must be > 1 (it caps ratios above 1; TRL recommends > 1 + "
            f"epsilon_high), got {delta}"
        )
    return eps_low, (eps_low if eps_high is None else eps_high), delta


# --- argument checks ------------------------------------------------------------------


def _checked_batch(new_logps, old_logps, ref_logps, advantages, mask, epsilon, beta):
    """Validated float arrays ``(new, old, ref, A (B, 1), mask)``, padding set to 0 (so
    it never reaches an exp)."""
    new = v.as_float_array(new_logps, "new_logps", ndim=2, finite=False)
    active = v.binary_mask(mask, "mask", new.shape)
    named = {"new_logps": new_logps, "old_logps": old_logps, "ref_logps": ref_logps}
    out = []
    for name, x in named.items():
        arr = v.as_float_array(x, name, ndim=2, finite=False)
        if arr.shape != new.shape:
            raise ValueError(
                f"{name} must have the same shape as new_logps: {arr.shape} != "
                f"{new.shape}"
            )
        if not np.isfinite(arr[active]).all():
            raise ValueError(
                f"{name} must be finite at every valid (mask == 1) position"
            )
        out.append(np.where(active, arr, 0.0))
    adv = v.as_float_array(advantages, "advantages", ndim=1)
    if adv.shape != (new.shape[0],):
        raise ValueError(
            f"advantages must have shape ({new.shape[0]},), one per answer, got "
            f"{adv.shape}"
        )
    v.scalar(epsilon, "epsilon", open_unit=True)
    v.scalar(beta, "beta", nonnegative=True)
    new, old, ref = out
    if max((new - old).max(), (ref - new).max()) > _MAX_LOG_GAP:
        raise ValueError(
            f"new_logps - old_logps or ref_logps - new_logps exceeds {_MAX_LOG_GAP} "
            "at a valid position: exp would overflow (check the log-probs)"
        )
    return new, old, ref, adv[:, None], active.astype(np.float64)


_MAX_LOG_GAP = 700.0  # exp(709.8) is the largest finite float64


def _ratio_advantage(ratio, advantage):
    """Validated ``(ratio, advantage)`` arrays: ratios > 0, shapes that broadcast
    together."""
    rho = v.as_float_array(ratio, "ratio")
    if (rho <= 0).any():
        raise ValueError("ratio must be > 0")
    a = v.as_float_array(advantage, "advantage")
    try:
        np.broadcast_shapes(rho.shape, a.shape)
    except ValueError:
        raise ValueError(
            f"ratio and advantage must have broadcastable shapes, got {rho.shape} and "
            f"{a.shape}"
        ) from None
    return rho, a
