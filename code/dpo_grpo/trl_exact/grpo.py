"""The GRPO per-token clipped objective with a k3 KL penalty, with TRL 1.16.0's options and an analytic gradient.

Shapes: ``new_logps``, ``old_logps``, ``ref_logps``, ``mask``: ``(B, T)`` per-token log-probs of the sampled
completion tokens; ``advantages``: ``(B,)`` (one per completion, broadcast over its tokens) or ``(B, T)``.
Per token: ``rho = exp(new - old)``, ``l = -min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A) + beta k3``,
``k3 = exp(ref - new) - (ref - new) - 1``; ``loss_type`` decides how the masked ``l`` are averaged.
TRL 1.16.0's four newer loss types replace the clipped surrogate: ``cispo`` (a capped, detached weight on
``log pi``), ``sapo`` (a sigmoid gate on the ratio), ``luspo`` (the clipped surrogate, summed per sequence) and
``vespo`` (a detached Gamma-kernel weight of the sequence ratio on ``log pi``); see :func:`grpo_loss`.
"""

from __future__ import annotations

from typing import NamedTuple

import math

import numpy as np

from .. import _validation as v
from ..reference.grpo import _ratio_advantage

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo")
#: loss types whose policy term is TRL's clipped surrogate (they log the clip_ratio/* metrics)
CLIPPED_LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo")
IMPORTANCE_SAMPLING_LEVELS = ("token", "sequence")
CLIP_METRICS = (
    "clip_ratio/low_mean",
    "clip_ratio/high_mean",
    "clip_ratio/region_mean",
    "clip_ratio/low_min",
    "clip_ratio/high_max",
)


class GRPOOutput(NamedTuple):
    """Result of :func:`grpo_loss`. The first three fields are ``loss, ratio, per_token_kl``."""

    loss: float
    ratio: np.ndarray  #: importance weight per token (B, T): exp(new - old), or the GSPO sequence weight broadcast
    #: k3 per token (B, T) as used in the loss (x ratio with bias correction); None without ref
    per_token_kl: np.ndarray | None
    #: clipped surrogate + beta * KL per token (B, T), zero on padding
    per_token_loss: np.ndarray
    grad: np.ndarray  #: d loss / d new_logps (B, T), exactly zero on padding
    metrics: dict  #: TRL's names: clip_ratio/* and (when beta != 0) kl


def _valid_values(x, name, active):
    if not np.isfinite(x[active]).all():
        raise ValueError(f"{name} must be finite at every valid (mask == 1) position")
    # mask *before* any exp, so NaN/inf padding cannot leak
    return np.where(active, x, 0.0)


def _masked_mean_over(x, m):
    """TRL's ``global_masked_mean``: per-sequence values (B, 1) count once each; (B, T) values are token-masked."""
    if x.shape[1] == 1:
        return float(x.mean())
    return float((x * m).sum() / max(m.sum(), 1.0))


def _per_sequence(x, m):
    if x.shape[1] == 1:
        return x[:, 0]
    return (x * m).sum(axis=1) / m.sum(axis=1)


def _metrics(coef1_capped, adv, kl_term, m, eps_low, eps_high) -> dict:
    """TRL's logged metrics: ``kl`` (when the KL term is used) and the five ``clip_ratio/*`` statistics."""
    metrics = {}
    if kl_term is not None:
        metrics["kl"] = _masked_mean_over(kl_term, m)
    is_low = ((coef1_capped < 1 - eps_low) & (adv < 0)).astype(np.float64)
    is_high = ((coef1_capped > 1 + eps_high) & (adv > 0)).astype(np.float64)
    is_region = np.maximum(is_low, is_high)
    metrics["clip_ratio/low_mean"] = _masked_mean_over(is_low, m)
    metrics["clip_ratio/high_mean"] = _masked_mean_over(is_high, m)
    metrics["clip_ratio/region_mean"] = _masked_mean_over(is_region, m)
    metrics["clip_ratio/low_min"] = float(_per_sequence(is_low, m).min())
    metrics["clip_ratio/high_max"] = float(_per_sequence(is_high, m).max())
    return metrics


