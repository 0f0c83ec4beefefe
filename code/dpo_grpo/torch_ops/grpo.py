"""GRPO in PyTorch exactly as TRL 1.16.0's ``GRPOTrainer._compute_loss``, every option,
with autograd.

Same names, arguments and semantics as :func:`dpo_grpo.trl_exact.grpo.grpo_loss` (tested
equal), on tensors of any device and floating dtype. :func:`grpo_loss` checks its
arguments in one call (:func:`_checked_batch`), then runs the fused kernel
(:mod:`dpo_grpo.torch_ops.grpo_kernel`, clipped loss types) or the loss as TRL writes
it, differentiated by autograd (:func:`_grpo_autograd`).

Conventions (shared by :mod:`dpo_grpo.torch_ops`):

- Argument checks that only look at shapes, dtypes and options always run and never
  synchronise with the device. Checks that must look at values (mask is 0/1, no empty
  row, finite log-probs at valid positions, no overflow) run when ``validate=True`` (the
  default) with a single host-device synchronisation; pass ``validate=False`` in a
  training loop's hot path.
- Half-precision inputs (bfloat16, float16) are computed in float32, and the results
  (loss, per-token tensors, metrics) are float32; gradients have the dtype of the tensor
  they belong to.
- Padding positions (``mask == 0``) may hold any garbage, NaN and inf included: they are
  replaced by 0 before any ``exp`` (``torch.where`` semantics, computed as a bitwise
  select on the fused path), and their gradient is exactly zero.
- Tolerances against the float64 NumPy reference on the same (rounded) inputs, as
  tested: float64 1e-12; float32 loss rtol 1e-5, gradient rtol 1e-5 (+ 1e-5 x
  max|grad|); bfloat16 inputs are computed in float32, so the loss keeps rtol 1e-5,
  while the gradient, stored in bfloat16, is within 2**-7 relative.
- Every function traces without graph breaks under
  ``torch.compile(..., fullgraph=True)`` (with ``validate=False``).
  ``grpo_loss(..., compile=True)`` does it for you: its tensor code becomes one
  generated kernel that reads each input once (measured speed-ups in
  ``bench/README.md``); ``per_token=False`` skips the per-token outputs a training step
  does not need.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch

from .. import _validation as v
from ..trl_exact.grpo import (
    CLIPPED_LOSS_TYPES,
    VESPO_LOG_W_MAX,
    VESPO_LOG_W_MIN,
    GRPOOptions,
    GRPOOutput,
    grpo_options,
    unimplemented,
)
from .grpo_kernel import fused_grpo_loss, maybe_compiled, token_weight
from .tensors import (
    DeferredChecks,
    checked_tensor,
    compute_dtype,
    same_shape,
    scalar_like,
)

__all__ = ["grpo_loss", "GRPOOutput"]


# typed: True is not 1
_cached_grpo_options = functools.lru_cache(maxsize=256, typed=True)(grpo_options)


def _grpo_options(*args, **kwargs):
    """:func:`dpo_grpo.trl_exact.grpo.grpo_options` (the one option parser, shared with
    the NumPy loss), memoised: a training loop passes the same options at every step.
    Unhashable arguments go to the parser, which explains them."""
    if (
        torch.compiler.is_compiling()
    ):  # dynamo traces the parser itself (and constant-folds it), not the cache
        return grpo_options(*args, **kwargs)
    try:
        return _cached_grpo_options(*args, **kwargs)
    except TypeError as exc:
        if "unhashable" not in str(exc):
            raise
        return grpo_options(*args, **kwargs)


def _clip_metrics(metrics, c1, a, act, n_b, n_all, o: GRPOOptions):
    """TRL's clip_ratio/* metrics from the uncapped weight ``c1`` ((B,T) or (B,1)) and
    advantages ``a``.

    ``is_low = (min(c1, delta) < 1 - eps_low) & (a < 0)`` equals ``c1 < L`` with
    ``L = 1 - eps_low`` where a < 0 (else 0, never exceeded as c1 > 0);
    ``is_high = (min(c1, delta) > 1 + eps_high) & (a > 0)`` equals ``c1 > U`` with
    ``U = 1 + eps_high`` where a > 0 and delta > 1 + eps_high (else inf). Padding never
    counts: there the token weight is exp(0) = 1, inside the interval, and the (B, T)
    advantages are 0.
    """
    lo, hi = 1.0 - o.eps_low, 1.0 + o.eps_high
    is_low = c1 < torch.where(a < 0, lo, scalar_like(0.0, c1))
    if o.delta is None or o.delta > hi:
        is_high = c1 > torch.where(a > 0, hi, scalar_like(math.inf, c1))
    else:
        is_high = torch.zeros(
            torch.broadcast_shapes(c1.shape, a.shape),
            dtype=torch.bool,
            device=c1.device,
        )
    if is_low.shape[1] == 1:  # one value per sequence (GSPO with (B,) advantages)
        low_seq, high_seq = is_low[:, 0].to(c1.dtype), is_high[:, 0].to(c1.dtype)
        low_mean, high_mean = low_seq.mean(), high_seq.mean()
    else:
        low_cnt, high_cnt = (
            is_low.sum(1, dtype=c1.dtype),
            is_high.sum(1, dtype=c1.dtype),
        )
        low_seq, high_seq = low_cnt / n_b, high_cnt / n_b
        low_mean, high_mean = low_cnt.sum() / n_all, high_cnt.sum() / n_all
    metrics["clip_ratio/low_mean"] = low_mean
    metrics["clip_ratio/high_mean"] = high_mean
    # a token is low- or high-clipped, never both
    metrics["clip_ratio/region_mean"] = low_mean + high_mean
    metrics["clip_ratio/low_min"] = low_seq.min()
    metrics["clip_ratio/high_max"] = high_seq.max()


def _vespo_weight(log_ratio, a, m, o: GRPOOptions):
    """VESPO's detached Gamma weight ``phi = w^k exp(lambda (1 - w))`` of the clamped
    sequence ratio ``w`` (see :func:`dpo_grpo.trl_exact.grpo.vespo_weight`; ``k``,
    ``lambda`` are TRL's float32 values)."""
    with torch.no_grad():
        log_w = (
            (log_ratio.clamp(-20.0, 20.0) * m)
            .sum(1, keepdim=True)
            .clamp(VESPO_LOG_W_MIN, VESPO_LOG_W_MAX)
        )
        nonneg = a >= 0
        k = torch.where(nonneg, o.vespo_k_pos, o.vespo_k_neg).to(log_w.dtype)
        lam = (
            torch.where(nonneg, o.vespo_lambda_pos, o.vespo_lambda_neg)
            .to(log_w.dtype)
            .clamp(min=float(torch.tensor(1e-4)))
        )
        phi = torch.exp(lam + k * log_w - lam * torch.exp(log_w))
        return phi.nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)


