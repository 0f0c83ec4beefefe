"""dpo_grpo.torch_ops.logprobs: selective_log_softmax vs the naive log-softmax (values,
gradients, low precision, memory) and saved_tensor_bytes; CUDA checks when a GPU is
present."""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import dpo_grpo as dg  # noqa: E402
from dpo_grpo import torch_ops as T  # noqa: E402

from torch_support import tensor, to_numpy, F64, TIGHT, cuda, needs_cuda  # noqa: E402


def _reward_tables():
    rng = np.random.default_rng(7)
    base = rng.normal(size=(12, 3))
    nan_entries = base.copy()
    nan_entries[[0, 4, 5, 9], [1, 0, 2, 2]] = np.nan
    unscorable = nan_entries.copy()
    unscorable[2] = np.nan  # a row no function could score
    unscorable[6:8] = np.nan  # ... and a group with only 2 of 4 scorable
    one_valid = base.copy()
    # a group with a single scorable row (std NaN -> advantage 0)
    one_valid[8:11] = np.nan
    constant = base.copy()
    constant[0:4] = 0.5  # zero-std group
    return {
        "plain": base,
        "nan_entries": nan_entries,
        "unscorable": unscorable,
        "one_valid": one_valid,
        "constant": constant,
        "single_func": base[:, :1],
    }


# --------------------------------------------------------------------------------------
# selective_log_softmax
# --------------------------------------------------------------------------------------


def _naive(logits, ids):
    return torch.log_softmax(logits, dim=-1).gather(-1, ids[..., None])[..., 0]


def _compare_with_naive(
    logits, ids, chunk_size=None, weights=None, tol=TIGHT, inplace=False
):
    if weights is None:  # seeded: a failure reproduces
        weights = torch.randn(
            ids.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64
        )
    a = logits.detach().clone().requires_grad_()
    b = logits.detach().clone().requires_grad_()
    ours = T.selective_log_softmax(a, ids, chunk_size, inplace_backward=inplace)
    naive = _naive(b.to(ours.dtype), ids)
    np.testing.assert_allclose(to_numpy(ours), to_numpy(naive), **tol)
    (ours * weights.to(ours.dtype)).sum().backward()
    (naive * weights.to(naive.dtype)).sum().backward()
    assert a.grad.dtype == logits.dtype
    np.testing.assert_allclose(to_numpy(a.grad), to_numpy(b.grad), **tol)
    if inplace:
        # the gradient was written into the logits' own storage: no new vocabulary-sized
        # buffer
        assert a.grad.data_ptr() == a.data_ptr()
    return ours


@pytest.mark.parametrize("inplace", [False, True], ids=["new-grad", "inplace"])
@pytest.mark.parametrize("chunk_size", [None, 1, 3, 7, 1000])
def test_selective_log_softmax_matches_naive(chunk_size, inplace):
    g = torch.Generator().manual_seed(0)
    # 21 rows: no chunk size in the list divides it
    logits = torch.randn(3, 7, 37, generator=g, dtype=F64) * 4
    ids = torch.randint(0, 37, (3, 7), generator=g)
    _compare_with_naive(logits, ids, chunk_size, inplace=inplace)


@pytest.mark.parametrize("dtype", [F64, torch.bfloat16], ids=str)
def test_selective_log_softmax_inplace_backward_through_lm_head(dtype):
    """The intended use: logits = hidden @ W.T, consumed only by the log-probs.
    Gradients to the hidden states and the weights equal the naive path's; a second
    consumer that saved the logits either ran its backward first (then all is exact) or
    gets autograd's in-place error, never a silently wrong gradient."""
    g = torch.Generator().manual_seed(5)
    hidden = torch.randn(2, 6, 8, generator=g, dtype=F64)
    weight = torch.randn(40, 8, generator=g, dtype=F64)
    ids, w = (
        torch.randint(0, 40, (2, 6), generator=g),
        torch.randn(2, 6, generator=g, dtype=F64),
    )

    def grads(fn, extra=None):
        h, wt = hidden.to(dtype).requires_grad_(), weight.to(dtype).requires_grad_()
        logits = h @ wt.T
        loss = (fn(logits, ids).double() * w).sum()
        if extra is not None:
            loss = loss + extra(logits)
        loss.backward()
        return to_numpy(h.grad), to_numpy(wt.grad)

    tol = TIGHT if dtype == F64 else dict(rtol=2**-6, atol=2e-2)
    inplace = lambda x, i: T.selective_log_softmax(x, i, 5, inplace_backward=True)  # noqa: E731
    for got, want in zip(grads(inplace), grads(_naive)):
        np.testing.assert_allclose(got, want, **tol)
    square = lambda x: (x.double() ** 2).sum() * 1e-3  # noqa: E731  (created after: its backward runs first)
    for got, want in zip(grads(inplace, square), grads(_naive, square)):
        np.testing.assert_allclose(got, want, **tol)
    h = hidden.clone().requires_grad_()
    logits = h @ weight.T
    # saved the logits before the log-probs were taken: its backward runs last
    earlier = (logits**2).sum()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        (
            earlier + T.selective_log_softmax(logits, ids, inplace_backward=True).sum()
        ).backward()


