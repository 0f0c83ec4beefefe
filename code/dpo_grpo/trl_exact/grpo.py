"""The GRPO per-token clipped objective with a k3 KL penalty, with TRL 1.16.0's options
and an analytic gradient.

Shapes: ``new_logps``, ``old_logps``, ``ref_logps``, ``mask``: ``(B, T)`` per-token
log-probs of the sampled completion tokens; ``advantages``: ``(B,)`` (one per
completion, broadcast over its tokens) or ``(B, T)``. Per token:
``rho = exp(new - old)``,
``l = -min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A) + beta k3``,
``k3 = exp(ref - new) - (ref - new) - 1``; ``loss_type`` decides how the masked ``l``
are averaged. TRL 1.16.0's four newer loss types replace the clipped surrogate:
``cispo`` (a capped, detached weight on ``log pi``), ``sapo`` (a sigmoid gate on the
ratio), ``luspo`` (the clipped surrogate, summed per sequence) and ``vespo`` (a detached
Gamma-kernel weight of the sequence ratio on ``log pi``); see :func:`grpo_loss`.

The options are one :class:`GRPOOptions` (TRL's names and the article's defaults),
checked once by :meth:`GRPOOptions.checked` and passed whole to the computation; the
torch loss (:func:`dpo_grpo.torch_ops.grpo_loss`) takes the same options. Each dispatch
on ``loss_type`` (policy term, :data:`NORMALISER`, metrics) names every case and raises
on any other (:func:`unimplemented`). The per-token clipped objective itself
(``clipped_objective``, ``clipped_objective_grad``, ``clip_region``) lives in the
readable layer, :mod:`dpo_grpo.reference.grpo`.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from typing import NamedTuple

import numpy as np

from .. import _validation as v
from ..reference.grpo import clip_bounds

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo")
#: loss types whose policy term is TRL's clipped surrogate (they log the clip_ratio/*
#: metrics)
CLIPPED_LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo")
#: How each loss type divides ``sum(mask * l)`` (TRL's ``_compute_loss``), before the
#: division by ``gradient_accumulation_steps``: ``sequence_mean``, each sequence's token
#: mean, then the batch mean; ``batch_tokens``, the batch's valid tokens;
#: ``max_length``, ``B * max_completion_length``; ``sequence_sum``, each sequence's sum,
#: then the batch mean; ``generation_tokens``, ``num_items_in_batch / num_processes``
#: (valid tokens of the whole generation batch) over ``steps_per_generation``.
NORMALISER = {
    "grpo": "sequence_mean",
    "sapo": "sequence_mean",
    "bnpo": "batch_tokens",
    "dr_grpo": "max_length",
    "luspo": "sequence_sum",
    "dapo": "generation_tokens",
    "cispo": "generation_tokens",
    "vespo": "generation_tokens",
}
IMPORTANCE_SAMPLING_LEVELS = ("token", "sequence")
CLIP_METRICS = (
    "clip_ratio/low_mean",
    "clip_ratio/high_mean",
    "clip_ratio/region_mean",
    "clip_ratio/low_min",
    "clip_ratio/high_max",
)


class GRPOOutput(NamedTuple):
    """Result of :func:`grpo_loss` (NumPy) and of :func:`dpo_grpo.torch_ops.grpo_loss`
    (tensors, ``grad=None``: autograd computes it). The first three fields are
    ``loss, ratio, per_token_kl``."""

    loss: float
    #: importance weight per token (B, T): exp(new - old), or the GSPO sequence weight
    #: broadcast
    ratio: np.ndarray
    #: k3 per token (B, T) as used in the loss (x ratio with bias correction); None
    #: without ref
    per_token_kl: np.ndarray | None
    #: clipped surrogate + beta * KL per token (B, T), zero on padding
    per_token_loss: np.ndarray
    #: d loss / d new_logps (B, T), exactly zero on padding; None from torch_ops
    grad: np.ndarray | None
    metrics: dict  #: TRL's names: clip_ratio/* and (when beta != 0) kl


class GRPOOptions(NamedTuple):
    """TRL 1.16.0's GRPO loss options, by TRL's names, with the article's defaults
    (TRL's own: ``beta=0``, ``loss_type="dapo"``, ``use_bias_correction_kl=True``).
    The one list of the options: :func:`grpo_loss` and
    :func:`dpo_grpo.torch_ops.grpo_loss` take them as keywords; :meth:`checked` checks
    them."""

    epsilon: float = 0.2
    beta: float = 0.04
    loss_type: str = "grpo"
    importance_sampling_level: str = "token"
    epsilon_high: float | None = None  #: None: ``epsilon``, as in TRL
    delta: float | None = None
    use_bias_correction_kl: bool = False
    max_completion_length: int | None = None  #: None: the mask's width
    gradient_accumulation_steps: int = 1
    steps_per_generation: int = 1
    num_processes: int = 1
    sapo_temperature_pos: float = 1.0
    sapo_temperature_neg: float = 1.05
    vespo_k_pos: float = 2.0
    vespo_lambda_pos: float = 3.0
    vespo_k_neg: float = 3.0
    vespo_lambda_neg: float = 2.0

    def checked(self, width: int) -> GRPOOptions:
        """The options checked (as TRL's ``GRPOConfig.__post_init__`` and
        ``GRPOTrainer.__init__`` check them; ``width`` = the mask's T), with what TRL
        fills in: ``epsilon_high`` (None: ``epsilon``, also for ``cispo``, where it is
        the absolute cap ``eps_max`` on the ratio), ``max_completion_length`` (None:
        ``width``), and SAPO's and VESPO's constants rounded to float32, the values TRL
        computes with (it builds them with ``torch.where`` from Python floats). The one
        place options are checked; the loss bodies trust them."""
        eps_low, eps_high, delta = clip_bounds(
            self.epsilon, self.epsilon_high, self.delta
        )
        v.choice(self.loss_type, "loss_type", LOSS_TYPES)
        v.choice(
            self.importance_sampling_level,
            "importance_sampling_level",
            IMPORTANCE_SAMPLING_LEVELS,
        )
        max_len = self.max_completion_length
        if max_len is None:
            max_len = width
        else:
            max_len = v.integer(max_len, "max_completion_length", minimum=1)
            if max_len < width:
                raise ValueError(
                    f"max_completion_length ({max_len}) must be >= the mask's width "
                    f"({width})"
                )
        counts = {
            name: v.integer(getattr(self, name), name, minimum=1)
            for name in (
                "gradient_accumulation_steps",
                "steps_per_generation",
                "num_processes",
            )
        }
        # TRL accepts any float for VESPO's k and lambda (its weight floors lambda at
        # float32(1e-4)): so do we; SAPO's temperatures must be > 0
        float32 = {
            name: _float32(
                v.scalar(getattr(self, name), name, positive=name.startswith("sapo"))
            )
            for name in self._fields
            if name.startswith(("sapo_", "vespo_"))
        }
        checked = dict(
            epsilon=eps_low,
            epsilon_high=eps_high,
            delta=delta,
            beta=v.scalar(self.beta, "beta", nonnegative=True),
            use_bias_correction_kl=v.boolean(
                self.use_bias_correction_kl, "use_bias_correction_kl"
            ),
            max_completion_length=max_len,
            **counts,
            **float32,
        )
        # a new tuple rather than _replace: torch.compile traces this (no graph break)
        return GRPOOptions(**{**self._asdict(), **checked})


def takes_grpo_options(fn):
    """Give ``fn`` (a loss taking ``**options``) a signature that lists every field of
    :class:`GRPOOptions` with its default, as keywords: ``help(grpo_loss)`` and
    ``inspect.signature`` show the options one by one."""
    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values() if p.kind != p.VAR_KEYWORD]
    params += [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
        for name, default in GRPOOptions._field_defaults.items()
    ]
    fn.__signature__ = sig.replace(parameters=params)
    return fn


def _float32(x) -> float:
    """``x`` rounded to float32 and back: the value TRL computes with when it builds a
    constant tensor with ``torch.where(cond, x_pos, x_neg)`` from Python floats (the
    default dtype, float32)."""
    return float(np.float32(x))


@takes_grpo_options
def grpo_loss(
    new_logps,
    old_logps,
    ref_logps,
    advantages,
    mask,
    *,
    num_items_in_batch=None,
    **options,
) -> GRPOOutput:
    """GRPO loss exactly as TRL 1.16.0's ``GRPOTrainer._compute_loss`` computes it, for
    its eight loss types. ``options``: the fields of :class:`GRPOOptions`, by name.

    Policy term per token, with ``rho`` the importance weight (token ratio
    ``exp(new - old)``, or with ``importance_sampling_level="sequence"`` (GSPO)
    ``exp(masked mean of new - old)``, the geometric mean of the sequence's token
    ratios) and ``A`` the advantage:

    - ``grpo``, ``bnpo``, ``dr_grpo``, ``dapo``, ``luspo``:
      ``-min(min(rho, delta) A, clip(rho, 1 - eps_low, 1 + eps_high) A)`` (``delta``
      caps the unclipped branch; two-sided clipping);
    - ``cispo``, ``sapo``, ``vespo``: see :func:`cispo_policy_term`,
      :func:`sapo_policy_term`, :func:`vespo_weight`.

    Normalisation of ``sum(l * mask)`` by ``loss_type`` (:data:`NORMALISER`; each also
    divided by ``gradient_accumulation_steps``): ``grpo`` and ``sapo`` per-sequence
    token mean, then batch mean (DeepSeekMath's 1/G sum 1/|y_i|); ``bnpo`` by the
    number of valid tokens; ``dr_grpo`` by ``B * max_completion_length``; ``luspo``
    per-sequence *sum*, then batch mean (each GSPO sequence loss scaled by its length);
    ``dapo``, ``cispo`` and ``vespo`` by ``num_items_in_batch / num_processes *
    gradient_accumulation_steps / steps_per_generation`` instead (valid tokens of the
    whole generation batch).

    ``use_bias_correction_kl`` multiplies k3 by the (differentiable, uncapped)
    importance weight, for every loss type. TRL warns (and we follow it silently) when
    ``luspo`` runs at token level or ``vespo`` at sequence level; ``vespo`` builds its
    own sequence weight from the token log-ratios, so ``importance_sampling_level`` then
    only changes the bias-corrected KL. Metrics: ``kl`` (when ``beta != 0``); the five
    ``clip_ratio/*`` for the clipped types; ``cispo_clip_ratio`` for ``cispo``;
    ``vespo/phi_seq_mean`` for ``vespo``; none else (as TRL logs them).
    """
    new = v.as_float_array(new_logps, "new_logps", ndim=2, finite=False)
    o = GRPOOptions(**options).checked(new.shape[1])
    n_items = v.scalar(
        num_items_in_batch, "num_items_in_batch", positive=True, allow_none=True
    )
    arrays = checked_batch(new, old_logps, ref_logps, advantages, mask, o.beta)
    return grpo_loss_from_options(*arrays, o, n_items)


def checked_batch(new, old_logps, ref_logps, advantages, mask, beta):
    """The arrays of :func:`grpo_loss`, checked (``new`` already a float array):
    ``(new, old, ref, adv, m)`` in float64, log-probs and ``m`` (the 0/1 mask) (B, T)
    with padding set to 0 (so it never reaches an exp), ``ref`` None when ``beta == 0``
    allows it, ``adv`` (B, 1) or (B, T)."""
    old = v.as_float_array(old_logps, "old_logps", ndim=2, finite=False)
    v.same_shape(new_logps=new, old_logps=old)
    active = v.binary_mask(mask, "mask", new.shape)
    bsz, width = new.shape
    if ref_logps is None:
        if beta != 0:
            raise ValueError(
                "ref_logps may be None only when beta == 0 (the KL term needs the "
                "reference)"
            )
        ref = None
    else:
        ref = v.as_float_array(ref_logps, "ref_logps", ndim=2, finite=False)
        v.same_shape(new_logps=new, ref_logps=ref)
    adv = v.as_float_array(advantages, "advantages", ndim=(1, 2), finite=False)
    if adv.shape not in ((bsz,), (bsz, width)):
        raise ValueError(
            f"advantages must have shape ({bsz},) or ({bsz}, {width}), got {adv.shape}"
        )
    if adv.ndim == 1:
        if not np.isfinite(adv).all():
            raise ValueError("advantages must be finite")
        adv = adv[:, None]
    else:
        adv = _valid_values(adv, "advantages", active)
    new = _valid_values(new, "new_logps", active)
    old = _valid_values(old, "old_logps", active)
    if ref is not None:
        ref = _valid_values(ref, "ref_logps", active)
    return new, old, ref, adv, active.astype(np.float64)


def _valid_values(x, name, active):
    if not np.isfinite(x[active]).all():
        raise ValueError(f"{name} must be finite at every valid (mask == 1) position")
    # mask *before* any exp, so NaN/inf padding cannot leak
    return np.where(active, x, 0.0)


def grpo_loss_from_options(
    new, old, ref, adv, m, o: GRPOOptions, n_items=None
) -> GRPOOutput:
    """The computation of :func:`grpo_loss`, in the order of TRL's ``_compute_loss``:
    importance weight, KL, policy term, normaliser, metrics (then the gradient, which
    TRL leaves to autograd).

    Takes :func:`checked_batch`'s arrays, the options of :meth:`GRPOOptions.checked` and
    ``n_items`` (TRL's ``num_items_in_batch``; None: the batch's valid tokens).
    """
    shape = new.shape
    n_tok = m.sum(axis=1, keepdims=True)  # >= 1 for every row (checked by binary_mask)

    # importance weight: per token, or GSPO's geometric mean over the sequence (B, 1)
    log_ratio = new - old
    token_level = o.importance_sampling_level == "token"
    if token_level:
        log_w = log_ratio
    else:
        log_w = (log_ratio * m).sum(axis=1, keepdims=True) / n_tok
    with _exp_overflow(_LOG_GAPS):
        coef1 = np.exp(log_w)

    # KL term (before delta caps coef1; bias correction uses the uncapped weight)
    kl_term = gap = k3 = None
    if ref is not None:
        gap = ref - new
        with _exp_overflow(_LOG_GAPS):
            k3 = (np.expm1(gap) - gap) * m
        kl_term = k3
        if o.use_bias_correction_kl:
            with _exp_overflow("the bias-corrected KL term k3 * ratio"):
                kl_term = k3 * coef1
        kl_term = _full(kl_term, shape) * m

    # policy term and the metrics TRL logs for it; d_log_w: its derivative through the
    # importance weight; d_new: its direct derivative (cispo and vespo multiply log pi
    # by a detached weight). Shapes broadcast: coef (B,T) or (B,1); adv (B,1) or (B,T).
    metrics = {} if o.beta == 0 else {"kl": _masked_mean_over(kl_term, m)}
    d_log_w = d_new = None
    if o.loss_type in CLIPPED_LOSS_TYPES:
        policy, d_log_w, coef1_capped = clipped_policy_term(
            coef1, adv, o.epsilon, o.epsilon_high, o.delta
        )
        metrics.update(_clip_metrics(coef1_capped, adv, m, o.epsilon, o.epsilon_high))
    elif o.loss_type == "cispo":
        policy, d_new = cispo_policy_term(coef1, adv, new, o.epsilon_high)
        is_clipped = (coef1 > o.epsilon_high) & (adv > 0)
        metrics["cispo_clip_ratio"] = _masked_mean_over(is_clipped.astype(float), m)
    elif o.loss_type == "sapo":
        policy, d_log_w = sapo_policy_term(
            coef1, adv, o.sapo_temperature_pos, o.sapo_temperature_neg
        )
    elif o.loss_type == "vespo":
        phi = vespo_weight(log_ratio, adv, m, o)
        policy, d_new = -phi * adv * new, -phi * adv
        metrics["vespo/phi_seq_mean"] = _masked_mean_over(phi, m)
    else:
        raise unimplemented(o.loss_type, "policy term")
    per_token_loss = _full(policy, shape) * m
    if o.beta != 0:
        per_token_loss = per_token_loss + o.beta * kl_term

    # normaliser: loss = sum(weight * per_token_loss)
    weight = token_weight(o, m, n_items)
    loss = float((weight * per_token_loss).sum())

    # analytic gradient d loss / d new (old and ref are fixed data)
    grad = np.zeros(shape)
    if d_log_w is not None:
        d_policy = _full(d_log_w, shape) * weight  # d loss / d log_w, per token
        if token_level:
            grad += d_policy
        else:
            grad += d_policy.sum(axis=1, keepdims=True) * m / n_tok
    if d_new is not None:
        grad += _full(d_new, shape) * weight
    if o.beta != 0:
        d_k3 = -np.expm1(gap) * m  # d k3 / d new
        if not o.use_bias_correction_kl:
            grad += o.beta * weight * d_k3
        elif token_level:
            grad += o.beta * weight * coef1 * (d_k3 + k3)
        else:
            grad += o.beta * weight * coef1 * d_k3
            grad += (
                o.beta * (weight * k3 * coef1).sum(axis=1, keepdims=True) * m / n_tok
            )
    grad = grad * m

    return GRPOOutput(
        loss=loss,
        ratio=_full(coef1, shape) * m + (1 - m),
        per_token_kl=kl_term,
        per_token_loss=per_token_loss,
        grad=grad,
        metrics=metrics,
    )


_LOG_GAPS = "new_logps - old_logps or ref_logps - new_logps"


@contextlib.contextmanager
def _exp_overflow(what):
    """Turn NumPy's overflow in an ``exp`` into a ValueError naming ``what``
    overflowed."""
    try:
        with np.errstate(over="raise", invalid="raise"):
            yield
    except FloatingPointError:
        raise ValueError(
            f"exp overflowed: {what} is too large at a valid position (check the "
            "log-probs)"
        ) from None


def token_weight(o: GRPOOptions, m, n_items=None):
    """TRL's normaliser (:data:`NORMALISER`) as a per-token weight (B, T), 0 on padding:
    ``loss = sum(weight * per_token_loss)``; ``n_items``: ``num_items_in_batch`` (None:
    the batch's valid tokens)."""
    bsz, steps = m.shape[0], o.gradient_accumulation_steps
    normaliser = NORMALISER.get(o.loss_type)
    if normaliser == "sequence_mean":
        weight = 1.0 / (bsz * m.sum(axis=1, keepdims=True) * steps)
    elif normaliser == "batch_tokens":
        weight = 1.0 / (max(m.sum(), 1.0) * steps)
    elif normaliser == "max_length":
        weight = 1.0 / (bsz * o.max_completion_length * steps)
    elif normaliser == "sequence_sum":
        weight = 1.0 / (bsz * steps)
    elif normaliser == "generation_tokens":
        n_items = float(m.sum()) if n_items is None else n_items
        items_per_process = max(n_items, 1.0) / o.num_processes
        weight = 1.0 / (items_per_process * steps / o.steps_per_generation)
    else:
        raise unimplemented(o.loss_type, "normaliser")
    return _full(weight, m.shape) * m


def unimplemented(loss_type: str, part: str) -> ValueError:
    """The error of a dispatch that meets a ``loss_type`` it has no case for (a name
    added to :data:`LOSS_TYPES` without its implementation), as TRL's raises."""
    return ValueError(f"loss_type {loss_type!r} has no {part} in this implementation")


def _masked_mean_over(x, m):
    """TRL's ``global_masked_mean``: per-sequence values (B, 1) count once each; (B, T)
    values are token-masked."""
    if x.shape[1] == 1:
        return float(x.mean())
    return float((x * m).sum() / max(m.sum(), 1.0))


def _per_sequence(x, m):
    if x.shape[1] == 1:
        return x[:, 0]
    return (x * m).sum(axis=1) / m.sum(axis=1)


def _clip_metrics(coef1_capped, adv, m, eps_low, eps_high) -> dict:
    """TRL's five ``clip_ratio/*`` statistics of the (delta-capped) importance
    weight."""
    is_low = ((coef1_capped < 1 - eps_low) & (adv < 0)).astype(np.float64)
    is_high = ((coef1_capped > 1 + eps_high) & (adv > 0)).astype(np.float64)
    is_region = np.maximum(is_low, is_high)
    return {
        "clip_ratio/low_mean": _masked_mean_over(is_low, m),
        "clip_ratio/high_mean": _masked_mean_over(is_high, m),
        "clip_ratio/region_mean": _masked_mean_over(is_region, m),
        "clip_ratio/low_min": float(_per_sequence(is_low, m).min()),
        "clip_ratio/high_max": float(_per_sequence(is_high, m).max()),
    }


def _full(x, shape):
    """``x`` broadcast to ``shape`` (a read-only view; ``x`` itself when it already has
    that shape)."""
    return x if np.shape(x) == shape else np.broadcast_to(x, shape)


def _sigmoid(x):
    return np.exp(-np.logaddexp(0.0, -x))


def clipped_policy_term(coef1, adv, eps_low, eps_high, delta=None):
    """TRL's clipped surrogate
    ``-min(min(rho, delta) A, clip(rho, 1 - eps_low, 1 + eps_high) A)`` and its
    derivative with respect to ``log rho``; also returns ``min(rho, delta)`` (what TRL's
    clip metrics read). PPO's objective (Schulman et al. 2017, :cite:`schulman2017ppo`)
    as GRPO uses it; ``delta`` from INTELLECT-2."""
    coef2 = np.clip(coef1, 1 - eps_low, 1 + eps_high)
    coef1_capped = coef1 if delta is None else np.minimum(coef1, delta)
    l1, l2 = coef1_capped * adv, coef2 * adv
    policy = -np.minimum(l1, l2)
    # torch.min/clamp semantics: clamp passes the gradient on its closed interval; a tie
    # in min sends half the gradient to each branch.
    d_capped = coef1 if delta is None else coef1 * (coef1 <= delta)
    d_coef2 = coef1 * ((coef1 >= 1 - eps_low) & (coef1 <= 1 + eps_high))
    d_log_w = np.where(
        l1 < l2,
        -adv * d_capped,
        np.where(l1 > l2, -adv * d_coef2, -0.5 * adv * (d_capped + d_coef2)),
    )
    return policy, d_log_w, coef1_capped


def cispo_policy_term(coef1, adv, new, eps_max):
    """CISPO (MiniMax-M1, :cite:`minimax2025m1`; TRL's ``loss_type="cispo"``):
    ``-sg(min(rho, eps_max)) A log pi``.

    The importance weight is capped from above at ``eps_max`` (TRL's ``epsilon_high``,
    which falls back to ``epsilon`` when unset: then every weight above 0.2 is cut to
    0.2) and detached (``sg``), so every token keeps a gradient ``-min(rho, eps_max) A``
    on its log-prob, however far the ratio is from 1. Returns the per-token term and its
    derivative with respect to ``new`` (direct, not through ``rho``)."""
    capped = np.minimum(coef1, eps_max)
    return -capped * adv * new, -capped * adv


def sapo_policy_term(coef1, adv, tau_pos, tau_neg):
    """SAPO (Gao et al. 2025, :cite:`gao2025sapo`; TRL's ``loss_type="sapo"``):
    ``-(4 / tau) sigmoid(tau (rho - 1)) A``.

    A smooth gate in place of the clip: its slope in ``rho`` is ``4 s (1 - s)`` with
    ``s = sigmoid(tau (rho - 1))``, 1 at ``rho = 1`` and decaying on both sides.
    ``tau = tau_pos`` where ``A > 0``, else ``tau_neg``; TRL builds the ``tau`` tensor
    from Python floats with ``torch.where``, so it holds float32 values (1.05 becomes
    1.0499999523...), which the caller passes (:meth:`GRPOOptions.checked` rounds
    them).
    Returns the per-token term and its derivative with respect to ``log rho``."""
    tau = np.where(adv > 0, tau_pos, tau_neg)
    s = _sigmoid(tau * (coef1 - 1))
    return -(s * 4 / tau) * adv, -adv * 4 * s * (1 - s) * coef1


#: VESPO's bounds on log w, as in TRL 1.16.0: log(1e-8) below, 20 above (also per token
#: before the sum)
VESPO_LOG_W_MIN = math.log(1e-8)
VESPO_LOG_W_MAX = 20.0


def vespo_weight(log_ratio, adv, m, o: GRPOOptions):
    """VESPO's Gamma-kernel weight (Shen et al. 2026, :cite:`shen2026vespo`; TRL's
    ``loss_type="vespo"``).

    ``phi(w) = w^k exp(lambda (1 - w))`` (so ``phi(1) = 1``), with
    ``w = exp(sum_t clip(new_t - old_t, -20, 20))`` the sequence probability ratio (a
    *sum* of token log-ratios, not GSPO's mean), ``log w`` clipped to
    ``[log 1e-8, 20]``, and ``(k, lambda) = (k_pos, lambda_pos)`` where ``A >= 0``, else
    the ``_neg`` pair (``lambda`` floored at float32(1e-4); ``o``'s ``vespo_*`` options,
    in float32 as TRL builds them). The loss is ``-sg(phi) A log pi``: the weight is
    detached.
    Shape (B, 1), or (B, T) for (B, T) advantages."""
    lr = np.clip(log_ratio, -20.0, 20.0) * m
    log_w = np.clip(lr.sum(axis=1, keepdims=True), VESPO_LOG_W_MIN, VESPO_LOG_W_MAX)
    nonneg = adv >= 0
    k = np.where(nonneg, o.vespo_k_pos, o.vespo_k_neg)
    lam = np.maximum(
        np.where(nonneg, o.vespo_lambda_pos, o.vespo_lambda_neg), _float32(1e-4)
    )
    phi = np.exp(lam + k * log_w - lam * np.exp(log_w))
    return np.nan_to_num(phi, nan=0.0, posinf=0.0, neginf=0.0)