def _clip_bounds(epsilon, epsilon_high):
    """Validated ``(eps_low, eps_high)``; ``epsilon_high=None`` means symmetric clipping, as in TRL."""
    eps_low = v.scalar(epsilon, "epsilon", open_unit=True)
    eps_high = v.scalar(epsilon_high, "epsilon_high", nonnegative=True, allow_none=True)
    return eps_low, (eps_low if eps_high is None else eps_high)


class GRPOOptions(NamedTuple):
    """Validated options of ``grpo_loss`` (shared by the NumPy and torch implementations)."""

    eps_low: float
    eps_high: float
    beta: float
    delta: float | None
    loss_type: str
    token_level: bool
    bias_kl: bool
    gas: int
    spg: int
    nproc: int
    max_len: int
    sapo_tau_pos: float = 1.0  #: float32(sapo_temperature_pos), as TRL uses it
    sapo_tau_neg: float = float(np.float32(1.05))  #: float32(sapo_temperature_neg)
    vespo_k_pos: float = 2.0  #: float32(vespo_k_pos)
    vespo_lambda_pos: float = 3.0  #: float32(vespo_lambda_pos)
    vespo_k_neg: float = 3.0  #: float32(vespo_k_neg)
    vespo_lambda_neg: float = 2.0  #: float32(vespo_lambda_neg)


def _float32(x) -> float:
    """``x`` rounded to float32 and back: the value TRL computes with when it builds a constant tensor with
    ``torch.where(cond, x_pos, x_neg)`` from Python floats (the default dtype, float32)."""
    return float(np.float32(x))


def grpo_options(
    epsilon,
    beta,
    loss_type,
    importance_sampling_level,
    epsilon_high,
    delta,
    use_bias_correction_kl,
    max_completion_length,
    gradient_accumulation_steps,
    steps_per_generation,
    num_processes,
    width,
    *,
    sapo_temperature_pos=1.0,
    sapo_temperature_neg=1.05,
    vespo_k_pos=2.0,
    vespo_lambda_pos=3.0,
    vespo_k_neg=3.0,
    vespo_lambda_neg=2.0,
) -> GRPOOptions:
    """Check every scalar option of :func:`grpo_loss` (``width`` = the mask's T) and return them validated.

    The one place where options are checked (as TRL's ``GRPOConfig.__post_init__`` and ``GRPOTrainer.__init__``
    do); the loss bodies only compute. ``epsilon_high=None`` becomes ``epsilon``, as in TRL, also for ``cispo``,
    where it is the absolute cap ``eps_max`` on the ratio. SAPO's temperatures and VESPO's ``k``/``lambda`` are
    stored rounded to float32, the values TRL 1.16.0 computes with.
    """
    eps_low, eps_high = _clip_bounds(epsilon, epsilon_high)
    beta = v.scalar(beta, "beta", nonnegative=True)
    delta = v.scalar(delta, "delta", allow_none=True)
    if delta is not None and delta <= 1.0:
        raise ValueError(
            f"delta must be > 1 (it caps ratios above 1; TRL recommends > 1 + epsilon_high), got {delta}"
        )
    v.choice(loss_type, "loss_type", LOSS_TYPES)
    v.choice(
        importance_sampling_level,
        "importance_sampling_level",
        IMPORTANCE_SAMPLING_LEVELS,
    )
    if not isinstance(use_bias_correction_kl, (bool, np.bool_)):
        raise TypeError(
            f"use_bias_correction_kl must be a bool, got {type(use_bias_correction_kl).__name__}"
        )
    gas = v.integer(
        gradient_accumulation_steps, "gradient_accumulation_steps", minimum=1
    )
    spg = v.integer(steps_per_generation, "steps_per_generation", minimum=1)
    nproc = v.integer(num_processes, "num_processes", minimum=1)
    if max_completion_length is None:
        max_len = width
    else:
        max_len = v.integer(max_completion_length, "max_completion_length", minimum=1)
        if max_len < width:
            raise ValueError(
                f"max_completion_length ({max_len}) must be >= the mask's width ({width})"
            )
    tau_pos = v.scalar(sapo_temperature_pos, "sapo_temperature_pos", positive=True)
    tau_neg = v.scalar(sapo_temperature_neg, "sapo_temperature_neg", positive=True)
    k_pos = v.scalar(vespo_k_pos, "vespo_k_pos", nonnegative=True)
    k_neg = v.scalar(vespo_k_neg, "vespo_k_neg", nonnegative=True)
    lam_pos = v.scalar(vespo_lambda_pos, "vespo_lambda_pos", positive=True)
    lam_neg = v.scalar(vespo_lambda_neg, "vespo_lambda_neg", positive=True)
    return GRPOOptions(
        eps_low,
        eps_high,
        beta,
        delta,
        loss_type,
        importance_sampling_level == "token",
        bool(use_bias_correction_kl),
        gas,
        spg,
        nproc,
        max_len,
        _float32(tau_pos),
        _float32(tau_neg),
        _float32(k_pos),
        _float32(lam_pos),
        _float32(k_neg),
        _float32(lam_neg),
    )


