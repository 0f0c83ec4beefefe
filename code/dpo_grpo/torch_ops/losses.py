"""The TRL-exact losses in PyTorch: GRPO (every TRL 1.16.0 option, fused and compiled kernels), advantages, DPO.

Same names, arguments and semantics as the NumPy reference (:mod:`dpo_grpo.trl_exact.grpo`, :mod:`dpo_grpo.trl_exact.advantages`,
:mod:`dpo_grpo.trl_exact.dpo`), but on tensors of any device and floating dtype, with gradients from autograd. This module
is optional: ``import dpo_grpo`` never imports torch.

Conventions shared by every function here:

- Argument checks that only look at shapes, dtypes and options always run and never synchronise with the device.
  Checks that must look at values (mask is 0/1, no empty row, finite log-probs at valid positions, no overflow)
  run when ``validate=True`` (the default) with a single host-device synchronisation; pass ``validate=False`` in
  a training loop's hot path.
- Half-precision inputs (bfloat16, float16) are computed in float32, and the results (loss, per-token tensors,
  metrics) are float32; gradients have the dtype of the tensor they belong to.
- Padding positions (``mask == 0``) may hold any garbage, NaN and inf included: they are replaced by 0 before
  any ``exp`` (``torch.where`` semantics, computed as a bitwise select on the fused path), and their gradient is
  exactly zero.
- Tolerances against the float64 NumPy reference on the same (rounded) inputs, as tested: float64 1e-12;
  float32 loss rtol 1e-5, gradient rtol 1e-5 (+ 1e-5 x max|grad|); bfloat16 inputs are computed in float32, so
  the loss keeps rtol 1e-5, while the gradient, stored in bfloat16, is within 2**-7 relative.
- Every function traces without graph breaks under ``torch.compile(..., fullgraph=True)`` (with ``validate=False``).
  ``grpo_loss(..., compile=True)`` does it for you: its tensor code becomes one generated kernel that reads each
  input once (measured speed-ups in ``bench/README.md``); ``per_token=False`` skips the per-token outputs a
  training step does not need.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch  # the package's __init__ explains a missing torch
import torch.nn.functional as F

from .. import _validation as v
from ..trl_exact.advantages import AGGREGATIONS, SCALE_REWARDS
from ..trl_exact.dpo import DPOOptions, dpo_options
from ..trl_exact.grpo import (
    CLIP_METRICS,
    CLIPPED_LOSS_TYPES,
    VESPO_LOG_W_MAX,
    VESPO_LOG_W_MIN,
    GRPOOptions,
    grpo_options,
)

__all__ = [
    "default_device",
    "grpo_loss",
    "GRPOOutput",
    "group_advantages",
    "reward_advantages",
    "RewardAdvantages",
    "dpo_loss",
    "DPOOutput",
    "CLIP_METRICS",
]

_HALF = (torch.float16, torch.bfloat16)


def default_device() -> torch.device:
    """``torch.device("cuda")`` when a CUDA GPU is usable, else ``torch.device("cpu")``."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


# --- argument handling (no device synchronisation) -------------------------------------------------------------------


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in _HALF else dtype


def _tensor(
    x, name: str, *, like: torch.Tensor | None = None, ndim=None, floating: bool = True
) -> torch.Tensor:
    """``x`` as a tensor (array-likes are converted), on ``like``'s device; checks ndim and non-emptiness."""
    if x is None or isinstance(x, (str, bytes, dict)):
        raise TypeError(f"{name} must be a tensor of numbers, got {type(x).__name__}")
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(
            v.as_float_array(x, name, finite=False),
            device=None if like is None else like.device,
        )
        if like is not None and floating:
            x = x.to(_compute_dtype(like.dtype))
    if floating and not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if not floating and x.is_complex():
        raise TypeError(f"{name} must be a real tensor, got dtype {x.dtype}")
    if like is not None and x.device != like.device:
        raise ValueError(
            f"{name} must be on the same device as new_logps ({like.device}), got {x.device}"
        )
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if x.dim() not in allowed:
            want = " or ".join(f"{d}-D" for d in allowed)
            raise ValueError(f"{name} must be {want}, got shape {tuple(x.shape)}")
    if x.numel() == 0:
        raise ValueError(f"{name} must not be empty, got shape {tuple(x.shape)}")
    return x


# the shared scalar check is NumPy-free, so torch.compile traces it
_scalar = v.scalar


def _same_shape(first_name, first, **others):
    for name, t in others.items():
        if t.shape != first.shape:
            raise ValueError(
                f"{name} must have the same shape as {first_name}: "
                f"{tuple(t.shape)} != {tuple(first.shape)}"
            )


class _Checks:
    """Value checks collected as 0-d bool tensors and resolved with one synchronisation (``.tolist()``)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.conds: list[torch.Tensor] = []
        self.messages: list = []

    def add(self, cond_fn, message):
        """``cond_fn()`` -> 0-d bool tensor that must be True; ``message``: str or callable (built on failure)."""
        if self.enabled:
            self.conds.append(cond_fn())
            self.messages.append(message)

    def raise_first_failure(self):
        if not self.conds:
            return
        # the one host-device sync
        results = torch.stack([c.reshape(()) for c in self.conds]).tolist()
        for ok, message in zip(results, self.messages):
            if not ok:
                raise ValueError(message() if callable(message) else message)


def _full(value, like: torch.Tensor) -> torch.Tensor:
    """0-d tensor of ``value`` with ``like``'s dtype and device, made by a fill kernel (no host-device copy)."""
    return torch.full((), value, dtype=like.dtype, device=like.device)


def _finite_where(x, act):
    return (torch.isfinite(x) | ~act).all()


def _finite_where_all(tensors, act):
    """0-d bool: every tensor is finite wherever ``act``, in a few fast arithmetic passes (0 * inf = NaN)."""
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


# --- GRPO ------------------------------------------------------------------------------------------------------------


