"""dpo_grpo.torch_ops.grpo: parity with the NumPy reference (float64: 1e-12) for every
GRPO option, advantage and DPO variant, eager and compiled; float32/bfloat16 within
documented tolerances; padding garbage that cannot leak; the same input validation as
NumPy; the TRL 1.16.0 fixtures; selective_log_softmax vs
the naive log_softmax + gather (values, gradients, saved memory). CUDA tests are marked
``cuda`` and skipped without a GPU.

Documented tolerances (vs NumPy float64 on the same rounded inputs):
  float32 : loss rtol 1e-5; gradient rtol 1e-5 + atol 1e-5 * max|grad|
  bfloat16: computed in float32, so loss rtol 1e-5; the gradient is stored in bfloat16:
            rtol 2**-7 + atol 1e-3 * max|grad|
"""

from __future__ import annotations

import itertools
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import dpo_grpo as dg  # noqa: E402
from dpo_grpo import torch_ops as T  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
from testing_support import grpo_batch, grpo_case, trl_fixture  # noqa: E402
from torch_support import tensor, to_numpy, F64, TIGHT, cuda, needs_cuda  # noqa: E402


# --------------------------------------------------------------------------------------
# Import and device
# --------------------------------------------------------------------------------------


def test_dpo_grpo_imports_without_torch_and_torch_ops_explains_the_install():
    code = (
        "import sys\n"
        "sys.modules['torch'] = None  # make `import torch` fail\n"
        "import dpo_grpo\n"
        "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "try:\n"
        "    import dpo_grpo.torch_ops\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "else:\n"
        "    raise SystemExit('torch_ops imported without torch')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "pip install torch==2.13.0" in out.stdout and "Colab" in out.stdout


def test_default_device():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert T.default_device() == torch.device(expected)


# --------------------------------------------------------------------------------------
# GRPO loss: float64 parity with NumPy on every option
# --------------------------------------------------------------------------------------


GRID = [
    dict(
        loss_type=lt,
        importance_sampling_level=lvl,
        beta=beta,
        use_bias_correction_kl=bc,
        epsilon_high=eh,
    )
    for lt, lvl, beta, bc, eh in itertools.product(
        ("grpo", "bnpo", "dr_grpo", "dapo"),
        ("token", "sequence"),
        (0.0, 0.04),
        (False, True),
        (None, 0.28),
    )
]
EXTRA = [
    dict(delta=1.3),
    dict(delta=1.3, importance_sampling_level="sequence"),
    dict(delta=1.1, epsilon_high=0.28),
    dict(
        delta=1.1,
        epsilon_high=0.28,
        importance_sampling_level="sequence",
        use_bias_correction_kl=True,
    ),
    dict(loss_type="dr_grpo", max_completion_length=16),
    dict(gradient_accumulation_steps=2),
    dict(
        loss_type="dapo",
        num_items_in_batch=40,
        gradient_accumulation_steps=2,
        steps_per_generation=2,
        num_processes=2,
    ),
    dict(
        loss_type="dapo",
        num_items_in_batch=7,
        importance_sampling_level="sequence",
        beta=0.1,
    ),
    dict(
        loss_type="bnpo", gradient_accumulation_steps=3, epsilon=0.1, epsilon_high=0.0
    ),
]


def _ids(opts):
    return ",".join(f"{k}={v}" for k, v in opts.items()) or "defaults"


def _check_against_numpy(
    opts,
    *,
    adv_2d=False,
    seed=0,
    b=5,
    t=6,
    compile=False,
):
    new, old, ref, adv, mask = grpo_batch(seed, b, t, adv_2d)
    # also exercise ref_logps=None
    ref_arg = None if opts.get("beta", 0.04) == 0 and seed % 2 else ref
    expected = dg.trl_exact.grpo_loss(new, old, ref_arg, adv, mask, **opts)
    new_t = tensor(new).requires_grad_()
    out = T.grpo_loss(
        new_t,
        tensor(old),
        None if ref_arg is None else tensor(ref_arg),
        tensor(adv),
        tensor(mask),
        compile=compile,
        **opts,
    )
    out.loss.backward()
    assert out.loss.shape == () and out.loss.dtype == F64
    np.testing.assert_allclose(out.loss.item(), expected.loss, **TIGHT, err_msg="loss")
    np.testing.assert_allclose(
        to_numpy(new_t.grad),
        expected.grad,
        **TIGHT,
        err_msg="autograd vs analytic grad",
    )
    assert np.all(to_numpy(new_t.grad)[mask == 0] == 0.0), (
        "gradient must be exactly zero on padding"
    )
    _check_metrics(out, expected)
    np.testing.assert_allclose(
        to_numpy(out.ratio), expected.ratio, **TIGHT, err_msg="ratio"
    )
    np.testing.assert_allclose(
        to_numpy(out.per_token_loss),
        expected.per_token_loss,
        **TIGHT,
        err_msg="per_token_loss",
    )
    if expected.per_token_kl is None:
        assert out.per_token_kl is None
    else:
        np.testing.assert_allclose(
            to_numpy(out.per_token_kl),
            expected.per_token_kl,
            **TIGHT,
            err_msg="per_token_kl",
        )
    return out


def _check_metrics(out, expected):
    assert set(out.metrics) == set(expected.metrics)
    for name, value in expected.metrics.items():
        assert out.metrics[name].shape == ()
        np.testing.assert_allclose(
            out.metrics[name].item(), value, **TIGHT, err_msg=name
        )


@pytest.mark.parametrize("opts", GRID + EXTRA, ids=_ids)
@pytest.mark.parametrize("adv_2d", [False, True], ids=["adv(B,)", "adv(B,T)"])
def test_grpo_matches_numpy_float64(opts, adv_2d):
    _check_against_numpy(opts, adv_2d=adv_2d)
    _check_against_numpy(opts, adv_2d=adv_2d, seed=1)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    b=st.integers(1, 6),
    t=st.integers(1, 9),
    opts=st.sampled_from(GRID + EXTRA),
    adv_2d=st.booleans(),
)
def test_grpo_matches_numpy_property(seed, b, t, opts, adv_2d):
    if opts.get("loss_type") == "dr_grpo" and opts.get("max_completion_length", t) < t:
        opts = {k: v for k, v in opts.items() if k != "max_completion_length"}
    _check_against_numpy(
        opts,
        adv_2d=adv_2d,
        seed=seed,
        b=b,
        t=t,
    )