def grpo_loss(
    new_logps,
    old_logps,
    ref_logps,
    advantages,
    mask,
    *,
    epsilon=0.2,
    beta=0.04,
    loss_type="grpo",
    importance_sampling_level="token",
    epsilon_high=None,
    delta=None,
    use_bias_correction_kl=False,
    max_completion_length=None,
    num_items_in_batch=None,
    gradient_accumulation_steps=1,
    steps_per_generation=1,
    num_processes=1,
    sapo_temperature_pos=1.0,
    sapo_temperature_neg=1.05,
    vespo_k_pos=2.0,
    vespo_lambda_pos=3.0,
    vespo_k_neg=3.0,
    vespo_lambda_neg=2.0,
) -> GRPOOutput:
    """GRPO loss exactly as TRL 1.16.0's ``GRPOTrainer._compute_loss`` computes it, for its eight loss types.

    Policy term per token, with ``rho`` the importance weight (token ratio ``exp(new - old)``, or with
    ``importance_sampling_level="sequence"`` (GSPO) ``exp(masked mean of new - old)``, the geometric mean of the
    sequence's token ratios) and ``A`` the advantage:

    - ``grpo``, ``bnpo``, ``dr_grpo``, ``dapo``, ``luspo``: ``-min(min(rho, delta) A, clip(rho, 1 - eps_low,
      1 + eps_high) A)`` (``delta`` caps the unclipped branch; two-sided clipping);
    - ``cispo``, ``sapo``, ``vespo``: see :func:`cispo_policy_term`, :func:`sapo_policy_term`,
      :func:`vespo_weight`.

    Normalisation of ``sum(l * mask)`` by ``loss_type`` (each also divided by ``gradient_accumulation_steps``):
    ``grpo`` and ``sapo`` per-sequence token mean, then batch mean (DeepSeekMath's 1/G sum 1/|y_i|); ``bnpo`` by
    the number of valid tokens; ``dr_grpo`` by ``B * max_completion_length``; ``luspo`` per-sequence *sum*, then
    batch mean (each GSPO sequence loss scaled by its length); ``dapo``, ``cispo`` and ``vespo`` by
    ``num_items_in_batch / num_processes * gradient_accumulation_steps / steps_per_generation`` instead (valid
    tokens of the whole generation batch).

    ``use_bias_correction_kl`` multiplies k3 by the (differentiable, uncapped) importance weight, for every loss
    type. TRL warns (and we follow it silently) when ``luspo`` runs at token level or ``vespo`` at sequence level;
    ``vespo`` builds its own sequence weight from the token log-ratios, so ``importance_sampling_level`` then only
    changes the bias-corrected KL. Defaults follow the article (``beta=0.04``, ``loss_type="grpo"``, no bias
    correction); TRL's own defaults are ``beta=0``, ``loss_type="dapo"``, ``use_bias_correction_kl=True``; the
    SAPO and VESPO options have TRL's defaults. Metrics: ``kl`` (when ``beta != 0``); the five ``clip_ratio/*``
    for the clipped types; ``cispo_clip_ratio`` for ``cispo``; ``vespo/phi_seq_mean`` for ``vespo``; none
    else (as TRL logs them).
    """
    new = v.as_float_array(new_logps, "new_logps", ndim=2, finite=False)
    old = v.as_float_array(old_logps, "old_logps", ndim=2, finite=False)
    v.same_shape(new_logps=new, old_logps=old)
    active = v.binary_mask(mask, "mask", new.shape)
    m = active.astype(np.float64)
    bsz, width = new.shape

    o = grpo_options(
        epsilon,
        beta,
        loss_type,
        importance_sampling_level,
        epsilon_high,
        delta,
        use_bias_correction_kl,
        max_completion_length,
        gradient_accumulation_steps,
        steps_per_generation,
        num_processes,
        width,
        sapo_temperature_pos=sapo_temperature_pos,
        sapo_temperature_neg=sapo_temperature_neg,
        vespo_k_pos=vespo_k_pos,
        vespo_lambda_pos=vespo_lambda_pos,
        vespo_k_neg=vespo_k_neg,
        vespo_lambda_neg=vespo_lambda_neg,
    )
    n_items = (
        float(m.sum())
        if num_items_in_batch is None
        else v.scalar(num_items_in_batch, "num_items_in_batch", positive=True)
    )

    if ref_logps is None:
        if o.beta != 0:
            raise ValueError(
                "ref_logps may be None only when beta == 0 (the KL term needs the reference)"
            )
        ref = None
    else:
        ref = v.as_float_array(ref_logps, "ref_logps", ndim=2, finite=False)
        v.same_shape(new_logps=new, ref_logps=ref)

    adv = v.as_float_array(advantages, "advantages", ndim=(1, 2), finite=False)
    if adv.ndim == 1:
        if adv.shape != (bsz,):
            raise ValueError(
                f"advantages must have shape ({bsz},) or ({bsz}, {width}), got {adv.shape}"
            )
        if not np.isfinite(adv).all():
            raise ValueError("advantages must be finite")
        adv = adv[:, None]
    else:
        if adv.shape != new.shape:
            raise ValueError(
                f"advantages must have shape ({bsz},) or ({bsz}, {width}), got {adv.shape}"
            )
        adv = _valid_values(adv, "advantages", active)

    new = _valid_values(new, "new_logps", active)
    old = _valid_values(old, "old_logps", active)
    if ref is not None:
        ref = _valid_values(ref, "ref_logps", active)
    return _grpo_from_valid(
        new,
        old,
        ref,
        adv,
        m,
        eps_low=o.eps_low,
        eps_high=o.eps_high,
        beta=o.beta,
        delta=o.delta,
        loss_type=o.loss_type,
        importance_sampling_level=importance_sampling_level,
        use_bias_correction_kl=o.bias_kl,
        max_len=o.max_len,
        n_items=n_items,
        gas=o.gas,
        spg=o.spg,
        nproc=o.nproc,
        options=o,
    )