class GRPOOutput(NamedTuple):
    """Result of :func:`grpo_loss`; fields as in :class:`dpo_grpo.trl_exact.grpo.GRPOOutput` but tensors, and no ``grad``.

    ``loss`` is 0-d and carries the autograd graph to ``new_logps``. On the fused path (the default) the
    per-token tensors are detached values; use ``fused=False`` if you need to differentiate them.
    """

    loss: torch.Tensor  #: 0-d
    ratio: torch.Tensor  #: (B, T) importance weight exp(new - old) (GSPO: the sequence weight broadcast), 1 on padding
    #: (B, T) k3 as used in the loss (x ratio with bias correction); None without ref
    per_token_kl: torch.Tensor | None
    #: (B, T) clipped surrogate + beta * KL, zero on padding
    per_token_loss: torch.Tensor
    metrics: dict  #: 0-d tensors with TRL's names: clip_ratio/* and (when beta != 0) kl


_GrpoOptions = GRPOOptions
# typed: True is not 1
_cached_grpo_options = functools.lru_cache(maxsize=256, typed=True)(grpo_options)


def _grpo_options(*args, **kwargs):
    """:func:`dpo_grpo.trl_exact.grpo.grpo_options` (the one option parser, shared with the NumPy loss), memoised: a training
    loop passes the same options at every step. Unhashable arguments go to the parser, which explains them."""
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


def _token_weight(o: _GrpoOptions, n_b, n_all, n_items, bsz):
    """The per-token weight ``w`` with ``loss = sum(w * mask * l)``: (B, 1) for ``grpo``, 0-d otherwise."""
    if o.loss_type in ("grpo", "sapo"):
        return (1.0 / (bsz * o.gas)) / n_b[:, None]
    if o.loss_type == "bnpo":
        return (1.0 / o.gas) / n_all
    if o.loss_type == "dr_grpo":
        return _full(1.0 / (bsz * o.max_len * o.gas), n_all)
    if o.loss_type == "luspo":
        return _full(1.0 / (bsz * o.gas), n_all)
    # dapo, cispo, vespo
    return 1.0 / (n_items.clamp(min=1.0) / o.nproc * o.gas / o.spg)


def _clip_metrics(metrics, c1, a, act, n_b, n_all, o: _GrpoOptions):
    """TRL's clip_ratio/* metrics from the uncapped weight ``c1`` ((B,T) or (B,1)) and advantages ``a``.

    ``is_low = (min(c1, delta) < 1 - eps_low) & (a < 0)`` equals ``c1 < L`` with ``L = 1 - eps_low`` where a < 0
    (else 0, never exceeded as c1 > 0); ``is_high = (min(c1, delta) > 1 + eps_high) & (a > 0)`` equals
    ``c1 > U`` with ``U = 1 + eps_high`` where a > 0 and delta > 1 + eps_high (else inf). Padding never counts:
    there the token weight is exp(0) = 1, inside the interval, and the (B, T) advantages are 0.
    """
    lo, hi = 1.0 - o.eps_low, 1.0 + o.eps_high
    is_low = c1 < torch.where(a < 0, lo, _full(0.0, c1))
    if o.delta is None or o.delta > hi:
        is_high = c1 > torch.where(a > 0, hi, _full(math.inf, c1))
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


class _AttachGrad(torch.autograd.Function):
    """Returns ``loss`` (computed without autograd) as a function of ``new`` whose gradient is ``weight * grad``
    (``weight``: (B, 1) or 0-d; one fused multiply in the backward, which has to write the gradient anyway)."""

    @staticmethod
    def forward(ctx, new, loss, grad, weight):
        ctx.save_for_backward(grad, weight)
        ctx.new_dtype = new.dtype
        return loss.clone()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        grad, weight = ctx.saved_tensors
        return (grad * (weight * grad_out)).to(ctx.new_dtype), None, None, None


_INT_VIEW = {torch.float32: torch.int32, torch.float64: torch.int64}

#: Rows per block of the fused GRPO loss on CPU: about this many elements per block, so that the ~10 block-sized
#: temporaries stay in cache (measured ~2x faster than whole-tensor passes at 512 x 4096); one block on CUDA.
_GRPO_BLOCK_ELEMENTS = 1 << 19


def _select_(x, int_mask):
    """``torch.where(mask, x, 0)``, in place, as a bitwise AND of ``x``'s bits with an all-ones / all-zeros integer
    mask: bit-identical to ``torch.where`` (NaN and inf are dropped too) and several times faster on CPU eager.
    A boolean ``int_mask`` (the functional form, for torch.compile) selects with ``torch.where``."""
    if int_mask.dtype == torch.bool:
        return torch.where(int_mask, x, 0.0)
    x.view(int_mask.dtype).bitwise_and_(int_mask)
    return x


class _BlockConfig(NamedTuple):
    o: _GrpoOptions
    dt: torch.dtype
    int_dtype: torch.dtype
    one: torch.Tensor
    one_sided: bool
    high_counts: bool
    per_seq: bool
    need_grad: bool
    has_ref: bool