def test_num_items_in_batch_as_tensor_and_on_policy_old():
    new, old, ref, adv, mask = grpo_batch()
    expected = dg.trl_exact.grpo_loss(
        new, old, ref, adv, mask, loss_type="dapo", num_items_in_batch=40
    )
    out = T.grpo_loss(
        tensor(new),
        tensor(old),
        tensor(ref),
        tensor(adv),
        tensor(mask),
        loss_type="dapo",
        num_items_in_batch=torch.tensor(40),
    )
    np.testing.assert_allclose(out.loss.item(), expected.loss, **TIGHT)
    # old = new (TRL's on-policy shortcut): old is fixed data, so the gradient is still
    # the policy gradient
    new_t = tensor(new).requires_grad_()
    out = T.grpo_loss(new_t, new_t, tensor(ref), tensor(adv), tensor(mask))
    out.loss.backward()
    np.testing.assert_allclose(
        to_numpy(new_t.grad),
        dg.trl_exact.grpo_loss(new, new, ref, adv, mask).grad,
        **TIGHT,
    )
    assert (
        torch.all(out.ratio == 1.0)
        and out.metrics["clip_ratio/region_mean"].item() == 0.0
    )


# --------------------------------------------------------------------------------------
# GRPO loss: float32 / bfloat16, padding garbage
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "opts",
    [
        dict(),
        dict(importance_sampling_level="sequence", use_bias_correction_kl=True),
        dict(loss_type="dapo", delta=1.5, epsilon_high=0.28),
        dict(beta=0.0),
    ],
    ids=_ids,
)
def test_grpo_low_precision_within_documented_tolerance(dtype, opts):
    new, old, ref, adv, mask = grpo_batch(3, b=16, t=64)
    tensors = [tensor(x, dtype) for x in (new, old, ref, adv)]
    rounded = [to_numpy(x) for x in tensors]  # NumPy sees exactly the values torch sees
    expected = dg.trl_exact.grpo_loss(*rounded[:3], rounded[3], mask, **opts)
    new_t = tensors[0].clone().requires_grad_()
    out = T.grpo_loss(new_t, *tensors[1:], tensor(mask, dtype), **opts)
    out.loss.backward()
    assert out.loss.dtype == torch.float32 and new_t.grad.dtype == dtype
    np.testing.assert_allclose(out.loss.item(), expected.loss, rtol=1e-5, atol=1e-7)
    g, scale = to_numpy(new_t.grad), np.abs(expected.grad).max()
    rtol, atol = (
        (1e-5, 1e-5 * scale) if dtype == torch.float32 else (2**-7, 1e-3 * scale)
    )
    np.testing.assert_allclose(g, expected.grad, rtol=rtol, atol=atol)
    assert np.all(g[mask == 0] == 0)
    for name, value in expected.metrics.items():
        np.testing.assert_allclose(
            out.metrics[name].item(), value, rtol=1e-5, atol=1e-6, err_msg=name
        )


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_padding_garbage_cannot_leak(level):
    new, old, ref, adv, mask = grpo_batch(adv_2d=True)
    clean = T.grpo_loss(
        tensor(new),
        tensor(old),
        tensor(ref),
        tensor(adv),
        tensor(mask),
        importance_sampling_level=level,
        use_bias_correction_kl=True,
    )
    pad = mask == 0
    dirty = [x.copy() for x in (new, old, ref, adv)]
    for x, junk in zip(dirty, (np.nan, np.inf, -np.inf, np.nan)):
        x[pad] = junk
    dirty[0][pad & (np.arange(6) % 2 == 0)] = -np.inf
    new_t = tensor(dirty[0]).requires_grad_()
    out = T.grpo_loss(
        new_t,
        tensor(dirty[1]),
        tensor(dirty[2]),
        tensor(dirty[3]),
        tensor(mask),
        importance_sampling_level=level,
        use_bias_correction_kl=True,
    )
    out.loss.backward()
    assert torch.isfinite(out.loss) and torch.isfinite(new_t.grad).all()
    assert torch.all(new_t.grad[torch.as_tensor(pad)] == 0)
    np.testing.assert_allclose(out.loss.item(), clean.loss.item(), **TIGHT)
    for a, b in (
        (out.per_token_loss, clean.per_token_loss),
        (out.per_token_kl, clean.per_token_kl),
        (out.ratio, clean.ratio),
    ):
        assert torch.isfinite(a).all()
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), **TIGHT)