def _full(x, shape):
    """``x`` broadcast to ``shape`` (a read-only view; ``x`` itself when it already has that shape)."""
    return x if np.shape(x) == shape else np.broadcast_to(x, shape)


def _sigmoid(x):
    return np.exp(-np.logaddexp(0.0, -x))


def clipped_policy_term(coef1, adv, eps_low, eps_high, delta=None):
    """TRL's clipped surrogate ``-min(min(rho, delta) A, clip(rho, 1 - eps_low, 1 + eps_high) A)`` and its
    derivative with respect to ``log rho``; also returns ``min(rho, delta)`` (what TRL's clip metrics read).
    PPO's objective (Schulman et al. 2017, :cite:`schulman2017ppo`) as GRPO uses it; ``delta`` from INTELLECT-2."""
    coef2 = np.clip(coef1, 1 - eps_low, 1 + eps_high)
    coef1_capped = coef1 if delta is None else np.minimum(coef1, delta)
    l1, l2 = coef1_capped * adv, coef2 * adv
    policy = -np.minimum(l1, l2)
    # torch.min/clamp semantics: clamp passes the gradient on its closed interval; a tie in min sends half the
    # gradient to each branch.
    d_capped = coef1 if delta is None else coef1 * (coef1 <= delta)
    d_coef2 = coef1 * ((coef1 >= 1 - eps_low) & (coef1 <= 1 + eps_high))
    d_log_w = np.where(
        l1 < l2,
        -adv * d_capped,
        np.where(l1 > l2, -adv * d_coef2, -0.5 * adv * (d_capped + d_coef2)),
    )
    return policy, d_log_w, coef1_capped


