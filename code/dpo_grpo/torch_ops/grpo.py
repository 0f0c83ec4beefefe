"""GRPO in PyTorch exactly as TRL 1.16.0's ``GRPOTrainer._compute_loss``, every option,
with autograd.

Same names, options (:class:`dpo_grpo.trl_exact.grpo.GRPOOptions`) and semantics as
:func:`dpo_grpo.trl_exact.grpo.grpo_loss` (tested equal), on tensors of any device and
floating dtype. :func:`grpo_loss` checks its arguments once (:func:`_checked_batch`),
then computes the loss as TRL writes it (:func:`_grpo_autograd`), differentiated by
autograd. There is no hand-written kernel: the loss is a few milliseconds of a training
step that takes hundreds (``book/appendix_benchmarks.ipynb`` measures both).

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
  replaced by 0 before any ``exp`` (``torch.where``), and their gradient is exactly
  zero.
- Tolerances against the float64 NumPy reference on the same (rounded) inputs, as
  tested: float64 1e-12; float32 loss rtol 1e-5, gradient rtol 1e-5 (+ 1e-5 x
  max|grad|); bfloat16 inputs are computed in float32, so the loss keeps rtol 1e-5,
  while the gradient, stored in bfloat16, is within 2**-7 relative.
- Every function traces without graph breaks under
  ``torch.compile(..., fullgraph=True)`` (with ``validate=False``).
  ``grpo_loss(..., compile=True)`` does it for you (one compiled function per process,
  dynamic shapes): fewer kernel launches, which is what a small loss costs on a GPU.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .. import _validation as v
from ..trl_exact.grpo import (
    CLIPPED_LOSS_TYPES,
    NORMALISER,
    VESPO_LOG_W_MAX,
    VESPO_LOG_W_MIN,
    GRPOOptions,
    GRPOOutput,
    takes_grpo_options,
    unimplemented,
)
from .tensors import (
    DeferredChecks,
    checked_tensor,
    compute_dtype,
    same_shape,
    scalar_like,
)

__all__ = ["GRPOOutput", "grpo_loss"]


@takes_grpo_options
def grpo_loss(
    new_logps,
    old_logps,
    ref_logps,
    advantages,
    mask,
    *,
    num_items_in_batch=None,
    validate=True,
    compile=False,
    **options,
) -> GRPOOutput:
    """GRPO loss exactly as TRL 1.16.0's ``GRPOTrainer._compute_loss`` (and
    :func:`dpo_grpo.trl_exact.grpo.grpo_loss`); ``options``: the fields of
    :class:`~dpo_grpo.trl_exact.grpo.GRPOOptions`, by name.

    Shapes: ``new_logps``, ``old_logps``, ``ref_logps``, ``mask``: (B, T);
    ``advantages``: (B,) or (B, T). Per token ``l = -min(min(rho, delta) A, clip(rho,
    1 - eps_low, 1 + eps_high) A) + beta k3`` with ``rho = exp(new - old)`` (GSPO:
    ``exp(masked mean of new - old)``) and ``k3 = exp(ref - new) - (ref - new) - 1``;
    ``loss = sum(w * mask * l)`` with the ``loss_type`` weight ``w`` of the NumPy
    version. ``old_logps`` is fixed data (detached); ``num_items_in_batch`` may be a
    number or a 0-d tensor (``dapo``, ``cispo``, ``vespo``). ``loss_type`` takes TRL's
    eight values, with the NumPy version's semantics and options (``cispo``, ``sapo``,
    ``luspo``, ``vespo``: see :func:`dpo_grpo.trl_exact.grpo.grpo_loss`).

    ``validate=False`` skips the value checks (mask 0/1, non-empty rows, finite at valid
    positions, no overflow), which are the only part that synchronises with the device.
    ``compile=True`` runs the loss's tensor code through ``torch.compile`` (kept for the
    process; dynamic shapes): the first call compiles (seconds; on CPU it needs a C++
    compiler); the numbers are those of ``compile=False`` up to float rounding.
    """
    new, old, mask = _checked_logps(new_logps, old_logps, mask)
    o = GRPOOptions(**options).checked(new.shape[1])
    x = _checked_batch(
        new, old, ref_logps, advantages, mask, num_items_in_batch, o, validate
    )
    if not isinstance(compile, bool):
        raise TypeError(f"compile must be a bool, got {type(compile).__name__}")
    # TRL clamps the token counts at 1 (empty rows add nothing) ...
    n_b = x.n_raw.clamp(min=1.0)
    # ... and the batch's, which does not count empty rows
    n_all = x.n_raw.sum().clamp(min=1.0)
    n_items = n_all if x.n_items is None else x.n_items
    loss, rho, kl_term, per_token_loss, metrics = _maybe_compiled(compile)(
        x.new, x.old, x.ref, x.a, x.act, n_b, n_all, n_items, o
    )
    ratio = rho if rho.shape == x.act.shape else torch.where(x.act, rho, 1.0)
    x.checks.add(
        lambda: torch.isfinite(
            torch.stack(
                [ratio.amax()] + ([] if kl_term is None else [kl_term.detach().amax()])
            )
        ).all(),
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


def _grpo_autograd(new, old, ref, a, act, n_b, n_all, n_items, o: GRPOOptions):
    """The loss written as TRL writes it, differentiated by autograd (w.r.t. new, ref
    and advantages): ``(loss, ratio, per_token_kl, per_token_loss, metrics)``, the
    ratio (B, T) or (B, 1) and the metrics detached."""
    zero = scalar_like(0.0, new)
    m = act.to(new.dtype)
    new = torch.where(act, new, zero)
    log_ratio = new - torch.where(act, old, zero)
    if o.importance_sampling_level == "token":
        log_w = log_ratio
    else:
        log_w = (log_ratio * m).sum(1, keepdim=True) / n_b[:, None]
    c1 = torch.exp(log_w)
    kl_term = None
    metrics = {}
    if ref is not None:
        gap = torch.where(act, ref, zero) - new
        k3 = torch.expm1(gap) - gap
        kl_term = (k3 * c1 if o.use_bias_correction_kl else k3) * m
        if o.beta != 0:
            metrics["kl"] = kl_term.detach().sum() / n_all
    # policy term and the metrics TRL logs for it
    rho = c1.detach()
    if o.loss_type in CLIPPED_LOSS_TYPES:
        c2 = torch.clamp(c1, 1 - o.epsilon, 1 + o.epsilon_high)
        c1_capped = c1 if o.delta is None else torch.clamp(c1, max=o.delta)
        policy = -torch.min(c1_capped * a, c2 * a)
        _clip_metrics(metrics, rho, a.detach(), n_b, n_all, o)
    elif o.loss_type == "cispo":  # -sg(min(rho, eps_max)) A log pi
        policy = -torch.clamp(rho, max=o.epsilon_high) * a * new
        clipped = ((rho > o.epsilon_high) & (a > 0)).to(rho.dtype)
        metrics["cispo_clip_ratio"] = _masked_mean(clipped, act, n_all)
    elif o.loss_type == "sapo":  # -(4 / tau) sigmoid(tau (rho - 1)) A, tau in float32
        tau = torch.where(a > 0, o.sapo_temperature_pos, o.sapo_temperature_neg)
        tau = tau.to(c1.dtype)
        policy = -(torch.sigmoid(tau * (c1 - 1)) * 4 / tau) * a
    elif o.loss_type == "vespo":  # -sg(phi(w)) A log pi
        phi = _vespo_weight(log_ratio, a, m, o)
        policy = -phi * a * new
        metrics["vespo/phi_seq_mean"] = _masked_mean(phi, act, n_all)
    else:
        raise unimplemented(o.loss_type, "policy term")
    per_token_loss = policy * m
    if o.beta != 0:
        per_token_loss = per_token_loss + o.beta * kl_term
    loss = (_token_weight(o, n_b, n_all, n_items, new.shape[0]) * per_token_loss).sum()
    return loss, rho, kl_term, per_token_loss, metrics


def _token_weight(o: GRPOOptions, n_b, n_all, n_items, bsz):
    """TRL's normaliser (:data:`~dpo_grpo.trl_exact.grpo.NORMALISER`) as the per-token
    weight ``w`` with ``loss = sum(w * mask * l)``: (B, 1) or 0-d."""
    steps = o.gradient_accumulation_steps
    normaliser = NORMALISER.get(o.loss_type)
    if normaliser == "sequence_mean":
        return (1.0 / (bsz * steps)) / n_b[:, None]
    if normaliser == "batch_tokens":
        return (1.0 / steps) / n_all
    if normaliser == "max_length":
        return scalar_like(1.0 / (bsz * o.max_completion_length * steps), n_all)
    if normaliser == "sequence_sum":
        return scalar_like(1.0 / (bsz * steps), n_all)
    if normaliser == "generation_tokens":
        items_per_process = n_items.clamp(min=1.0) / o.num_processes
        return 1.0 / (items_per_process * steps / o.steps_per_generation)
    raise unimplemented(o.loss_type, "normaliser")


_COMPILED = []
#: Kernels dynamo may keep for the loss. Its default (8) counts every set of options,
#: dtype and device, and with ``fullgraph=True`` the ninth is an error, not a fallback:
#: seen on a GPU when one process ran the loss on CUDA and then on the CPU. Raised only
#: while the loss runs, not for the caller's own compiled code.
RECOMPILE_LIMIT = 64


def _maybe_compiled(compile: bool):
    """:func:`_grpo_autograd`, or its ``torch.compile`` (built once, kept for the
    process: dynamo caches a kernel per set of options, dtype and device, up to
    :data:`RECOMPILE_LIMIT`, compiled for dynamic shapes)."""
    if not compile:
        return _grpo_autograd
    if not _COMPILED:
        compiled = torch.compile(_grpo_autograd, fullgraph=True, dynamic=True)

        def call(*args):
            try:
                with torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT):
                    return compiled(*args)
            except torch._dynamo.exc.BackendCompilerFailed as exc:
                # e.g. no working C++ compiler on a CPU
                raise RuntimeError(
                    "compile=True: torch.compile could not build the loss kernel (on "
                    "a CPU it needs a C++ compiler such as g++); pass compile=False "
                    f"to run the eager loss. Cause: {str(exc)[:300]}"
                ) from exc

        _COMPILED.append(call)
    return _COMPILED[0]


def _clip_metrics(metrics, c1, a, n_b, n_all, o: GRPOOptions):
    """TRL's clip_ratio/* metrics from the uncapped weight ``c1`` ((B,T) or (B,1)) and
    advantages ``a``.

    ``is_low = (min(c1, delta) < 1 - eps_low) & (a < 0)`` equals ``c1 < L`` with
    ``L = 1 - eps_low`` where a < 0 (else 0, never exceeded as c1 > 0);
    ``is_high = (min(c1, delta) > 1 + eps_high) & (a > 0)`` equals ``c1 > U`` with
    ``U = 1 + eps_high`` where a > 0 and delta > 1 + eps_high (else inf). Padding never
    counts: there the token weight is exp(0) = 1, inside the interval, and the (B, T)
    advantages are 0.
    """
    lo, hi = 1.0 - o.epsilon, 1.0 + o.epsilon_high
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


# --- argument checks ------------------------------------------------------------------


class _Batch(NamedTuple):
    """:func:`grpo_loss`'s tensors, checked and in the compute dtype, and its pending
    value checks."""

    new: torch.Tensor  #: (B, T) new_logps in the compute dtype (still differentiable)
    old: torch.Tensor  #: (B, T) detached
    ref: torch.Tensor | None  #: (B, T)
    a: torch.Tensor  #: (B, 1), or (B, T) with 0 on padding
    act: torch.Tensor  #: (B, T) bool mask
    n_raw: torch.Tensor  #: (B,) valid tokens per row
    n_items: torch.Tensor | None  #: 0-d num_items_in_batch (None: the batch's tokens)
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
    new, old, ref_logps, advantages, mask, num_items_in_batch, o, validate
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
    if isinstance(num_items_in_batch, torch.Tensor):
        if num_items_in_batch.numel() != 1:
            raise ValueError(
                f"num_items_in_batch must be a number or a one-element tensor, "
                f"got shape {tuple(num_items_in_batch.shape)}"
            )
    elif num_items_in_batch is not None:
        num_items_in_batch = v.scalar(
            num_items_in_batch, "num_items_in_batch", positive=True
        )
    if not isinstance(validate, bool):
        raise TypeError(f"validate must be a bool, got {type(validate).__name__}")

    cdt = compute_dtype(new.dtype)
    act = mask if mask.dtype == torch.bool else mask.bool()
    n_raw = mask.sum(1).to(cdt)
    checks = DeferredChecks(validate)
    if mask.dtype != torch.bool:
        # m (m - 1) vanishes exactly on 0 and 1 (NaN stays NaN, hence nonzero)
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
        checks,
    )


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