def test_selective_log_softmax_ragged_mask_noncontiguous_and_shapes():
    g = torch.Generator().manual_seed(1)
    full = torch.randn(4, 9, 50, generator=g, dtype=F64)
    ids = torch.randint(0, 50, (4, 8), generator=g)
    lengths = torch.tensor([8, 3, 1, 5])
    mask = (torch.arange(8)[None] < lengths[:, None]).to(F64)
    # the usual logits[:, :-1]: not viewable as (B*T, V), handled without a copy
    sliced = full[:, :-1]
    assert not sliced.is_contiguous()
    # padded positions get zero gradient
    _compare_with_naive(sliced, ids, chunk_size=3, weights=mask)
    # 2-D logits
    _compare_with_naive(full[0, :, :], torch.randint(0, 50, (9,), generator=g))
    _compare_with_naive(
        full.reshape(2, 2, 9, 50),
        torch.randint(0, 50, (2, 2, 9), generator=g),
        chunk_size=5,
    )
    extreme = full.clone()
    extreme[0, 0, 0] = 1e4  # logsumexp must not overflow
    _compare_with_naive(
        extreme, torch.randint(0, 50, (4, 9), generator=g), chunk_size=4
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_selective_log_softmax_low_precision(dtype):
    g = torch.Generator().manual_seed(2)
    logits = (torch.randn(2, 33, 1000, generator=g) * 3).to(dtype)
    ids = torch.randint(0, 1000, (2, 33), generator=g)
    ours = T.selective_log_softmax(logits, ids, chunk_size=8)
    assert ours.dtype == torch.float32  # bf16 logits are reduced in float32
    exact = _naive(logits.double(), ids)
    np.testing.assert_allclose(to_numpy(ours), to_numpy(exact), rtol=0, atol=1e-5)
    if dtype == torch.float32:
        _compare_with_naive(logits, ids, chunk_size=8, tol=dict(rtol=1e-5, atol=1e-6))
    else:
        a = logits.clone().requires_grad_()
        T.selective_log_softmax(a, ids, 8).sum().backward()
        b = logits.double().requires_grad_()
        _naive(b, ids).sum().backward()
        np.testing.assert_allclose(
            to_numpy(a.grad), to_numpy(b.grad), rtol=2**-7, atol=1e-3
        )


def test_selective_log_softmax_saves_no_vocabulary_sized_tensor():
    """Autograd keeps only the logits themselves (the input) and O(B T) tensors, unlike
    log_softmax + gather."""
    logits = torch.randn(4, 16, 300, requires_grad=True)
    ids = torch.randint(0, 300, (4, 16))
    full, ids_bytes = (
        logits.numel() * logits.element_size(),
        ids.numel() * ids.element_size(),
    )
    # naive: the log-softmax output, saved by log_softmax and again by gather (one
    # storage), and the ids
    assert T.saved_tensor_bytes(_naive, logits, ids, exclude=logits) == full + ids_bytes
    assert (
        T.saved_tensor_bytes(T.selective_log_softmax, logits, ids, exclude=logits)
        == ids_bytes
    )
    # log_softmax keeps its output, not its input; selective_log_softmax keeps its
    # input, the logits
    assert T.saved_tensor_bytes(_naive, logits, ids) == full + ids_bytes
    assert (
        T.saved_tensor_bytes(T.selective_log_softmax, logits, ids) == full + ids_bytes
    )


def test_saved_tensor_bytes_counts_a_shared_storage_once_and_checks_its_arguments():
    x = torch.randn(1000, requires_grad=True)
    # mul saves x twice: one storage
    assert T.saved_tensor_bytes(lambda t: (t * t).sum(), x) == x.numel() * 4
    assert T.saved_tensor_bytes(lambda t: (t * t).sum(), x, exclude=[x]) == 0
    # exp saves its output
    assert T.saved_tensor_bytes(lambda t: t.exp(), x, exclude=x) == 4000
    with pytest.raises(TypeError, match="fn"):
        T.saved_tensor_bytes(None, x)
    with pytest.raises(TypeError, match="exclude"):
        T.saved_tensor_bytes(torch.exp, x, exclude=[1.0])


def test_selective_log_softmax_validation():
    logits, ids = torch.randn(2, 3, 5), torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(TypeError, match="token_ids"):
        T.selective_log_softmax(logits, ids.float())
    with pytest.raises(TypeError, match="logits"):
        T.selective_log_softmax(logits.long(), ids)
    with pytest.raises(ValueError, match="shape"):
        T.selective_log_softmax(logits, ids[:, :2])
    with pytest.raises(ValueError, match=r"\[0, 5\)"):
        T.selective_log_softmax(logits, ids + 5)
    with pytest.raises(ValueError, match="chunk_size"):
        T.selective_log_softmax(logits, ids, chunk_size=0)
    with pytest.raises(TypeError, match="inplace_backward must be a bool"):
        T.selective_log_softmax(logits, ids, inplace_backward=1)
    assert T.selective_log_softmax(
        torch.randn(0, 4, 5), torch.zeros(0, 4, dtype=torch.long)
    ).shape == (0, 4)


@settings(max_examples=25, deadline=None)
@given(
    b=st.integers(1, 4),
    t=st.integers(1, 12),
    v=st.integers(1, 40),
    chunk=st.one_of(st.none(), st.integers(1, 9)),
    seed=st.integers(0, 10_000),
)
def test_selective_log_softmax_property(b, t, v, chunk, seed):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(b, t, v, generator=g, dtype=F64) * 5
    ids = torch.randint(0, v, (b, t), generator=g)
    out = _compare_with_naive(logits, ids, chunk)
    assert torch.all(out <= 0)


@cuda
@needs_cuda
def test_cuda_advantages_dpo_and_selective_log_softmax():
    dev = "cuda"
    rpf = _reward_tables()["unscorable"]
    out = T.reward_advantages(
        tensor(rpf, device=dev),
        4,
        reward_weights=[1.0, 0.5, -2.0],
        scale_rewards="batch",
    )
    np.testing.assert_allclose(
        to_numpy(out.advantages),
        dg.trl_exact.reward_advantages(
            rpf, 4, reward_weights=[1.0, 0.5, -2.0], scale_rewards="batch"
        ).advantages,
        **TIGHT,
    )
    x = [torch.randn(7, dtype=F64, device=dev) for _ in range(4)]
    np.testing.assert_allclose(
        T.dpo_loss(*x).loss.item(),
        dg.trl_exact.dpo_loss(*map(to_numpy, x)).loss,
        **TIGHT,
    )
    g = torch.Generator(device=dev).manual_seed(0)
    logits = torch.randn(2, 65, 3001, generator=g, device=dev, dtype=F64)
    ids = torch.randint(0, 3001, (2, 65), generator=g, device=dev)
    _compare_with_naive(
        logits, ids, chunk_size=16, weights=torch.randn(2, 65, dtype=F64, device=dev)
    )


@cuda
@needs_cuda
def test_cuda_selective_log_softmax_memory():
    """Peak extra memory of forward + backward (beyond the logits and their gradient) is
    a small fraction of log_softmax + gather's at V = 32000."""
    dev = "cuda"
    logits = torch.randn(4, 512, 32000, device=dev, requires_grad=True)
    ids = torch.randint(0, 32000, (4, 512), device=dev)

    def peak_extra(fn):
        logits.grad = None
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn(logits, ids).sum().backward()
        torch.cuda.synchronize()
        return (
            torch.cuda.max_memory_allocated()
            - base
            - logits.grad.numel() * logits.grad.element_size()
        )

    naive, ours = peak_extra(_naive), peak_extra(T.selective_log_softmax)
    assert ours <= naive / 8, (ours, naive)
    # in place, the gradient is the logits' own storage: the whole peak (gradient
    # included) is a chunk's
    logits.grad = None
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    T.selective_log_softmax(logits, ids, inplace_backward=True).sum().backward()
    torch.cuda.synchronize()
    naive_total = naive + logits.numel() * logits.element_size()
    assert torch.cuda.max_memory_allocated() - base <= naive_total / 8
    assert logits.grad.data_ptr() == logits.data_ptr()