def _masked_mean(x, act, n_all):
    """TRL's ``global_masked_mean`` (one process): (B, 1) values count once per
    sequence, (B, T) ones per token."""
    if x.shape[1] == 1:
        return x.mean()
    return torch.where(act, x, 0).sum() / n_all


def _grpo_autograd(new, old, ref, a, act, n_b, n_all, n_items, o: GRPOOptions):
    """The same loss written as TRL writes it, differentiated by autograd (w.r.t. new,
    ref and advantages).

    Also returns the loss type's extra metric tensor: the VESPO weight ``phi`` (or
    None)."""
    bsz = new.shape[0]
    zero = scalar_like(0.0, new)
    m = act.to(new.dtype)
    new = torch.where(act, new, zero)
    log_ratio = new - torch.where(act, old, zero)
    if o.token_level:
        log_w = log_ratio
    else:
        log_w = (log_ratio * m).sum(1, keepdim=True) / n_b[:, None]
    c1 = torch.exp(log_w)
    kl_term = None
    if ref is not None:
        gap = torch.where(act, ref, zero) - new
        k3 = torch.expm1(gap) - gap
        kl_term = (k3 * c1 if o.bias_kl else k3) * m
    phi = None
    if o.loss_type in CLIPPED_LOSS_TYPES:
        c2 = torch.clamp(c1, 1 - o.eps_low, 1 + o.eps_high)
        c1_capped = c1 if o.delta is None else torch.clamp(c1, max=o.delta)
        policy = -torch.min(c1_capped * a, c2 * a)
    elif o.loss_type == "cispo":  # -sg(min(rho, eps_max)) A log pi
        policy = -torch.clamp(c1, max=o.eps_high).detach() * a * new
    elif (
        o.loss_type == "sapo"
    ):  # -(4 / tau) sigmoid(tau (rho - 1)) A, tau in float32 as in TRL
        tau = torch.where(a > 0, o.sapo_tau_pos, o.sapo_tau_neg).to(c1.dtype)
        policy = -(torch.sigmoid(tau * (c1 - 1)) * 4 / tau) * a
    elif o.loss_type == "vespo":  # -sg(phi(w)) A log pi
        phi = _vespo_weight(log_ratio, a, m, o)
        policy = -phi * a * new
    else:
        raise unimplemented(o.loss_type, "policy term")
    per_token_loss = policy * m
    if o.beta != 0:
        per_token_loss = per_token_loss + o.beta * kl_term
    loss = (token_weight(o, n_b, n_all, n_items, bsz) * per_token_loss).sum()
    return loss, c1, kl_term, per_token_loss, phi


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
    validate=True,
    fused=None,
    compile=False,
    per_token=True,
    _block_rows=None,
) -> GRPOOutput:
    """GRPO loss exactly as TRL 1.16.0's ``GRPOTrainer._compute_loss`` (and
    :func:`dpo_grpo.trl_exact.grpo.grpo_loss`).

    Shapes: ``new_logps``, ``old_logps``, ``ref_logps``, ``mask``: (B, T);
    ``advantages``: (B,) or (B, T). Per token ``l = -min(min(rho, delta) A, clip(rho,
    1 - eps_low, 1 + eps_high) A) + beta k3`` with ``rho = exp(new - old)`` (GSPO:
    ``exp(masked mean of new - old)``) and ``k3 = exp(ref - new) - (ref - new) - 1``;
    ``loss = sum(w * mask * l)`` with the ``loss_type`` weight ``w`` of the NumPy
    version. ``old_logps`` is fixed data (detached); ``num_items_in_batch`` may be a
    number or a 0-d tensor (``dapo``, ``cispo``, ``vespo``). ``loss_type`` takes TRL's
    eight values, with the NumPy version's semantics and options (``cispo``, ``sapo``,
    ``luspo``, ``vespo``: see :func:`dpo_grpo.trl_exact.grpo.grpo_loss`). The fused
    kernel covers the clipped types (``grpo``, ``bnpo``, ``dr_grpo``, ``dapo``,
    ``luspo``); ``cispo``, ``sapo`` and ``vespo`` always run the autograd path
    (``fused=True`` falls back to it for them; ``per_token=False`` then drops the
    per-token outputs after computing them).

    ``fused`` (default: ``True`` unless ``ref_logps`` or ``advantages`` require grad)
    computes the gradient analytically in the forward pass, reusing its intermediates,
    and hands it to autograd: faster and lighter than differentiating the composite
    expression. ``fused=False`` differentiates the composite expression instead.
    ``validate=False`` skips the value checks (mask 0/1, non-empty rows, finite at valid
    positions, no overflow), which are the only part that synchronises with the device.
    ``compile=True`` runs the loss's tensor code through ``torch.compile`` (cached per
    options, dtype and device; dynamic shapes): on the fused path one generated kernel
    reads each input once and writes each output once (C++/OpenMP on CPU, Triton on
    CUDA). The first call compiles (seconds; on CPU it needs a C++ compiler); the
    numbers are those of ``compile=False`` up to float rounding. ``per_token=False``
    (fused path) returns ``ratio``, ``per_token_kl`` and ``per_token_loss`` as None
    instead of writing them: a training step needs only the loss, its gradient and the
    metrics (as TRL's ``_compute_loss`` returns), and skipping three (B, T) writes saves
    about a quarter of the loss's memory traffic.
    """
    new, old, mask = _checked_logps(new_logps, old_logps, mask)
    o = _grpo_options(
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
        new.shape[1],
        sapo_temperature_pos=sapo_temperature_pos,
        sapo_temperature_neg=sapo_temperature_neg,
        vespo_k_pos=vespo_k_pos,
        vespo_lambda_pos=vespo_lambda_pos,
        vespo_k_neg=vespo_k_neg,
        vespo_lambda_neg=vespo_lambda_neg,
    )
    x = _checked_batch(
        new, old, ref_logps, advantages, mask, num_items_in_batch, o, fused, validate
    )
    _check_flags(compile=compile, per_token=per_token)
    if not per_token and not x.fused_requested:
        raise ValueError(
            "per_token=False needs the fused path (fused=None or True, advantages and "
            "ref_logps not requiring grad)"
        )

    grad = None
    if x.fused:
        loss, grad, ratio, kl_term, per_token_loss, metrics = fused_grpo_loss(
            new,
            x.new,
            x.old,
            x.ref,
            x.a,
            mask,
            x.n_items,
            o,
            per_token,
            _block_rows,
            compile,
        )
    else:
        loss, ratio, kl_term, per_token_loss, metrics = _autograd_path(x, o, compile)
        if not per_token:
            ratio = kl_term = per_token_loss = None

    def overflow_probes():
        if ratio is not None:
            return [ratio.amax()] + (
                [] if kl_term is None else [kl_term.detach().amax()]
            )
        # per_token=False: an overflow shows as a non-finite loss, KL metric or gradient
        # (0 * inf = NaN)
        return [loss.detach(), metrics.get("kl", loss.detach())] + (
            [] if grad is None else [grad.amax()]
        )

    x.checks.add(
        lambda: torch.isfinite(torch.stack(overflow_probes())).all(),
        "exp overflowed: new_logps - old_logps or ref_logps - new_logps is too large "
        "at a valid position (check the log-probs)",
    )
    x.checks.raise_first_failure()
    return GRPOOutput(
        loss=loss,
        ratio=ratio,
        per_token_kl=kl_term,
        per_token_loss=per_token_loss,
        grad=None,
        metrics=metrics,
    )