def _grpo_block(cfg, out, new, old, ref, mask, ab, nab, lower, upper, sign_a) -> dict:
    """One block of rows of :func:`_grpo_fused`. ``out``: dict of preallocated views to write into (eager, CPU
    cache blocking), or None for the functional form (torch.compile). Returns the block's tensors by name; its
    ``grad`` is ``d loss / d new`` divided by the token weight ``w`` (the backward multiplies by ``w``), so the
    block needs no token counts before it starts: it counts its own (``n_raw``) in the same pass."""
    o = cfg.o

    def buf(name):
        return None if out is None else out[name]

    def into(
        name, value
    ):  # a per-row result: copied into its buffer, or returned as is
        return value if out is None else out[name].copy_(value)

    if (
        out is None
    ):  # functional form: plain selects, which inductor vectorises (the bit trick it does not)
        m = mask if mask.dtype == cfg.dt else mask.to(cfg.dt)
        im = mask.bool()
    else:  # one read of the caller's mask (often int64); the float mask is converted from the cached int one
        im = out["int_mask"].copy_(mask)
        m = mask if out["float_mask"] is None else out["float_mask"].copy_(im)
        im.neg_()
    n_raw = torch.sum(m, 1, out=buf("n_raw"))  # valid tokens per row
    log_ratio = _select_(torch.sub(new, old, out=buf("t1")), im)
    nb = None
    if o.token_level:
        c1 = torch.exp(log_ratio, out=buf("ratio"))  # (b, T), exactly 1 on padding
        ratio = c1
    else:
        nb = n_raw.clamp(min=1.0)[:, None]  # TRL clamps the token counts at 1
        c1 = (log_ratio.sum(1, keepdim=True) / nb).exp_()  # (b, 1)
        ratio = torch.where(mask.bool(), c1, cfg.one, out=buf("ratio"))
    res = {"n_raw": n_raw, "ratio": ratio}
    if cfg.per_seq:
        clamped = torch.maximum(torch.minimum(c1, upper), lower)
        s = torch.sub(clamped, c1).sign_()
    else:
        clamped = torch.minimum(c1, upper, out=buf("t2"))
        clamped = torch.maximum(
            clamped, lower, out=clamped if out is not None else None
        )
        s = torch.sub(clamped, c1, out=buf("t3")).sign_()
    h = None
    if (
        cfg.one_sided
    ):  # s_sum = (number of low-clipped tokens) - (number of high-clipped tokens)
        s_sum = s.sum(1)
        res["low"] = torch.clamp(s_sum, min=0, out=buf("low"))
        res["high"] = torch.clamp(-s_sum, min=0, out=buf("high"))
        if cfg.need_grad:
            h = torch.addcmul(m, s, sign_a, out=buf("t4"))  # = mask * (1 - |s|)
    else:
        res["low"] = into("low", (s > 0).sum(1).to(cfg.dt))
        res["high"] = into(
            "high",
            (
                ((s < 0) & (ab > 0)).sum(1)
                if cfg.high_counts
                else s.new_zeros(s.shape[0])
            ).to(cfg.dt),
        )
        if cfg.per_seq:
            h = 1.0 - s.abs()
        else:  # padding: s = 0 and m = 0
            h = torch.sub(m, torch.abs(s, out=buf("t4")), out=buf("t4"))
    if cfg.per_seq:
        ptl = torch.mul(m, clamped * nab, out=buf("per_token_loss"))
    else:
        ptl = torch.mul(clamped, nab, out=buf("per_token_loss")).mul_(m)
    em = gap = kl_b = None
    if cfg.has_ref:
        gap = _select_(torch.sub(ref, new, out=buf("t1")), im)  # 0 on padding
        em = torch.expm1(gap, out=buf("t5"))
        kl_b = torch.sub(em, gap, out=buf("kl"))  # k3, 0 on padding
        if o.bias_kl:
            kl_b.mul_(c1)
        res["row_kl"] = torch.sum(kl_b, 1, out=buf("row_kl"))
        if o.beta != 0:
            ptl.add_(kl_b, alpha=o.beta)
    else:
        res["row_kl"] = into("row_kl", ptl.new_zeros(ptl.shape[0]))
    res.update(
        kl=kl_b,
        per_token_loss=ptl,
        row_loss=torch.sum(ptl, 1, out=buf("row_loss")),
        grad=None,
    )
    if (
        cfg.need_grad
    ):  # d l / d new, l the per-token loss (w-weighted sums come in the backward)
        if o.token_level:
            g = torch.mul(h, c1, out=buf("grad")).mul_(nab)
        else:
            if cfg.per_seq:  # the same d l / d log_w at each of the n_b valid tokens
                d_log_w = h * c1 * nab * nb
            else:
                d_log_w = torch.mul(h, c1, out=buf("t2")).mul_(nab).sum(1, keepdim=True)
            if o.beta != 0 and o.bias_kl:  # k3 * rho, rho = exp(log_w)
                d_log_w = d_log_w + o.beta * res["row_kl"][:, None]
            g = torch.mul(m, d_log_w / nb, out=buf("grad"))
        if cfg.has_ref and o.beta != 0:
            if not o.bias_kl:
                g.add_(em, alpha=-o.beta)  # d k3 / d new = -expm1(ref - new)
            elif o.token_level:
                # d (k3 rho) / d new = -rho gap
                g.add_(torch.mul(c1, gap, out=buf("t3")), alpha=-o.beta)
            else:
                g.addcmul_(em, c1, value=-o.beta)
        res["grad"] = g
    return res


_ROW_STATS = ("n_raw", "row_loss", "row_kl", "low", "high")