def test_bool_and_int_masks_and_array_likes():
    new, old, ref, adv, mask = grpo_batch()
    expected = dg.trl_exact.grpo_loss(new, old, ref, adv, mask).loss
    for m in (tensor(mask) > 0, tensor(mask).long(), mask.tolist()):
        assert (
            abs(
                T.grpo_loss(
                    tensor(new), tensor(old), tensor(ref), tensor(adv), m
                ).loss.item()
                - expected
            )
            < 1e-12
        )
    assert (
        abs(
            T.grpo_loss(tensor(new), old, ref.tolist(), adv, mask).loss.item()
            - expected
        )
        < 1e-12
    )


# --------------------------------------------------------------------------------------
# GRPO loss: validation (the NumPy reference's list; torch raises the same errors)
# --------------------------------------------------------------------------------------


def _ok():
    new, old, ref, adv, mask = grpo_batch()
    return dict(new_logps=new, old_logps=old, ref_logps=ref, advantages=adv, mask=mask)


def _as_torch(kwargs):
    return {
        k: (tensor(x) if isinstance(x, np.ndarray) else x) for k, x in kwargs.items()
    }


INVALID = [
    (dict(mask=np.zeros((5, 6))), "no valid token"),
    (dict(mask=np.full((5, 6), 2.0)), "only 0 and 1"),
    (dict(mask=np.ones((5, 5))), "mask must have shape"),
    (dict(old_logps=np.zeros((5, 5))), "old_logps must have the same shape"),
    (dict(ref_logps=np.zeros((5, 5))), "ref_logps must have the same shape"),
    (dict(advantages=np.zeros(4)), "advantages must have shape"),
    (dict(advantages=np.array([np.nan, 0, 0, 0, 0])), "advantages must be finite"),
    (dict(advantages=np.full((5, 6), np.inf)), "advantages must be finite"),
    (dict(new_logps=np.full((5, 6), np.nan)), "new_logps must be finite"),
    (dict(old_logps=np.full((5, 6), np.inf)), "old_logps must be finite"),
    (dict(ref_logps=np.full((5, 6), np.nan)), "ref_logps must be finite"),
    (dict(new_logps=np.zeros((0, 6))), "empty"),
    (dict(new_logps=np.zeros(6)), "2-D"),
    (dict(epsilon=0.0), "epsilon"),
    (dict(epsilon=1.0), "epsilon"),
    (dict(epsilon=math.nan), "epsilon"),
    (dict(epsilon_high=-0.1), "epsilon_high"),
    (dict(beta=-0.1), "beta"),
    (dict(ref_logps=None), "ref_logps may be None only when beta == 0"),
    (dict(loss_type="ppo"), "loss_type"),
    (dict(importance_sampling_level="batch"), "importance_sampling_level"),
    (dict(delta=0.9), "delta"),
    (dict(max_completion_length=3), "max_completion_length"),
    (dict(num_items_in_batch=0), "num_items_in_batch"),
    (dict(gradient_accumulation_steps=0), "gradient_accumulation_steps"),
    (dict(steps_per_generation=0), "steps_per_generation"),
    (dict(num_processes=0), "num_processes"),
    (dict(new_logps=np.full((5, 6), 800.0)), "overflow"),
]
TYPE_ERRORS = [
    (dict(use_bias_correction_kl="yes"), "use_bias_correction_kl"),
    (dict(gradient_accumulation_steps=1.5), "gradient_accumulation_steps"),
    (dict(beta="0.1"), "beta"),
    (dict(epsilon=True), "epsilon"),
    (dict(mask=None), "mask"),
    (dict(advantages="high"), "advantages"),
]