def _autograd_path(x, o: GRPOOptions, compile: bool):
    """The loss by :func:`_grpo_autograd` and TRL's metrics:
    ``(loss, ratio, kl, per_token_loss, metrics)``."""
    # TRL clamps the token counts at 1 (empty rows add nothing) ...
    n_b = x.n_raw.clamp(min=1.0)
    # ... and the batch's, which does not count empty rows
    n_all = x.n_raw.sum().clamp(min=1.0)
    n_items = n_all if x.n_items is None else x.n_items
    loss, c1, kl_term, per_token_loss, phi = maybe_compiled(_grpo_autograd, compile)(
        x.new, x.old, x.ref, x.a, x.act, n_b, n_all, n_items, o
    )
    act, a = x.act, x.a
    with torch.no_grad():
        c1 = c1.detach()
        metrics = {}
        if o.beta != 0:
            metrics["kl"] = kl_term.detach().sum() / n_all
        if o.loss_type in CLIPPED_LOSS_TYPES:
            _clip_metrics(metrics, c1, a.detach(), act, n_b, n_all, o)
        elif o.loss_type == "cispo":
            metrics["cispo_clip_ratio"] = _masked_mean(
                ((c1 > o.eps_high) & (a > 0)).to(c1.dtype), act, n_all
            )
        elif o.loss_type == "vespo":
            metrics["vespo/phi_seq_mean"] = _masked_mean(phi, act, n_all)
        ratio = (
            c1 if c1.shape == act.shape else torch.where(act, c1, scalar_like(1.0, c1))
        )
    return loss, ratio, kl_term, per_token_loss, metrics


