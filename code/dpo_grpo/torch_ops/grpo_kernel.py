"""The fused GRPO kernel of :func:`dpo_grpo.torch_ops.grpo_loss` (clipped loss types):
loss, per-token outputs, metrics and the analytic gradient in one pass over the inputs,
handed to autograd; cache-blocked on CPU, one block (or one ``torch.compile`` kernel) on
GPU.

Also the pieces the autograd path shares: :func:`token_weight` (TRL's normaliser) and
:func:`maybe_compiled`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from ..trl_exact.grpo import GRPOOptions, unimplemented
from .tensors import scalar_like


def token_weight(o: GRPOOptions, n_b, n_all, n_items, bsz):
    """The per-token weight ``w`` with ``loss = sum(w * mask * l)``: (B, 1) for
    ``grpo``, 0-d otherwise."""
    accumulation_steps = o.gradient_accumulation_steps
    if o.loss_type in ("grpo", "sapo"):
        return (1.0 / (bsz * accumulation_steps)) / n_b[:, None]
    if o.loss_type == "bnpo":
        return (1.0 / accumulation_steps) / n_all
    if o.loss_type == "dr_grpo":
        return scalar_like(1.0 / (bsz * o.max_len * accumulation_steps), n_all)
    if o.loss_type == "luspo":
        return scalar_like(1.0 / (bsz * accumulation_steps), n_all)
    if o.loss_type in ("dapo", "cispo", "vespo"):
        items_per_process = n_items.clamp(min=1.0) / o.num_processes
        return 1.0 / (items_per_process * accumulation_steps / o.steps_per_generation)
    raise unimplemented(o.loss_type, "normaliser")


_COMPILED: dict = {}
#: Kernels dynamo may keep per function. Its default (8) counts every set of options,
#: dtype and device, and with ``fullgraph=True`` the ninth is an error, not a fallback:
#: seen on a GPU when one process ran the loss on CUDA and then on the CPU. Raised only
#: while the loss runs, not for the caller's own compiled code.
RECOMPILE_LIMIT = 64


def maybe_compiled(fn, compile: bool):
    """``fn``, or its ``torch.compile`` (one per function, kept for the process: dynamo
    caches a kernel per set of options, dtype and device, up to RECOMPILE_LIMIT,
    compiled for dynamic shapes, so a new batch or completion length reuses it)."""
    if not compile:
        return fn
    if fn not in _COMPILED:
        compiled = torch.compile(fn, fullgraph=True, dynamic=True)

        def call(*args, _compiled=compiled):
            try:
                with torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT):
                    return _compiled(*args)
            except (
                torch._dynamo.exc.BackendCompilerFailed
            ) as exc:  # e.g. no working C++ compiler on a CPU
                raise RuntimeError(
                    "compile=True: torch.compile could not build the loss kernel (on "
                    "a CPU it needs a C++ compiler such as g++); pass compile=False "
                    f"to run the eager loss. Cause: {str(exc)[:300]}"
                ) from exc

        _COMPILED[fn] = call
    return _COMPILED[fn]


class _AttachGrad(torch.autograd.Function):
    """Returns ``loss`` (computed without autograd) as a function of ``new`` whose
    gradient is ``weight * grad`` (``weight``: (B, 1) or 0-d; one fused multiply in the
    backward, which has to write the gradient anyway)."""

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

#: Rows per block of the fused GRPO loss on CPU: about this many elements per block, so
#: that the ~10 block-sized temporaries stay in cache (measured ~2x faster than
#: whole-tensor passes at 512 x 4096); one block on CUDA.
_GRPO_BLOCK_ELEMENTS = 1 << 19


def _select_(x, int_mask):
    """``torch.where(mask, x, 0)``, in place, as a bitwise AND of ``x``'s bits with an
    all-ones / all-zeros integer mask: bit-identical to ``torch.where`` (NaN and inf are
    dropped too) and several times faster on CPU eager. A boolean ``int_mask`` (the
    functional form, for torch.compile) selects with ``torch.where``."""
    if int_mask.dtype == torch.bool:
        return torch.where(int_mask, x, 0.0)
    x.view(int_mask.dtype).bitwise_and_(int_mask)
    return x


class _BlockConfig(NamedTuple):
    o: GRPOOptions
    dt: torch.dtype
    int_dtype: torch.dtype
    one: torch.Tensor
    one_sided: bool
    high_counts: bool
    per_seq: bool
    need_grad: bool
    has_ref: bool


def _grpo_block(
    cfg, out, new, old, ref, mask, adv, neg_adv, lower, upper, sign_a
) -> dict:
    """One block of rows of :func:`_grpo_fused`. ``out``: dict of preallocated views to
    write into (eager, CPU cache blocking), or None for the functional form
    (torch.compile). Returns the block's tensors by name; its ``grad`` is
    ``d loss / d new`` divided by the token weight ``w`` (the backward multiplies by
    ``w``), so the block needs no token counts before it starts: it counts its own
    (``n_raw``) in the same pass."""
    o = cfg.o

    def buf(name):
        return None if out is None else out[name]

    def into(name, value):  # a per-row result: copied into its buffer, or as is
        return value if out is None else out[name].copy_(value)

    if out is None:
        # functional form: plain selects, which inductor vectorises (the bit trick it
        # does not)
        m = mask if mask.dtype == cfg.dt else mask.to(cfg.dt)
        select_mask = mask.bool()
    else:
        # one read of the caller's mask (often int64); the float mask is converted from
        # the cached int one; negated, the int one is all ones (keep) or zeros (drop)
        select_mask = out["int_mask"].copy_(mask)
        m = mask if out["float_mask"] is None else out["float_mask"].copy_(select_mask)
        select_mask.neg_()
    n_raw = torch.sum(m, 1, out=buf("n_raw"))  # valid tokens per row
    log_ratio = _select_(torch.sub(new, old, out=buf("log_ratio")), select_mask)
    tokens_per_row = None
    if o.token_level:
        rho = torch.exp(log_ratio, out=buf("ratio"))  # (b, T), exactly 1 on padding
        ratio = rho
    else:
        # TRL clamps the token counts at 1
        tokens_per_row = n_raw.clamp(min=1.0)[:, None]
        rho = (log_ratio.sum(1, keepdim=True) / tokens_per_row).exp_()  # (b, 1)
        ratio = torch.where(mask.bool(), rho, cfg.one, out=buf("ratio"))
    res = {"n_raw": n_raw, "ratio": ratio}
    if cfg.per_seq:
        clamped = torch.maximum(torch.minimum(rho, upper), lower)
        clip_sign = torch.sub(clamped, rho).sign_()
    else:
        clamped = torch.minimum(rho, upper, out=buf("clamped"))
        clamped = torch.maximum(
            clamped, lower, out=clamped if out is not None else None
        )
        clip_sign = torch.sub(clamped, rho, out=buf("clip_sign")).sign_()
    unclipped = None
    if cfg.one_sided:
        # (number of low-clipped tokens) - (number of high-clipped tokens)
        low_minus_high = clip_sign.sum(1)
        res["low"] = torch.clamp(low_minus_high, min=0, out=buf("low"))
        res["high"] = torch.clamp(-low_minus_high, min=0, out=buf("high"))
        if cfg.need_grad:  # = mask * (1 - |clip_sign|)
            unclipped = torch.addcmul(m, clip_sign, sign_a, out=buf("unclipped"))
    else:
        res["low"] = into("low", (clip_sign > 0).sum(1).to(cfg.dt))
        res["high"] = into(
            "high",
            (
                ((clip_sign < 0) & (adv > 0)).sum(1)
                if cfg.high_counts
                else clip_sign.new_zeros(clip_sign.shape[0])
            ).to(cfg.dt),
        )
        if cfg.per_seq:
            unclipped = 1.0 - clip_sign.abs()
        else:  # padding: clip_sign = 0 and m = 0
            unclipped = torch.sub(
                m, torch.abs(clip_sign, out=buf("unclipped")), out=buf("unclipped")
            )
    if cfg.per_seq:
        per_token_loss = torch.mul(m, clamped * neg_adv, out=buf("per_token_loss"))
    else:
        per_token_loss = torch.mul(clamped, neg_adv, out=buf("per_token_loss"))
        per_token_loss.mul_(m)
    expm1_gap = gap = kl_b = None
    if cfg.has_ref:
        # log(pi_ref / pi), 0 on padding (in the log_ratio workspace, now free)
        gap = _select_(torch.sub(ref, new, out=buf("log_ratio")), select_mask)
        expm1_gap = torch.expm1(gap, out=buf("expm1_gap"))
        kl_b = torch.sub(expm1_gap, gap, out=buf("kl"))  # k3, 0 on padding
        if o.bias_kl:
            kl_b.mul_(rho)
        res["row_kl"] = torch.sum(kl_b, 1, out=buf("row_kl"))
        if o.beta != 0:
            per_token_loss.add_(kl_b, alpha=o.beta)
    else:
        res["row_kl"] = into("row_kl", per_token_loss.new_zeros(len(per_token_loss)))
    res.update(
        kl=kl_b,
        per_token_loss=per_token_loss,
        row_loss=torch.sum(per_token_loss, 1, out=buf("row_loss")),
        grad=None,
    )
    if cfg.need_grad:
        # d l / d new, l the per-token loss (w-weighted sums come in the backward)
        if o.token_level:
            grad = torch.mul(unclipped, rho, out=buf("grad")).mul_(neg_adv)
        else:
            if cfg.per_seq:  # the same d l / d log_w at each of the n_b valid tokens
                d_log_w = unclipped * rho * neg_adv * tokens_per_row
            else:
                d_log_w = torch.mul(unclipped, rho, out=buf("clamped"))  # free now
                d_log_w = d_log_w.mul_(neg_adv).sum(1, keepdim=True)
            if o.beta != 0 and o.bias_kl:  # k3 * rho, rho = exp(log_w)
                d_log_w = d_log_w + o.beta * res["row_kl"][:, None]
            grad = torch.mul(m, d_log_w / tokens_per_row, out=buf("grad"))
        if cfg.has_ref and o.beta != 0:
            if not o.bias_kl:
                # d k3 / d new = -expm1(ref - new)
                grad.add_(expm1_gap, alpha=-o.beta)
            elif o.token_level:
                # d (k3 rho) / d new = -rho gap
                rho_gap = torch.mul(rho, gap, out=buf("clip_sign"))  # free now
                grad.add_(rho_gap, alpha=-o.beta)
            else:
                grad.addcmul_(expm1_gap, rho, value=-o.beta)
        res["grad"] = grad
    return res


_ROW_STATS = ("n_raw", "row_loss", "row_kl", "low", "high")


def _grpo_fused(
    new,
    old,
    ref,
    a,
    mask,
    n_items,
    o: GRPOOptions,
    need_grad: bool,
    per_token: bool = True,
    block_rows: int | None = None,
):
    """Loss, per-token outputs, metrics and the analytic gradient in one pass over the
    inputs (no autograd graph).

    With ``rho`` the importance weight and ``A`` the advantage, TRL's
    ``-min(min(rho, delta) A, clip(rho, lo, hi) A)`` equals ``-A clamp(rho, L, U)`` with
    ``(L, U) = (0, min(hi, delta))`` where ``A > 0``, ``(lo, max(hi, delta))`` where
    ``A < 0`` and ``(0, inf)`` where ``A = 0``. Its derivative w.r.t. ``log rho`` is
    ``-A rho h`` with ``h = 1 - |sign(clamp(rho) - rho)|`` (1 where the clamp is
    inactive, 0 where it is active), and ``sign(clamp(rho) - rho)`` is +1 exactly on
    TRL's low-clipped tokens and -1 on the high-clipped ones (when ``delta`` is None).
    Rows are processed in blocks that fit in cache (CPU); the float and the bit masks
    and the token counts are made per block from ``mask`` (any dtype, values 0/1).
    ``n_items``: 0-d tensor or None (the batch's token count). Returns
    ``(loss, grad / w, w, ratio, kl, per_token_loss, metrics)``, ``w`` the (B, 1) or 0-d
    token weight: ``d loss / d new = w * (grad / w)``. ``per_token=False``: ratio, kl
    and per_token_loss live only in block-sized workspaces and are returned as None (no
    (B, T) writes but the gradient).
    """
    bsz, width = new.shape
    dt = new.dtype
    lo, hi = 1.0 - o.eps_low, 1.0 + o.eps_high
    cap = math.inf if o.delta is None else o.delta
    high_counts = o.delta is None or o.delta > hi  # TRL counts min(rho, delta) > hi
    pos, neg = a > 0, a < 0
    lower = torch.where(neg, lo, scalar_like(0.0, new))
    if o.delta is None:  # the upper clip acts only where A > 0
        upper = torch.where(pos, hi, scalar_like(math.inf, new))
    else:
        upper = torch.where(
            pos,
            min(hi, cap),
            torch.where(neg, scalar_like(max(hi, cap), new), math.inf),
        )
    # the ratio on padding, for sequence-level weights
    one = None if o.token_level else scalar_like(1.0, new)
    a2d = a.shape[1] > 1
    # each row clips on one side only
    one_sided = o.token_level and not a2d and o.delta is None
    # exact in any float dtype
    sign_a = torch.where(pos, 1.0, -1.0) if one_sided else None
    neg_adv = -a  # d (policy term) / d (clamped ratio)
    int_dtype = _INT_VIEW[dt]
    if block_rows is None:
        # one block on GPU and under torch.compile (whose fused kernels need no cache
        # blocking)
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
            cfg, None, new, old, ref, mask, a, neg_adv, lower, upper, sign_a
        )
        ratio, per_token_loss, kl, grad = (
            blk["ratio"],
            blk["per_token_loss"],
            blk["kl"],
            blk["grad"],
        )
        per_row = torch.stack([blk[k] for k in _ROW_STATS])
    else:
        # outputs returned together share one allocation (block-sized when not
        # returned); the gradient, kept for the backward, has its own
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
        # block-sized workspaces, reused by every block through out=: no allocation (on
        # CPU: no page faults); each is named for its first use in _grpo_block, which
        # reuses it once that value is dead
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
                    ("log_ratio", "clamped", "clip_sign", "unclipped", "expm1_gap"),
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
                take(neg_adv),
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
    weight = token_weight(o, n_b, n_all, n_all if n_items is None else n_items, bsz)
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


def fused_grpo_loss(
    new,
    new_c,
    old,
    ref,
    a,
    mask,
    n_items,
    o: GRPOOptions,
    per_token,
    block_rows,
    compile,
):
    """The loss by the fused kernel, differentiable in ``new`` (caller's dtype;
    ``new_c`` is it in the compute dtype, like ``old``, ``ref`` and ``a``):
    ``(loss, grad / w, ratio, kl, per_token_loss, metrics)``; ``grad / w`` is None when
    no gradient is needed."""
    need_grad = torch.is_grad_enabled() and new.requires_grad
    with torch.no_grad():
        loss, grad, weight, ratio, kl, per_token_loss, metrics = maybe_compiled(
            _grpo_fused, compile
        )(new_c, old, ref, a, mask, n_items, o, need_grad, per_token, block_rows)
    if need_grad:
        loss = _AttachGrad.apply(new, loss, grad, weight)
    return loss, grad, ratio, kl, per_token_loss, metrics