def cispo_policy_term(coef1, adv, new, eps_max):
    """CISPO (MiniMax-M1, :cite:`minimax2025m1`; TRL's ``loss_type="cispo"``): ``-sg(min(rho, eps_max)) A log pi``.

    The importance weight is capped from above at ``eps_max`` (TRL's ``epsilon_high``, which falls back to
    ``epsilon`` when unset: then every weight above 0.2 is cut to 0.2) and detached (``sg``), so every token keeps
    a gradient ``-min(rho, eps_max) A`` on its log-prob, however far the ratio is from 1. Returns the per-token
    term and its derivative with respect to ``new`` (direct, not through ``rho``)."""
    capped = np.minimum(coef1, eps_max)
    return -capped * adv * new, -capped * adv


def sapo_policy_term(coef1, adv, tau_pos, tau_neg):
    """SAPO (Gao et al. 2025, :cite:`gao2025sapo`; TRL's ``loss_type="sapo"``): ``-(4 / tau) sigmoid(tau (rho - 1)) A``.

    A smooth gate in place of the clip: its slope in ``rho`` is ``4 s (1 - s)`` with ``s = sigmoid(tau (rho -
    1))``, 1 at ``rho = 1`` and decaying on both sides. ``tau = tau_pos`` where ``A > 0``, else ``tau_neg``; TRL
    builds the ``tau`` tensor from Python floats with ``torch.where``, so it holds float32 values (1.05 becomes
    1.0499999523...), which the caller passes (:func:`grpo_options` rounds them). Returns the per-token term
    and its derivative with respect to ``log rho``."""
    tau = np.where(adv > 0, tau_pos, tau_neg)
    s = _sigmoid(tau * (coef1 - 1))
    return -(s * 4 / tau) * adv, -adv * 4 * s * (1 - s) * coef1


#: VESPO's bounds on log w, as in TRL 1.16.0: log(1e-8) below, 20 above (also per token before the sum)
VESPO_LOG_W_MIN = math.log(1e-8)
VESPO_LOG_W_MAX = 20.0


def vespo_weight(log_ratio, adv, m, k_pos, lambda_pos, k_neg, lambda_neg):
    """VESPO's Gamma-kernel weight (Shen et al. 2026, :cite:`shen2026vespo`; TRL's ``loss_type="vespo"``).

    ``phi(w) = w^k exp(lambda (1 - w))`` (so ``phi(1) = 1``), with ``w = exp(sum_t clip(new_t - old_t, -20, 20))``
    the sequence probability ratio (a *sum* of token log-ratios, not GSPO's mean), ``log w`` clipped to
    ``[log 1e-8, 20]``, and ``(k, lambda) = (k_pos, lambda_pos)`` where ``A >= 0``, else the ``_neg`` pair
    (``lambda`` floored at float32(1e-4)). The loss is ``-sg(phi) A log pi``: the weight is detached. TRL builds
    ``k`` and ``lambda`` with ``torch.where`` from Python floats, i.e. in float32; the caller passes those values.
    Shape (B, 1), or (B, T) for (B, T) advantages."""
    lr = np.clip(log_ratio, -20.0, 20.0) * m
    log_w = np.clip(lr.sum(axis=1, keepdims=True), VESPO_LOG_W_MIN, VESPO_LOG_W_MAX)
    nonneg = adv >= 0
    k = np.where(nonneg, k_pos, k_neg)
    lam = np.maximum(np.where(nonneg, lambda_pos, lambda_neg), _float32(1e-4))
    phi = np.exp(lam + k * log_w - lam * np.exp(log_w))
    return np.nan_to_num(phi, nan=0.0, posinf=0.0, neginf=0.0)