def _grpo_fused(
    new,
    old,
    ref,
    a,
    mask,
    n_items,
    o: _GrpoOptions,
    need_grad: bool,
    per_token: bool = True,
    block_rows: int | None = None,
):
    """Loss, per-token outputs, metrics and the analytic gradient in one pass over the inputs (no autograd graph).

    With ``rho`` the importance weight and ``A`` the advantage, TRL's ``-min(min(rho, delta) A, clip(rho, lo, hi) A)``
    equals ``-A clamp(rho, L, U)`` with ``(L, U) = (0, min(hi, delta))`` where ``A > 0``, ``(lo, max(hi, delta))``
    where ``A < 0`` and ``(0, inf)`` where ``A = 0``. Its derivative w.r.t. ``log rho`` is ``-A rho h`` with
    ``h = 1 - |sign(clamp(rho) - rho)|`` (1 where the clamp is inactive, 0 where it is active), and
    ``sign(clamp(rho) - rho)`` is +1 exactly on TRL's low-clipped tokens and -1 on the high-clipped ones
    (when ``delta`` is None). Rows are processed in blocks that fit in cache (CPU); the float and the bit masks and
    the token counts are made per block from ``mask`` (any dtype, values 0/1). ``n_items``: 0-d tensor or None
    (the batch's token count). Returns ``(loss, grad / w, w, ratio, kl, per_token_loss, metrics)``, ``w`` the
    (B, 1) or 0-d token weight: ``d loss / d new = w * (grad / w)``. ``per_token=False``: ratio, kl and
    per_token_loss live only in block-sized workspaces and are returned as None (no (B, T) writes but the gradient).
    """
    bsz, width = new.shape
    dt = new.dtype
    lo, hi = 1.0 - o.eps_low, 1.0 + o.eps_high
    cap = math.inf if o.delta is None else o.delta
    high_counts = o.delta is None or o.delta > hi  # TRL counts min(rho, delta) > hi
    pos, neg = a > 0, a < 0
    lower = torch.where(neg, lo, _full(0.0, new))
    if o.delta is None:  # the upper clip acts only where A > 0
        upper = torch.where(pos, hi, _full(math.inf, new))
    else:
        upper = torch.where(
            pos, min(hi, cap), torch.where(neg, _full(max(hi, cap), new), math.inf)
        )
    # the ratio on padding, for sequence-level weights
    one = None if o.token_level else _full(1.0, new)
    a2d = a.shape[1] > 1
    # each row clips on one side only
    one_sided = o.token_level and not a2d and o.delta is None
    # exact in any float dtype
    sign_a = torch.where(pos, 1.0, -1.0) if one_sided else None
    neg_a = -a  # d (policy term) / d (clamped ratio)
    int_dtype = _INT_VIEW[dt]
    if (
        block_rows is None
    ):  # one block on GPU and under torch.compile (whose fused kernels need no cache blocking)
        one_block = new.device.type != "cpu" or torch.compiler.is_compiling()
        block_rows = bsz if one_block else max(1, _GRPO_BLOCK_ELEMENTS // width)
    # GSPO with (B,) advantages: one weight and clip flag per sequence
    per_seq = not o.token_level and not a2d
    cfg = _BlockConfig(
        o,
        dt,
        int_dtype,
        one,
        one_sided,
        high_counts,
        per_seq,
        need_grad,
        ref is not None,
    )

    if (
        torch.compiler.is_compiling()
    ):  # functional form: inductor fuses it, out= buffers would only get in its way
        blk = _grpo_block(
            cfg, None, new, old, ref, mask, a, neg_a, lower, upper, sign_a
        )
        ratio, per_token_loss, kl, grad = (
            blk["ratio"],
            blk["per_token_loss"],
            blk["kl"],
            blk["grad"],
        )
        per_row = torch.stack([blk[k] for k in _ROW_STATS])
    else:
        # outputs returned together share one allocation (block-sized when not returned); the gradient, kept for
        # the backward, has its own
        rows = min(block_rows, bsz)
        outputs = torch.empty(
            (2 if ref is None else 3, bsz if per_token else rows, width),
            dtype=dt,
            device=new.device,
        ).unbind(0)
        ratio, per_token_loss, kl = outputs if ref is not None else (*outputs, None)
        grad = torch.empty_like(new) if need_grad else None
        # per-sequence sums: tokens, loss, kl, low/high clipped
        per_row = new.new_zeros((len(_ROW_STATS), bsz))
        row_views = dict(zip(_ROW_STATS, per_row.unbind(0)))
        # block-sized workspaces, reused by every block through out=: no allocation (on CPU: no page faults)
        work = torch.empty((5, rows, width), dtype=dt, device=new.device).unbind(0)
        int_mask = torch.empty((rows, width), dtype=int_dtype, device=new.device)
        float_mask = (
            None
            if mask.dtype == dt
            else torch.empty((rows, width), dtype=dt, device=new.device)
        )
        whole = block_rows >= bsz
        for r0 in range(0, bsz, block_rows):
            r = slice(r0, r0 + block_rows)
            # no slicing ops when there is a single block
            take = (lambda x: x) if whole else (lambda x: x[r])
            b = min(bsz, r0 + block_rows) - r0
            out_take = (
                take if per_token else (lambda x: x) if whole else (lambda x: x[:b])
            )
            out = dict(
                zip(
                    ("t1", "t2", "t3", "t4", "t5"),
                    work if whole else (x[:b] for x in work),
                )
            )
            out.update(
                int_mask=int_mask if whole else int_mask[:b],
                float_mask=None
                if float_mask is None
                else float_mask
                if whole
                else float_mask[:b],
                ratio=out_take(ratio),
                per_token_loss=out_take(per_token_loss),
                kl=None if kl is None else out_take(kl),
                grad=None if grad is None else take(grad),
                **{k: take(x) for k, x in row_views.items()},
            )
            _grpo_block(
                cfg,
                out,
                take(new),
                take(old),
                None if ref is None else take(ref),
                take(mask),
                take(a),
                take(neg_a),
                take(lower),
                take(upper),
                None if sign_a is None else take(sign_a),
            )
    # (5,): the batch's tokens, loss sum, KL sum, low- and high-clipped counts
    totals = per_row.sum(1)
    # TRL clamps the token counts at 1 (empty rows add nothing) ...
    n_b = per_row[0].clamp(min=1.0)
    # ... and the batch's, which does not count empty rows
    n_all = totals[0].clamp(min=1.0)
    # (B, 1) or 0-d
    weight = _token_weight(o, n_b, n_all, n_all if n_items is None else n_items, bsz)
    loss = (per_row[1] * weight[:, 0]).sum() if weight.dim() else totals[1] * weight
    # (2, B): low- and high-clipped tokens (or flags, one per sequence)
    counts = per_row[3:]
    if o.token_level or a2d:
        kl_mean, low_mean, high_mean = (totals[2:] / n_all).unbind(0)
        low_seq, high_seq = (counts / n_b).unbind(0)
    else:
        kl_mean = totals[2] / n_all
        low_mean, high_mean = (totals[3:] / bsz).unbind(0)
        low_seq, high_seq = counts.unbind(0)
    metrics = {"kl": kl_mean} if o.beta != 0 else {}
    metrics["clip_ratio/low_mean"] = low_mean
    metrics["clip_ratio/high_mean"] = high_mean
    # a token is low- or high-clipped, never both
    metrics["clip_ratio/region_mean"] = low_mean + high_mean
    metrics["clip_ratio/low_min"] = low_seq.min()
    metrics["clip_ratio/high_max"] = high_seq.max()
    if not per_token:
        ratio = kl = per_token_loss = None
    return loss, grad, weight, ratio, kl, per_token_loss, metrics


_COMPILED: dict = {}


def _maybe_compiled(fn, compile: bool):
    """``fn``, or its ``torch.compile`` (one per function, kept for the process: dynamo caches a kernel per set of
    options, dtype and device, compiled for dynamic shapes, so a new batch or completion length reuses it)."""
    if not compile:
        return fn
    if fn not in _COMPILED:
        compiled = torch.compile(fn, fullgraph=True, dynamic=True)

        def call(*args, _compiled=compiled):
            try:
                return _compiled(*args)
            except (
                torch._dynamo.exc.BackendCompilerFailed
            ) as exc:  # e.g. no working C++ compiler on a CPU
                raise RuntimeError(
                    "compile=True: torch.compile could not build the loss kernel (on a CPU it needs a "
                    "C++ compiler such as g++); pass compile=False to run the eager loss. "
                    f"Cause: {str(exc)[:300]}"
                ) from exc

        _COMPILED[fn] = call
    return _COMPILED[fn]


def _vespo_weight(log_ratio, a, m, o: _GrpoOptions):
    """VESPO's detached Gamma weight ``phi = w^k exp(lambda (1 - w))`` of the clamped sequence ratio ``w`` (see
    :func:`dpo_grpo.trl_exact.grpo.vespo_weight`; ``k``, ``lambda`` are TRL's float32 values)."""
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
    """TRL's ``global_masked_mean`` (one process): (B, 1) values count once per sequence, (B, T) ones per token."""
    if x.shape[1] == 1:
        return x.mean()
    return torch.where(act, x, 0).sum() / n_all


def _grpo_autograd(new, old, ref, a, act, n_b, n_all, n_items, o: _GrpoOptions):
    """The same loss written as TRL writes it, differentiated by autograd (w.r.t. new, ref and advantages).

    Also returns the loss type's extra metric tensor: the VESPO weight ``phi`` (or None)."""
    bsz = new.shape[0]
    zero = _full(0.0, new)
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
    else:  # vespo: -sg(phi(w)) A log pi
        phi = _vespo_weight(log_ratio, a, m, o)
        policy = -phi * a * new
    per_token_loss = policy * m
    if o.beta != 0:
        per_token_loss = per_token_loss + o.beta * kl_term
    loss = (_token_weight(o, n_b, n_all, n_items, bsz) * per_token_loss).sum()
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
    """GRPO loss exactly as TRL 1.16.0's ``GRPOTrainer._compute_loss`` (and :func:`dpo_grpo.trl_exact.grpo.grpo_loss`).

    Shapes: ``new_logps``, ``old_logps``, ``ref_logps``, ``mask``: (B, T); ``advantages``: (B,) or (B, T).
    Per token ``l = -min(min(rho, delta) A, clip(rho, 1 - eps_low, 1 + eps_high) A) + beta k3`` with
    ``rho = exp(new - old)`` (GSPO: ``exp(masked mean of new - old)``) and ``k3 = exp(ref - new) - (ref - new) - 1``;
    ``loss = sum(w * mask * l)`` with the ``loss_type`` weight ``w`` of the NumPy version. ``old_logps`` is fixed
    data (detached); ``num_items_in_batch`` may be a number or a 0-d tensor (``dapo``, ``cispo``, ``vespo``).
    ``loss_type`` takes TRL's eight values, with the NumPy version's semantics and options (``cispo``, ``sapo``,
    ``luspo``, ``vespo``: see :func:`dpo_grpo.trl_exact.grpo.grpo_loss`). The fused kernel covers the clipped
    types (``grpo``, ``bnpo``, ``dr_grpo``, ``dapo``, ``luspo``); ``cispo``, ``sapo`` and ``vespo`` always run the
    autograd path (``fused=True`` falls back to it for them; ``per_token=False`` then drops the per-token outputs
    after computing them).

    ``fused`` (default: ``True`` unless ``ref_logps`` or ``advantages`` require grad) computes the gradient
    analytically in the forward pass, reusing its intermediates, and hands it to autograd: faster and lighter than
    differentiating the composite expression. ``fused=False`` differentiates the composite expression instead.
    ``validate=False`` skips the value checks (mask 0/1, non-empty rows, finite at valid positions, no overflow),
    which are the only part that synchronises with the device. ``compile=True`` runs the loss's tensor code
    through ``torch.compile`` (cached per options, dtype and device; dynamic shapes): on the fused
    path one generated kernel reads each input once and writes each output once (C++/OpenMP on CPU, Triton on
    CUDA). The first call compiles (seconds; on CPU it needs a C++ compiler); the numbers are those of
    ``compile=False`` up to float rounding. ``per_token=False`` (fused path) returns ``ratio``, ``per_token_kl``
    and ``per_token_loss`` as None instead of writing them: a training step needs only the loss, its gradient
    and the metrics (as TRL's ``_compute_loss`` returns), and skipping three (B, T) writes saves about a quarter
    of the loss's memory traffic.
    """
    new = _tensor(new_logps, "new_logps", ndim=2)
    old = _tensor(old_logps, "old_logps", like=new, ndim=2)
    _same_shape("new_logps", new, old_logps=old)
    bsz, width = new.shape
    if mask is None or isinstance(mask, (str, bytes, dict)):
        raise TypeError(
            f"mask must be a tensor of 0/1 values, got {type(mask).__name__}"
        )
    mask = _tensor(mask, "mask", like=new, ndim=2, floating=False)
    if mask.shape != new.shape:
        raise ValueError(
            f"mask must have shape {tuple(new.shape)}, got {tuple(mask.shape)}"
        )
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
        width,
        sapo_temperature_pos=sapo_temperature_pos,
        sapo_temperature_neg=sapo_temperature_neg,
        vespo_k_pos=vespo_k_pos,
        vespo_lambda_pos=vespo_lambda_pos,
        vespo_k_neg=vespo_k_neg,
        vespo_lambda_neg=vespo_lambda_neg,
    )
    if ref_logps is None:
        if o.beta != 0:
            raise ValueError(
                "ref_logps may be None only when beta == 0 (the KL term needs the reference)"
            )
        ref = None
    else:
        ref = _tensor(ref_logps, "ref_logps", like=new, ndim=2)
        _same_shape("new_logps", new, ref_logps=ref)
    adv = _tensor(advantages, "advantages", like=new, ndim=(1, 2))
    if adv.shape not in ((bsz,), (bsz, width)):
        raise ValueError(
            f"advantages must have shape ({bsz},) or ({bsz}, {width}), got {tuple(adv.shape)}"
        )
    if num_items_in_batch is not None and not isinstance(
        num_items_in_batch, torch.Tensor
    ):
        num_items_in_batch = _scalar(
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
    if not isinstance(compile, bool):
        raise TypeError(f"compile must be a bool, got {type(compile).__name__}")
    if not isinstance(per_token, bool):
        raise TypeError(f"per_token must be a bool, got {type(per_token).__name__}")
    if not per_token and not fused:
        raise ValueError(
            "per_token=False needs the fused path (fused=None or True, advantages and ref_logps "
            "not requiring grad)"
        )
    # the kernel implements the clipped surrogate only
    fused = fused and o.loss_type in CLIPPED_LOSS_TYPES

    cdt = _compute_dtype(new.dtype)
    # the boolean mask is only needed off the fused token-level hot path (which builds its masks per cache block)
    act = (
        (mask if mask.dtype == torch.bool else mask.bool())
        if (validate or adv.dim() == 2 or not fused)
        else None
    )
    # token counts: the fused path counts them in its own pass; the rest needs them first
    n_raw = mask.sum(1).to(cdt) if (validate or not fused) else None
    checks = _Checks(validate)
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
    else:  # a 0-d tensor, so that a compiled loss does not specialise on (and recompile for) each value
        n_items = torch.full((), num_items_in_batch, dtype=cdt, device=new.device)

    def cast(x):
        return x if x.dtype == cdt else x.to(cdt)

    old_c = cast(old.detach())
    ref_c = None if ref is None else cast(ref)
    a = (
        cast(adv)[:, None]
        if adv.dim() == 1
        else torch.where(act, cast(adv), _full(0.0, old_c))
    )

    grad = None
    if fused:
        need_grad = torch.is_grad_enabled() and new.requires_grad
        with torch.no_grad():
            loss, grad, weight, ratio, kl_term, per_token_loss, metrics = (
                _maybe_compiled(_grpo_fused, compile)(
                    cast(new),
                    old_c,
                    ref_c,
                    a,
                    mask,
                    n_items,
                    o,
                    need_grad,
                    per_token,
                    _block_rows,
                )
            )
        if need_grad:
            loss = _AttachGrad.apply(new, loss, grad, weight)
    else:
        # TRL clamps the token counts at 1 (empty rows add nothing) ...
        n_b = n_raw.clamp(min=1.0)
        # ... and the batch's, which does not count empty rows
        n_all = n_raw.sum().clamp(min=1.0)
        loss, c1, kl_term, per_token_loss, phi = _maybe_compiled(
            _grpo_autograd, compile
        )(
            new.to(cdt),
            old_c,
            ref_c,
            a,
            act,
            n_b,
            n_all,
            n_all if n_items is None else n_items,
            o,
        )
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
                c1 if c1.shape == new.shape else torch.where(act, c1, _full(1.0, c1))
            )
            if not per_token:
                ratio = kl_term = per_token_loss = None

    def overflow_probes():
        if ratio is not None:
            return [ratio.amax()] + (
                [] if kl_term is None else [kl_term.detach().amax()]
            )
        # per_token=False: an overflow shows as a non-finite loss, KL metric or gradient (0 * inf = NaN)
        return [loss.detach(), metrics.get("kl", loss.detach())] + (
            [] if grad is None else [grad.amax()]
        )

    checks.add(
        lambda: torch.isfinite(torch.stack(overflow_probes())).all(),
        "exp overflowed: new_logps - old_logps or ref_logps - new_logps is too large "
        "at a valid position (check the log-probs)",
    )
    checks.raise_first_failure()
    return GRPOOutput(
        loss=loss,
        ratio=ratio,
        per_token_kl=kl_term,
        per_token_loss=per_token_loss,
        metrics=metrics,
    )