# --- argument checks ------------------------------------------------------------------


class _Batch(NamedTuple):
    """:func:`grpo_loss`'s tensors, checked and in the compute dtype, and its pending
    value checks."""

    new: torch.Tensor  #: (B, T) new_logps in the compute dtype (still differentiable)
    old: torch.Tensor  #: (B, T) detached
    ref: torch.Tensor | None  #: (B, T)
    a: torch.Tensor  #: (B, 1), or (B, T) with 0 on padding
    act: torch.Tensor | None  #: (B, T) bool mask (None on the fused hot path)
    #: (B,) valid tokens per row (None on the fused hot path)
    n_raw: torch.Tensor | None
    n_items: torch.Tensor | None  #: 0-d num_items_in_batch (None: the batch's tokens)
    #: ``fused`` resolved (None -> True unless ref/advantages need grad)
    fused_requested: bool
    fused: bool  #: the fused kernel runs (requested, and a clipped loss type)
    checks: DeferredChecks  #: value checks, resolved with one sync at the end


def _checked_logps(new_logps, old_logps, mask):
    """``(new, old, mask)`` as tensors of one (B, T) shape on new_logps' device (no
    sync)."""
    new = checked_tensor(new_logps, "new_logps", ndim=2)
    old = checked_tensor(old_logps, "old_logps", like=new, ndim=2)
    same_shape("new_logps", new, old_logps=old)
    if mask is None or isinstance(mask, (str, bytes, dict)):
        raise TypeError(
            f"mask must be a tensor of 0/1 values, got {type(mask).__name__}"
        )
    mask = checked_tensor(mask, "mask", like=new, ndim=2, floating=False)
    if mask.shape != new.shape:
        raise ValueError(
            f"mask must have shape {tuple(new.shape)}, got {tuple(mask.shape)}"
        )
    return new, old, mask