def _grpo_from_valid(
    new,
    old,
    ref,
    adv,
    m,
    *,
    eps_low,
    eps_high,
    beta,
    delta=None,
    loss_type="grpo",
    importance_sampling_level="token",
    use_bias_correction_kl=False,
    max_len=None,
    n_items=None,
    gas=1,
    spg=1,
    nproc=1,
    options=None,
) -> GRPOOutput:
    """The computation behind :func:`grpo_loss` on already validated arrays: ``new``, ``old``, ``ref`` (or None)
    and ``m`` of shape (B, T) with zeros at padding, ``adv`` (B, 1) or (B, T). ``options``: the validated
    :class:`GRPOOptions` (for the SAPO/VESPO constants; TRL's defaults when None)."""
    o = (
        GRPOOptions(
            eps_low,
            eps_high,
            beta,
            delta,
            loss_type,
            importance_sampling_level == "token",
            use_bias_correction_kl,
            gas,
            spg,
            nproc,
            max_len,
        )
        if options is None
        else options
    )
    bsz, width = new.shape
    max_len = width if max_len is None else max_len
    log_ratio = new - old
    n_tok = m.sum(axis=1, keepdims=True)  # >= 1 for every row (checked by binary_mask)
    if importance_sampling_level == "token":
        log_w = log_ratio
    else:
        log_w = (log_ratio * m).sum(axis=1, keepdims=True) / n_tok
    try:
        with np.errstate(over="raise", invalid="raise"):
            coef1 = np.exp(log_w)
            if ref is not None:
                gap = ref - new
                k3 = (np.expm1(gap) - gap) * m
    except FloatingPointError:
        raise ValueError(
            "exp overflowed: new_logps - old_logps or ref_logps - new_logps is too large "
            "at a valid position (check the log-probs)"
        ) from None

    # KL term (TRL: computed before delta caps coef1; bias correction uses the uncapped weight).
    kl_term = None
    if ref is not None:
        kl_term = k3
        if use_bias_correction_kl:
            with np.errstate(over="raise", invalid="raise"):
                try:
                    kl_term = k3 * coef1
                except FloatingPointError:
                    raise ValueError(
                        "exp overflowed: the bias-corrected KL term k3 * ratio is too large at a "
                        "valid position (check the log-probs)"
                    ) from None
        kl_term = _full(kl_term, new.shape) * m

    # Policy term. Shapes broadcast: coef (B,T) or (B,1); adv (B,1) or (B,T). d_log_w: its derivative through
    # the importance weight; d_new: its direct derivative (cispo and vespo multiply log pi by a detached weight).
    d_log_w = d_new = coef1_capped = phi = None
    if loss_type in CLIPPED_LOSS_TYPES:
        policy, d_log_w, coef1_capped = clipped_policy_term(
            coef1, adv, eps_low, eps_high, delta
        )
    elif loss_type == "cispo":
        policy, d_new = cispo_policy_term(coef1, adv, new, eps_high)
    elif loss_type == "sapo":
        policy, d_log_w = sapo_policy_term(coef1, adv, o.sapo_tau_pos, o.sapo_tau_neg)
    else:  # vespo
        phi = vespo_weight(
            log_ratio,
            adv,
            m,
            o.vespo_k_pos,
            o.vespo_lambda_pos,
            o.vespo_k_neg,
            o.vespo_lambda_neg,
        )
        policy, d_new = -phi * adv * new, -phi * adv
    per_token_loss = _full(policy, new.shape) * m
    if beta != 0:
        per_token_loss = per_token_loss + beta * kl_term

    if loss_type in ("grpo", "sapo"):
        weight = 1.0 / (bsz * n_tok * gas)
    elif loss_type == "bnpo":
        weight = 1.0 / (max(m.sum(), 1.0) * gas)
    elif loss_type == "dr_grpo":
        weight = 1.0 / (bsz * max_len * gas)
    elif loss_type == "luspo":
        weight = 1.0 / (bsz * gas)
    else:  # dapo, cispo, vespo
        n_items = float(m.sum()) if n_items is None else n_items
        weight = 1.0 / (max(n_items, 1.0) / nproc * gas / spg)
    weight = _full(weight, new.shape) * m
    loss = float((weight * per_token_loss).sum())

    # Analytic gradient d loss / d new (old and ref are fixed data).
    grad = np.zeros(new.shape)
    if d_log_w is not None:
        d_policy = _full(d_log_w, new.shape) * weight  # d loss / d log_w, per token
        if importance_sampling_level == "token":
            grad += d_policy
        else:
            grad += d_policy.sum(axis=1, keepdims=True) * m / n_tok
    if d_new is not None:
        grad += _full(d_new, new.shape) * weight
    if beta != 0:
        d_k3 = -np.expm1(gap) * m  # d k3 / d new
        if not use_bias_correction_kl:
            grad += beta * weight * d_k3
        elif importance_sampling_level == "token":
            grad += beta * weight * coef1 * (d_k3 + k3)
        else:
            grad += beta * weight * coef1 * d_k3
            grad += beta * (weight * k3 * coef1).sum(axis=1, keepdims=True) * m / n_tok
    grad = grad * m

    metrics = {}
    if beta != 0:
        metrics["kl"] = _masked_mean_over(kl_term, m)
    if loss_type in CLIPPED_LOSS_TYPES:
        metrics.update(_metrics(coef1_capped, adv, None, m, eps_low, eps_high))
    elif loss_type == "cispo":
        metrics["cispo_clip_ratio"] = _masked_mean_over(
            ((coef1 > eps_high) & (adv > 0)).astype(np.float64), m
        )
    elif loss_type == "vespo":
        metrics["vespo/phi_seq_mean"] = _masked_mean_over(phi, m)

    return GRPOOutput(
        loss=loss,
        ratio=_full(coef1, new.shape) * m + (1 - m),
        per_token_kl=kl_term,
        per_token_loss=per_token_loss,
        grad=grad,
        metrics=metrics,
    )