# --- Advantages ------------------------------------------------------------------------------------------------------


def _reward_tensor(x, name):
    if x is None or isinstance(x, (str, bytes, dict)):
        raise TypeError(f"{name} must be a tensor of numbers, got {type(x).__name__}")
    if isinstance(x, torch.Tensor):
        if x.is_complex():
            raise TypeError(f"{name} must be a real tensor, got dtype {x.dtype}")
        if not x.is_floating_point():
            x = x.to(torch.get_default_dtype())
        return x.to(_compute_dtype(x.dtype))
    return torch.as_tensor(v.as_float_array(x, name, finite=False))


def group_advantages(rewards, eps=1e-4, ddof=0, *, validate=True):
    """Standardise each row: ``(r - mean) / (std + eps)``; ``rewards`` and the result have shape ``(prompts, G)``.

    ``ddof=0``: population std (the book's teaching default); ``ddof=1``: sample std (TRL's ``nanstd``).
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
    eps = _scalar(eps, "eps", positive=True)
    ddof = v.choice(v.integer(ddof, "ddof"), "ddof", (0, 1))
    if v.boolean(validate, "validate") and not bool(torch.isfinite(r).all()):
        raise ValueError("rewards must contain only finite values (found NaN or inf)")
    mean = r.mean(dim=1, keepdim=True)
    std = r.std(dim=1, keepdim=True, correction=ddof)
    return (r - mean) / (std + eps)


def _nanstd(x, dim=None, keepdim=False):
    """Sample std ignoring NaN (ddof 1 over the valid entries); NaN where fewer than two are valid (TRL's nanstd)."""
    count = (~torch.isnan(x)).sum(dim=dim, keepdim=True).to(x.dtype)
    mean = torch.nanmean(x, dim=dim, keepdim=True)
    var = torch.nanmean((x - mean) ** 2, dim=dim, keepdim=True)
    var = torch.where(count > 1, var * count / (count - 1), _full(math.nan, var))
    std = var.sqrt()
    if keepdim:
        return std
    return std.reshape(()) if dim is None else std.squeeze(dim)


class RewardAdvantages(NamedTuple):
    """Result of :func:`reward_advantages`: ``advantages`` (N,), aggregated ``rewards`` (N,), TRL's metrics."""

    advantages: torch.Tensor
    rewards: torch.Tensor
    metrics: dict  #: 0-d tensors: reward, reward_std, frac_reward_zero_std


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
    """Advantages exactly as TRL 1.16.0's ``GRPOTrainer`` forms them (see :func:`dpo_grpo.reward_advantages`).

    ``rewards_per_func``: (N, K) (or (N,)), rows in consecutive groups of ``num_generations``, NaN = "returned
    None". ``sum_then_normalize``: ``r = nansum_k w_k r_k``, ``A = (r - nanmean_group r) / (nanstd + eps)`` with the
    std over the group, the batch, or none; ``normalize_then_sum``: standardise each function per group, sum with
    weights, standardise over the batch. NaN advantages become 0. ``validate`` checks for inf (one sync).
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
            f"num_generations={g} must divide the number of rows of rewards_per_func ({n})"
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
                f"reward_weights must have one weight per reward function ({k}), got {w.shape[0]}"
            )
    v.choice(scale_rewards, "scale_rewards", SCALE_REWARDS)
    scale = {True: "group", False: "none"}.get(scale_rewards, scale_rewards)
    v.choice(multi_objective_aggregation, "multi_objective_aggregation", AGGREGATIONS)
    eps = _scalar(eps, "eps", positive=True)
    if v.boolean(validate, "validate"):
        bad = torch.stack([torch.isinf(rpf).any(), ~torch.isfinite(w).all()]).tolist()
        if bad[0]:
            raise ValueError(
                "rewards_per_func must not contain inf (use NaN for 'reward function returned None')"
            )
        if bad[1]:
            raise ValueError(
                "reward_weights must contain only finite values (found NaN or inf)"
            )

    nan = _full(math.nan, rpf)
    unscorable = torch.isnan(rpf).all(dim=1)
    if multi_objective_aggregation == "sum_then_normalize":
        rewards = torch.where(unscorable, nan, torch.nansum(rpf * w, dim=1))
        groups = rewards.reshape(-1, g)
        mean = torch.nanmean(groups, dim=1).repeat_interleave(g)
        if scale == "batch":
            std = _nanstd(rewards).expand(n)
        else:  # "group", and "none" (std only used to count zero-std groups)
            std = _nanstd(groups, dim=1).repeat_interleave(g)
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


# --- DPO -------------------------------------------------------------------------------------------------------------


class DPOOutput(NamedTuple):
    """Result of :func:`dpo_loss`. The first two fields are ``loss, logits``; gradients come from autograd."""

    loss: torch.Tensor  #: 0-d: sum_k loss_weights[k] * mean over pairs of loss type k
    logits: torch.Tensor  #: beta * (policy gap - reference gap), shape (P,)
    #: implicit reward beta * (pi_c - ref_c), detached (as TRL logs it)
    chosen_rewards: torch.Tensor
    rejected_rewards: torch.Tensor  #: implicit reward beta * (pi_r - ref_r), detached
    losses: torch.Tensor | None = (
        None  #: per-pair loss sum_k w_k l_k, shape (P,) (aot*: sorted order)
    )
    logps_chosen: torch.Tensor | None = None  #: 0-d mean of policy_chosen (detached)
    logps_rejected: torch.Tensor | None = (
        None  #: 0-d mean of policy_rejected (detached)
    )

    @property
    def metrics(self) -> dict:
        """TRL's logged names as 0-d tensors: ``rewards/chosen``, ``rewards/rejected``, ``rewards/accuracies``,
        ``rewards/margins``, ``logps/chosen``, ``logps/rejected``."""
        c, r = self.chosen_rewards, self.rejected_rewards
        out = {
            "rewards/chosen": c.mean(),
            "rewards/rejected": r.mean(),
            "rewards/accuracies": (c > r).to(c.dtype).mean(),
            "rewards/margins": (c - r).mean(),
        }
        if self.logps_chosen is not None:
            out["logps/chosen"] = self.logps_chosen
            out["logps/rejected"] = self.logps_rejected
        return out


def _dpo_pair_losses(loss_type, pc, pr, rc, rr, o: DPOOptions, lc, lr):
    """Per-pair (or per sorted position, for aot*) losses of one TRL 1.16.0 DPO loss type, as TRL writes them;
    formulas in :func:`dpo_grpo.trl_exact.dpo.dpo_pair_losses`."""
    b, s = o.beta, o.label_smoothing
    uc, ur = pc - rc, pr - rr
    z = b * (uc - ur)
    ls = F.logsigmoid
    if loss_type == "sigmoid":
        return -ls(z)
    if loss_type == "hinge":
        return torch.relu(1.0 - z)
    if loss_type == "robust":
        return (-(1 - s) * ls(z) + s * ls(-z)) / (1 - 2 * s)
    if loss_type in ("ipo", "sigmoid_norm"):
        d = uc / lc - ur / lr
        return (d - 1 / (2 * b)) ** 2 if loss_type == "ipo" else -ls(b * d)
    if loss_type == "exo_pair":
        log_pw, log_pl = o.exo_log_p  # float32 values, as TRL's float32 logs
        return torch.sigmoid(z) * (ls(z) - log_pw) + torch.sigmoid(-z) * (
            ls(-z) - log_pl
        )
    if loss_type == "nca_pair":
        return -ls(b * uc) - 0.5 * ls(-b * uc) - 0.5 * ls(-b * ur)
    if loss_type == "bco_pair":
        return -ls(b * uc) - ls(-b * ur)
    if loss_type == "sppo_hard":
        return (uc - 0.5 / b) ** 2 + (ur + 0.5 / b) ** 2
    if loss_type in ("aot", "aot_unpaired"):
        x, y = (pc - pr, rc - rr) if loss_type == "aot" else (uc, ur)
        zs = b * (torch.sort(x, stable=True).values - torch.sort(y, stable=True).values)
        return -ls(zs) * (1 - s) - ls(-zs) * s
    if loss_type == "apo_zero":
        return 1 - torch.sigmoid(b * uc) + torch.sigmoid(b * ur)
    if loss_type == "apo_down":
        return torch.sigmoid(b * uc) + 1 - torch.sigmoid(z)
    if loss_type == "discopop":
        g = torch.sigmoid(z / o.discopop_tau)
        return -ls(z) * (1 - g) + torch.exp(-z) * g
    return (-pc.sum() / lc.sum()).expand(pc.shape)  # sft


def dpo_loss(
    policy_chosen,
    policy_rejected,
    ref_chosen,
    ref_rejected,
    beta=0.1,
    *,
    loss_type="sigmoid",
    label_smoothing=0.0,
    loss_weights=None,
    discopop_tau=0.05,
    chosen_lengths=None,
    rejected_lengths=None,
    validate=True,
) -> DPOOutput:
    """DPO loss on sequence log-probs (all of one shape, e.g. (P,)), every TRL 1.16.0 ``DPOConfig.loss_type``.

    Same options, checks and results as :func:`dpo_grpo.dpo_loss` (a name or a list of names with
    ``loss_weights``; ``label_smoothing``, ``discopop_tau``; ``chosen_lengths``/``rejected_lengths`` for ``ipo``,
    ``sigmoid_norm``, ``sft``), differentiated by autograd. ``validate`` runs the finiteness check (one sync).
    The reference log-probs and the token counts are treated as fixed data (detached).
    """
    pc = _tensor(policy_chosen, "policy_chosen")
    pr = _tensor(policy_rejected, "policy_rejected", like=pc)
    rc = _tensor(ref_chosen, "ref_chosen", like=pc)
    rr = _tensor(ref_rejected, "ref_rejected", like=pc)
    _same_shape("policy_chosen", pc, policy_rejected=pr, ref_chosen=rc, ref_rejected=rr)
    o = dpo_options(beta, loss_type, loss_weights, label_smoothing, discopop_tau)
    need = dict(zip(("chosen_lengths", "rejected_lengths"), o.needs_lengths))
    lengths = {}
    for name, x in (
        ("chosen_lengths", chosen_lengths),
        ("rejected_lengths", rejected_lengths),
    ):
        if x is None:
            if need[name]:
                raise ValueError(
                    f"{name} is required for loss_type={loss_type!r} (it divides by the completion "
                    "token counts)"
                )
            lengths[name] = None
            continue
        if not need[name]:
            raise ValueError(
                f"{name} has no effect for loss_type={loss_type!r} (only ipo, sigmoid_norm and sft "
                "read token counts; sft reads chosen_lengths only)"
            )
        t = _tensor(x, name, floating=False).to(device=pc.device)
        if t.shape != pc.shape:
            raise ValueError(
                f"{name} must have shape {tuple(pc.shape)} (one token count per pair), "
                f"got {tuple(t.shape)}"
            )
        lengths[name] = t
    if v.boolean(validate, "validate"):
        bad = torch.stack([~torch.isfinite(t).all() for t in (pc, pr, rc, rr)]).tolist()
        for flag, name in zip(
            bad, ("policy_chosen", "policy_rejected", "ref_chosen", "ref_rejected")
        ):
            if flag:
                raise ValueError(
                    f"{name} must contain only finite values (found NaN or inf)"
                )
        for name, t in lengths.items():
            if t is not None and not bool(((t >= 1) & (t == torch.round(t))).all()):
                raise ValueError(f"{name} must hold whole token counts >= 1")
    cdt = _compute_dtype(pc.dtype)
    pc, pr = pc.to(cdt), pr.to(cdt)
    rc, rr = rc.detach().to(cdt), rr.detach().to(cdt)
    lc, lr = (None if t is None else t.detach().to(cdt) for t in lengths.values())
    losses = sum(
        w * _dpo_pair_losses(t, pc, pr, rc, rr, o, lc, lr)
        for t, w in zip(o.loss_types, o.loss_weights)
    )
    loss = losses.mean()  # = sum_k w_k mean(losses_k), as TRL adds the weighted means
    logits = o.beta * ((pc - pr) - (rc - rr))
    with torch.no_grad():
        chosen_rewards = o.beta * (pc - rc)
        rejected_rewards = o.beta * (pr - rr)
    return DPOOutput(
        loss=loss,
        logits=logits,
        chosen_rewards=chosen_rewards,
        rejected_rewards=rejected_rewards,
        losses=losses.detach(),
        logps_chosen=pc.detach().mean(),
        logps_rejected=pr.detach().mean(),
    )