def _checked_batch(
    new, old, ref_logps, advantages, mask, num_items_in_batch, o, fused, validate
) -> _Batch:
    """The rest of :func:`grpo_loss`'s arguments, checked (shapes, dtypes and options
    now; values in the returned :class:`DeferredChecks`), and every tensor cast to the
    compute dtype."""
    bsz, width = new.shape
    if ref_logps is None:
        if o.beta != 0:
            raise ValueError(
                "ref_logps may be None only when beta == 0 (the KL term needs the "
                "reference)"
            )
        ref = None
    else:
        ref = checked_tensor(ref_logps, "ref_logps", like=new, ndim=2)
        same_shape("new_logps", new, ref_logps=ref)
    adv = checked_tensor(advantages, "advantages", like=new, ndim=(1, 2))
    if adv.shape not in ((bsz,), (bsz, width)):
        raise ValueError(
            f"advantages must have shape ({bsz},) or ({bsz}, {width}), got "
            f"{tuple(adv.shape)}"
        )
    if num_items_in_batch is not None and not isinstance(
        num_items_in_batch, torch.Tensor
    ):
        num_items_in_batch = v.scalar(
            num_items_in_batch, "num_items_in_batch", positive=True
        )
    elif (
        isinstance(num_items_in_batch, torch.Tensor) and num_items_in_batch.numel() != 1
    ):
        raise ValueError(
            f"num_items_in_batch must be a number or a one-element tensor, "
            f"got shape {tuple(num_items_in_batch.shape)}"
        )
    if fused is None:
        fused = not ((ref is not None and ref.requires_grad) or adv.requires_grad)
    elif not isinstance(fused, bool):
        raise TypeError(f"fused must be None or a bool, got {type(fused).__name__}")
    if not isinstance(validate, bool):
        raise TypeError(f"validate must be a bool, got {type(validate).__name__}")
    fused_requested = fused
    # the kernel implements the clipped surrogate only
    fused = fused and o.loss_type in CLIPPED_LOSS_TYPES

    cdt = compute_dtype(new.dtype)
    # the boolean mask is only needed off the fused token-level hot path (which builds
    # its masks per cache block)
    act = (
        (mask if mask.dtype == torch.bool else mask.bool())
        if (validate or adv.dim() == 2 or not fused)
        else None
    )
    # token counts: the fused path counts them in its own pass; the rest needs them
    # first
    n_raw = mask.sum(1).to(cdt) if (validate or not fused) else None
    checks = DeferredChecks(validate)
    if (
        mask.dtype != torch.bool
    ):  # m (m - 1) vanishes exactly on 0 and 1 (NaN stays NaN, hence nonzero)
        checks.add(
            lambda: torch.count_nonzero(mask * (mask - 1)) == 0,
            "mask must contain only 0 and 1",
        )
    checks.add(lambda: (n_raw > 0).all(), _empty_rows_message(act))
    if adv.dim() == 1:
        checks.add(lambda: torch.isfinite(adv).all(), "advantages must be finite")
    named = (
        ([("advantages", adv)] if adv.dim() == 2 else [])
        + [("new_logps", new), ("old_logps", old)]
        + ([] if ref is None else [("ref_logps", ref)])
    )
    checks.add(
        lambda: _finite_where_all([x for _, x in named], act),
        _first_nonfinite_message(named, act),
    )

    if num_items_in_batch is None:
        n_items = None  # the batch's token count
    elif isinstance(num_items_in_batch, torch.Tensor):
        n_items = num_items_in_batch.to(device=new.device, dtype=cdt).reshape(())
        checks.add(
            lambda: (n_items > 0) & torch.isfinite(n_items),
            "num_items_in_batch must be finite and > 0",
        )
    else:
        # a 0-d tensor, so that a compiled loss does not specialise on (and recompile
        # for) each value
        n_items = torch.full((), num_items_in_batch, dtype=cdt, device=new.device)

    def cast(x):
        return x if x.dtype == cdt else x.to(cdt)

    a = (
        cast(adv)[:, None]
        if adv.dim() == 1
        else torch.where(act, cast(adv), scalar_like(0.0, new.to(cdt)))
    )

    return _Batch(
        cast(new),
        cast(old.detach()),
        None if ref is None else cast(ref),
        a,
        act,
        n_raw,
        n_items,
        fused_requested,
        fused,
        checks,
    )


def _check_flags(**flags):
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool, got {type(value).__name__}")


def _finite_where(x, act):
    return (torch.isfinite(x) | ~act).all()


def _finite_where_all(tensors, act):
    """0-d bool: every tensor is finite wherever ``act``, in a few fast arithmetic
    passes (0 * inf = NaN)."""
    z = tensors[0] * 0
    for t in tensors[1:]:
        z.add_(t, alpha=0)
    return torch.isfinite(torch.where(act, z, 0).sum())


def _first_nonfinite_message(named, act):
    def message():
        for name, x in named:
            if not bool(_finite_where(x, act)):
                return f"{name} must be finite at every valid (mask == 1) position"
        return "inputs must be finite at every valid (mask == 1) position"

    return message


def _empty_rows_message(act):
    def message():
        rows = torch.nonzero(~act.any(dim=1)).flatten().tolist()
        return f"mask has rows with no valid token (rows {rows[:5]})"

    return message