def _delta_cap(delta):
    delta = v.scalar(delta, "delta", allow_none=True)
    if delta is not None and delta <= 1.0:
        raise ValueError(f"delta must be > 1 (it caps ratios above 1), got {delta}")
    return delta


def clipped_objective(ratio, advantage, epsilon=0.2, epsilon_high=None, delta=None):
    """Per-token PPO/GRPO objective ``min(rho A, clip(rho, 1-eps_low, 1+eps_high) A)`` (to maximise), elementwise."""
    rho, a = _ratio_advantage(ratio, advantage)
    eps_low, eps_high = _clip_bounds(epsilon, epsilon_high)
    delta = _delta_cap(delta)
    capped = rho if delta is None else np.minimum(rho, delta)
    return np.minimum(capped * a, np.clip(rho, 1 - eps_low, 1 + eps_high) * a)


def clipped_objective_grad(
    ratio, advantage, epsilon=0.2, epsilon_high=None, delta=None
):
    """d/d rho of :func:`clipped_objective`: ``A`` where the unclipped branch is active, 0 on the flat platforms."""
    rho, a = _ratio_advantage(ratio, advantage)
    eps_low, eps_high = _clip_bounds(epsilon, epsilon_high)
    delta = _delta_cap(delta)
    platform = ((a > 0) & (rho > 1 + eps_high)) | ((a < 0) & (rho < 1 - eps_low))
    capped = (
        np.zeros(np.broadcast(rho, a).shape, dtype=bool)
        if delta is None
        else (rho > delta)
    )
    return np.where(platform | capped, 0.0, a * np.ones_like(rho))


def clip_region(ratio, advantage, epsilon=0.2, epsilon_high=None):
    """Label each (ratio, advantage): ``"platform"`` (clipped: gradient 0), ``"wrong_direction"`` (outside the
    interval on the harmful side: not clipped, still penalised) or ``"inside"``."""
    rho, a = _ratio_advantage(ratio, advantage)
    eps_low, eps_high = _clip_bounds(epsilon, epsilon_high)
    platform = ((a > 0) & (rho > 1 + eps_high)) | ((a < 0) & (rho < 1 - eps_low))
    wrong = ((a < 0) & (rho > 1 + eps_high)) | ((a > 0) & (rho < 1 - eps_low))
    return np.where(platform, "platform", np.where(wrong, "wrong_direction", "inside"))
