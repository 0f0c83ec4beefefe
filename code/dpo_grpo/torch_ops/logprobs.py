"""Per-token log-probs ``log softmax(logits)[token]`` without materialising the (B, T,
V) log-softmax.

:func:`selective_log_softmax` works in chunks of rows (and, with
``inplace_backward=True``, writes the gradient into the logits' own storage);
:func:`saved_tensor_bytes` measures what autograd keeps for the backward.
"""

from __future__ import annotations

import torch

from .. import _validation as v
from .tensors import compute_dtype

# --- Per-token log-probs without the (B, T, V) log-softmax ----------------------------

#: Default chunk: about this many logits per chunk (rows = _CHUNK_ELEMENTS // V), at
#: most 1/16 of the rows. CPU: 2M (8 MiB of float32, cache-friendly: measured fastest);
#: CUDA: 16M (64 MiB), few kernel launches.
_CHUNK_ELEMENTS = {"cuda": 1 << 24, "cpu": 1 << 21}


def _default_chunk_rows(n_rows: int, vocab: int, device: torch.device) -> int:
    target = _CHUNK_ELEMENTS.get(device.type, 1 << 24)
    # at most 1/16 of the rows per chunk, so the temporaries stay well below the full
    # log-softmax
    return max(1, min(target // vocab, -(-n_rows // 16)))


def _chunks(x3: torch.Tensor, chunk_rows: int):
    """(b, t0, t1) blocks of at most ``chunk_rows`` positions of a (B', T', V) tensor;
    each block is a view."""
    for b in range(x3.shape[0]):
        for t0 in range(0, x3.shape[1], chunk_rows):
            yield b, t0, min(t0 + chunk_rows, x3.shape[1])


def _softmax_into(x, out):
    """``out[...] = softmax(x, -1)`` without a temporary (``aten::_softmax.out``; plain
    copy as a fallback)."""
    try:
        return torch.ops.aten._softmax.out(x, -1, False, out=out)
    except (
        RuntimeError,
        AttributeError,
    ):  # pragma: no cover - backends without the out= overload
        out.copy_(torch.softmax(x, -1))
        return out


class _SelectiveLogSoftmax(torch.autograd.Function):
    """``out[r] = log_softmax(x[r])[id_r]`` over the positions r of a (B', T', V)
    tensor, one chunk of positions at a time; backward writes
    ``dx[r] = g_r (onehot(id_r) - softmax(x[r]))`` chunk by chunk, recomputing the
    softmax. Autograd keeps only ``x`` (the caller's logits, not a copy) and the ids: no
    (B', T', V) temporary in either pass, only one chunk's. With ``inplace`` the
    backward writes ``dx`` into ``x``'s own storage and returns it, so not even the
    gradient is a new (B', T', V) buffer."""

    @staticmethod
    def forward(ctx, x3, ids, chunk_rows, inplace):
        acc = compute_dtype(x3.dtype)
        out = torch.empty(x3.shape[:2], dtype=acc, device=x3.device)
        for b, t0, t1 in _chunks(x3, chunk_rows):
            # one chunk, reduced in float32 for bf16
            logp = torch.log_softmax(x3[b, t0:t1], dim=-1, dtype=acc)
            out[b, t0:t1] = logp.gather(-1, ids[b, t0:t1, None])[:, 0]
        ctx.save_for_backward(x3, ids)
        ctx.chunk_rows, ctx.inplace = chunk_rows, inplace
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        x3, ids = ctx.saved_tensors
        acc = compute_dtype(x3.dtype)
        # in place: each chunk's softmax is computed before its logits are overwritten
        # by their gradient (writing into x bumps its version counter, so any other
        # backward that saved these logits raises, never misreads)
        grad = (
            x3.detach()
            if ctx.inplace
            else torch.empty(x3.shape, dtype=x3.dtype, device=x3.device)
        )
        g = grad_out.to(acc)
        for b, t0, t1 in _chunks(x3, ctx.chunk_rows):
            rows = (b, slice(t0, t1))
            if (
                acc != x3.dtype or ctx.inplace
            ):  # a chunk-sized softmax, then written into the gradient
                part = torch.softmax(x3[rows], dim=-1, dtype=acc)
            else:
                part = _softmax_into(x3[rows], grad[rows])
            part.mul_(-g[rows][:, None])  # -g softmax ...
            # ... + g at the selected token
            part.scatter_add_(1, ids[rows][:, None], g[rows][:, None])
            if acc != x3.dtype or ctx.inplace:
                grad[rows] = part
        return grad, None, None, None


def selective_log_softmax(
    logits, token_ids, chunk_size=None, *, validate=True, inplace_backward=False
):
    """``log_softmax(logits, -1).gather(-1, token_ids)`` without materialising the (...,
    V) log-softmax.

    Shapes: ``logits`` (B, T, V) (any leading dims), ``token_ids`` (B, T) integer -> (B,
    T) log-probs. Per position ``logp = logits[id] - logsumexp(logits)``, computed
    ``chunk_size`` positions at a time (a log-softmax of one chunk, then a gather); the
    backward pass recomputes the softmax chunk by chunk, so autograd keeps nothing
    vocabulary-sized but the logits themselves. Default ``chunk_size``: about 8 MiB of
    float32 logits per chunk on CPU (64 MiB on CUDA) and at most 1/16 of the positions.
    Half-precision logits are reduced in float32 and the result is float32. ``validate``
    checks that the ids lie in ``[0, V)`` (one sync).

    ``inplace_backward=True`` writes the gradient of the logits into the logits' own
    storage (as Liger-Kernel's cross-entropy does): the backward then allocates nothing
    vocabulary-sized at all, and afterwards the logits tensor holds its gradient. Use it
    when nothing else needs the logits after the backward, as for the ``lm_head`` output
    of a policy (whose own backward needs the hidden states and weights, not the
    logits). If another backward saved the same logits, it raises autograd's "modified
    by an inplace operation" error instead of reading the overwritten values.
    """
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        got = getattr(logits, "dtype", type(logits).__name__)
        raise TypeError(f"logits must be a floating-point tensor, got {got}")
    if (
        not isinstance(token_ids, torch.Tensor)
        or token_ids.is_floating_point()
        or token_ids.is_complex()
        or token_ids.dtype == torch.bool
    ):
        raise TypeError(
            f"token_ids must be an integer tensor, got "
            f"{getattr(token_ids, 'dtype', type(token_ids).__name__)}"
        )
    if logits.dim() < 1 or logits.shape[-1] == 0:
        raise ValueError(
            "logits must have a non-empty last (vocabulary) dimension, got "
            f"{tuple(logits.shape)}"
        )
    if token_ids.shape != logits.shape[:-1]:
        raise ValueError(
            "token_ids must have shape logits.shape[:-1] = "
            f"{tuple(logits.shape[:-1])}, got {tuple(token_ids.shape)}"
        )
    if token_ids.device != logits.device:
        raise ValueError(
            f"token_ids must be on the device of logits ({logits.device}), got "
            f"{token_ids.device}"
        )
    vocab = logits.shape[-1]
    n_rows = token_ids.numel()
    if chunk_size is None:
        chunk_rows = _default_chunk_rows(n_rows, vocab, logits.device)
    else:
        chunk_rows = v.integer(chunk_size, "chunk_size", minimum=1)
    if (
        v.boolean(validate, "validate")
        and n_rows
        and not bool(((token_ids >= 0) & (token_ids < vocab)).all())
    ):
        raise ValueError(f"token_ids must lie in [0, {vocab})")
    if n_rows == 0:
        return logits.new_zeros(token_ids.shape, dtype=compute_dtype(logits.dtype))
    try:  # all positions as one (1, N, V) view ...
        x3 = logits.view(1, n_rows, vocab)
    except (
        RuntimeError
    ):  # ... or, e.g. for logits[:, :-1], per leading index without copying the logits
        x3 = logits if logits.dim() == 3 else logits.reshape(1, n_rows, vocab)
    ids = token_ids.reshape(x3.shape[:2]).long()
    if not isinstance(inplace_backward, bool):
        raise TypeError(
            f"inplace_backward must be a bool, got {type(inplace_backward).__name__}"
        )
    return _SelectiveLogSoftmax.apply(x3, ids, chunk_rows, inplace_backward).reshape(
        token_ids.shape
    )


def saved_tensor_bytes(fn, *args, exclude=()) -> int:
    """Bytes that autograd saves for the backward while ``fn(*args)`` runs, each storage
    counted once.

    Saved-tensor hooks see every tensor a backward node keeps; two nodes often keep the
    same one (``log_softmax`` saves its output, the ``gather`` after it saves that
    output again as its input), so tensors are deduplicated by their storage. Storages
    of the tensors in ``exclude`` (e.g. the logits, which the caller holds anyway) are
    not counted. Returns an int; the graph is built and dropped, nothing is
    backpropagated.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if isinstance(exclude, torch.Tensor):
        exclude = (exclude,)
    exclude = v.sequence(exclude, "exclude")
    if not all(isinstance(t, torch.Tensor) for t in exclude):
        raise TypeError("exclude must be a tensor or a sequence of tensors")
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    storages = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in skip:
            storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*args)
    del out
    return sum(storages.values())