@pytest.mark.parametrize(
    "change, match",
    INVALID + TYPE_ERRORS,
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_invalid_inputs_raise_like_numpy(change, match):
    kwargs = _ok() | change
    with pytest.raises((ValueError, TypeError), match=match) as numpy_error:
        dg.trl_exact.grpo_loss(**kwargs)
    with pytest.raises(numpy_error.type, match=match):
        T.grpo_loss(**_as_torch(kwargs))


def test_torch_specific_validation():
    ok = _as_torch(_ok())
    with pytest.raises(TypeError, match="new_logps must be a floating-point tensor"):
        T.grpo_loss(**(ok | dict(new_logps=ok["new_logps"].long())))
    with pytest.raises(ValueError, match="same device"):
        T.grpo_loss(
            **(ok | dict(old_logps=torch.zeros(5, 6, dtype=F64, device="meta")))
        )
    with pytest.raises(ValueError, match="num_items_in_batch"):
        T.grpo_loss(**ok, loss_type="dapo", num_items_in_batch=torch.tensor(0.0))
    # the keywords of the removed fused kernel are refused, not ignored
    for removed in ("fused", "per_token", "_block_rows"):
        with pytest.raises(TypeError, match=removed):
            T.grpo_loss(**ok, **{removed: False})
    # validate=False skips the value checks (they are the only host-device
    # synchronisation)
    bad = ok | dict(mask=torch.full((5, 6), 2.0, dtype=F64))
    T.grpo_loss(**bad, validate=False)


# --------------------------------------------------------------------------------------
# TRL 1.16.0 fixtures (produced by TRL's own trainer code; see
# tests/trl_exact/test_trl_parity.py)
# --------------------------------------------------------------------------------------


CLIP = set(T.CLIP_METRICS)


def test_grpo_matches_trl_fixtures():
    for case in trl_fixture("trl_grpo_loss.json")["cases"]:
        (new, old, ref, adv, mask), options = grpo_case(case)
        new_t = tensor(new).requires_grad_()
        ref_t = None if ref is None else tensor(ref)
        out = T.grpo_loss(
            new_t,
            tensor(old),
            ref_t,
            tensor(adv),
            tensor(mask),
            **options,
        )
        out.loss.backward()
        name = case["name"]
        np.testing.assert_allclose(
            out.loss.item(), case["loss"], rtol=0, atol=1e-10, err_msg=name
        )
        np.testing.assert_allclose(
            to_numpy(new_t.grad),
            np.array(case["grad_new_logps"]),
            rtol=0,
            atol=1e-10,
            err_msg=name,
        )
        assert set(out.metrics) == set(case["metrics"]), name
        for metric, value in case["metrics"].items():
            # TRL computes the clip ratios in float32
            atol = 1e-7 if metric in CLIP else 1e-10
            np.testing.assert_allclose(
                out.metrics[metric].item(), value, rtol=0, atol=atol, err_msg=name
            )


# --------------------------------------------------------------------------------------
# selective_log_softmax
# --------------------------------------------------------------------------------------


def _naive(logits, ids):
    return torch.log_softmax(logits, dim=-1).gather(-1, ids[..., None])[..., 0]


# --------------------------------------------------------------------------------------
# CUDA (skipped without a GPU)
# --------------------------------------------------------------------------------------


@cuda
@needs_cuda
@pytest.mark.parametrize(
    "opts",
    [
        dict(),
        dict(importance_sampling_level="sequence", use_bias_correction_kl=True),
        dict(loss_type="dapo", delta=1.5),
        dict(loss_type="bnpo", beta=0.0),
    ],
    ids=_ids,
)
def test_cuda_grpo_matches_cpu_and_never_syncs(opts):
    new, old, ref, adv, mask = grpo_batch(4, b=32, t=128)
    expected = dg.trl_exact.grpo_loss(new, old, ref, adv, mask, **opts)
    dev = "cuda"
    new_t = tensor(new, device=dev).requires_grad_()
    args = [tensor(x, device=dev) for x in (old, ref, adv, mask)]
    out = T.grpo_loss(new_t, *args, **opts)
    out.loss.backward()
    np.testing.assert_allclose(out.loss.item(), expected.loss, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(
        to_numpy(new_t.grad), expected.grad, rtol=1e-11, atol=1e-12
    )
    new_t.grad = None
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # any host-device synchronisation raises
    try:
        T.grpo_loss(new_t, *args, validate=False, **opts).loss.backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    # compile=True on the GPU: Triton kernels, the same numbers
    new_t.grad = None
    out = T.grpo_loss(new_t, *args, compile=True, **opts)
    out.loss.backward()
    np.testing.assert_allclose(out.loss.item(), expected.loss, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(
        to_numpy(new_t.grad), expected.grad, rtol=1e-11, atol=1e-12
    )
    # bfloat16 on the GPU, within the documented tolerance
    new_b = tensor(new, torch.bfloat16, dev).requires_grad_()
    out = T.grpo_loss(new_b, *[x.to(torch.bfloat16) for x in args], **opts)
    out.loss.backward()
    rounded = [to_numpy(tensor(x, torch.bfloat16)) for x in (new, old, ref, adv)]
    np.testing.assert_allclose(
        out.loss.item(),
        dg.trl_exact.grpo_loss(*rounded, mask, **opts).loss,
        rtol=1e-5,
        atol=1e-7,
    )


# --------------------------------------------------------------------------------------
# torch.compile and overflow
# --------------------------------------------------------------------------------------


def test_traces_without_graph_breaks():
    """fullgraph=True fails on any graph break; backend="eager" only traces (no code
    generation: fast)."""
    for opts, adv_2d in (
        (dict(), False),
        (
            dict(
                importance_sampling_level="sequence",
                use_bias_correction_kl=True,
                delta=1.3,
                loss_type="dapo",
            ),
            True,
        ),
    ):
        batch = grpo_batch(adv_2d=adv_2d)
        expected = dg.trl_exact.grpo_loss(*batch, **opts)
        new, old, ref, adv, mask = (tensor(x) for x in batch)
        fn = torch.compile(
            lambda *a, o=opts: T.grpo_loss(*a, validate=False, **o),
            fullgraph=True,
            backend="eager",
        )
        new_t = new.clone().requires_grad_()
        out = fn(new_t, old, ref, adv, mask)
        out.loss.backward()
        np.testing.assert_allclose(out.loss.item(), expected.loss, **TIGHT)
        np.testing.assert_allclose(to_numpy(new_t.grad), expected.grad, **TIGHT)
        np.testing.assert_allclose(
            to_numpy(out.per_token_loss), expected.per_token_loss, **TIGHT
        )
        for name, value in expected.metrics.items():
            np.testing.assert_allclose(
                out.metrics[name].item(), value, **TIGHT, err_msg=name
            )
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 3, 5, generator=g, dtype=F64, requires_grad=True)
    ids = torch.randint(0, 5, (2, 3), generator=g)
    sls = torch.compile(
        lambda x, i: T.selective_log_softmax(x, i, 2, validate=False),
        fullgraph=True,
        backend="eager",
    )
    out = sls(logits, ids)
    out.sum().backward()
    np.testing.assert_allclose(to_numpy(out), to_numpy(_naive(logits, ids)), **TIGHT)
    # d sum_r log p_r(id_r) / d logits = onehot(id) - softmax(logits)
    expected = torch.nn.functional.one_hot(ids, 5).to(F64) - torch.softmax(
        logits.detach(), -1
    )
    np.testing.assert_allclose(to_numpy(logits.grad), to_numpy(expected), **TIGHT)


@pytest.mark.parametrize(
    "opts",
    [
        dict(),
        dict(
            importance_sampling_level="sequence",
            use_bias_correction_kl=True,
            delta=1.3,
            epsilon_high=0.28,
            loss_type="dapo",
            num_items_in_batch=40,
        ),
    ],
    ids=_ids,
)
def test_compiled_loss_matches_numpy(opts):
    """compile=True with inductor's real code generation (C++ on CPU): float64 parity,
    on a second shape (dynamic, no recompile error) and with (B, T) advantages."""
    from torch._dynamo.utils import counters

    graphs = counters["stats"]["unique_graphs"]
    _check_against_numpy(opts, compile=True)
    assert counters["stats"]["unique_graphs"] > graphs, (
        "compile=True must run the loss through torch.compile"
    )
    for kw in (dict(b=7, t=9, seed=1), dict(adv_2d=True, seed=2)):
        _check_against_numpy(opts, compile=True, **kw)


def test_compiled_kernels_past_dynamos_default_limit_do_not_fail(monkeypatch):
    """Each set of options, dtype and device is a kernel of its own; dynamo's default
    limit (8) made the ninth a hard error under fullgraph=True (seen on a GPU: the loss
    on CUDA, then on the CPU). The global limit is set to 1 here, so that two dtypes are
    already past it (traced with the eager backend: no code generation)."""
    import functools

    from dpo_grpo.torch_ops import grpo as torch_grpo

    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 1)
    monkeypatch.setattr(torch_grpo, "_COMPILED", [])
    monkeypatch.setattr(
        torch, "compile", functools.partial(torch.compile, backend="eager")
    )
    batch = grpo_batch()
    for dtype in (torch.float32, torch.float64):
        out = T.grpo_loss(*(tensor(x, dtype) for x in batch), compile=True)
        assert torch.isfinite(out.loss)
    # the caller's setting is left alone
    assert torch._dynamo.config.recompile_limit == 1


def test_compile_without_a_cxx_compiler_explains(tmp_path):
    code = (
        "import torch, torch._inductor.config as ic\n"
        "from dpo_grpo import torch_ops as T\n"
        "ic.cpp.cxx = ('/nonexistent-compiler',)\n"
        "z = torch.zeros(2, 3)\n"
        "try:\n"
        "    T.grpo_loss(z, z, z, torch.ones(2), torch.ones(2, 3), compile=True)\n"
        "except RuntimeError as exc:\n"
        "    print(exc)\n"
    )
    env = dict(
        os.environ,
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path),
        TORCHINDUCTOR_FX_GRAPH_CACHE="0",
        PYTHONPATH=str(ROOT / "code"),
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert "needs a C++ compiler" in out.stdout and "compile=False" in out.stdout, (
        out.stderr[-2000:]
    )


def test_compile_argument_and_overflow():
    new, old, ref, adv, mask = (tensor(x) for x in grpo_batch())
    with pytest.raises(TypeError, match="compile must be a bool"):
        T.grpo_loss(new, old, ref, adv, mask, compile="yes")
    args = [
        tensor([[1000.0]]).requires_grad_(),
        tensor([[0.0]]),
        tensor([[0.0]]),
        tensor([1.0]),
        tensor([[1.0]]),
    ]
    with pytest.raises(ValueError, match="overflow"):
        T.grpo_loss(*args, beta=0.0)


def test_bias_corrected_kl_overflow_raises():
    # exp(new - old) and expm1(ref - new) are finite, their product is not: an error,
    # never a silent inf
    args = [
        tensor([[700.0]]),
        tensor([[0.0]]),
        tensor([[1400.0]]),
        tensor([1.0]),
        tensor([[1.0]]),
    ]
    with pytest.raises(ValueError, match="overflow"):
        T.grpo_loss(*args, use_bias_correction_kl=True)


def test_the_torch_loss_takes_the_trl_exact_options_with_the_same_defaults():
    """The two layers spell out the same TRL options (readable signatures); this keeps
    them one list."""
    import inspect

    trl = inspect.signature(dg.trl_exact.grpo_loss).parameters
    ours = inspect.signature(T.grpo_loss).parameters
    torch_only = {"validate", "compile"}
    assert [k for k in ours if k not in torch_only] == list(trl)
    assert {k: ours[k].default for k in trl} == {k: p.default for k, p in trl.items()}


def test_a_loss_type_without_an_implementation_raises_in_torch_too(monkeypatch):
    import dpo_grpo.trl_exact.grpo as trl_grpo

    monkeypatch.setattr(trl_grpo, "LOSS_TYPES", trl_grpo.LOSS_TYPES + ("made_up",))
    lp = tensor(np.log(np.full((2, 3), 0.3)))
    with pytest.raises(ValueError, match="made_up"):
        dg.torch_ops.grpo_loss(
            lp,
            lp,
            None,
            tensor([1.0, -1.0]),
            tensor(np.ones((2, 3))),
            loss_type="made_up",
            beta=0.0,
        )
