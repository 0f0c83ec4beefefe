"""dpo_grpo.torch_ops.advantages: group and TRL reward advantages equal NumPy (float64)
and the TRL 1.16.0 fixtures; the same input validation as NumPy."""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import dpo_grpo as dg  # noqa: E402
from dpo_grpo import torch_ops as T  # noqa: E402

from testing_support import grpo_batch, nan_array, trl_fixture  # noqa: E402
from torch_support import tensor, to_numpy, TIGHT  # noqa: E402


# --------------------------------------------------------------------------------------
# GRPO loss: float64 parity with NumPy on every option
# --------------------------------------------------------------------------------------


def test_no_grad_and_autograd_to_ref_and_advantages():
    new, old, ref, adv, mask = grpo_batch()
    with torch.no_grad():
        out = T.grpo_loss(
            tensor(new).requires_grad_(),
            tensor(old),
            tensor(ref),
            tensor(adv),
            tensor(mask),
        )
    assert not out.loss.requires_grad
    np.testing.assert_allclose(
        out.loss.item(), dg.trl_exact.grpo_loss(new, old, ref, adv, mask).loss, **TIGHT
    )
    # ref and advantages that require grad switch to the autograd path (gradients flow
    # to them too)
    new_t, ref_t, adv_t = (tensor(x).requires_grad_() for x in (new, ref, adv))
    T.grpo_loss(new_t, tensor(old), ref_t, adv_t, tensor(mask)).loss.backward()
    np.testing.assert_allclose(
        to_numpy(new_t.grad),
        dg.trl_exact.grpo_loss(new, old, ref, adv, mask).grad,
        **TIGHT,
    )
    assert ref_t.grad is not None and adv_t.grad is not None
    h = 1e-6
    bumped = adv.copy()
    bumped[1] += h
    fd = (
        dg.trl_exact.grpo_loss(new, old, ref, bumped, mask).loss
        - dg.trl_exact.grpo_loss(new, old, ref, adv, mask).loss
    ) / h
    assert abs(adv_t.grad[1].item() - fd) < 1e-5
    # d loss / d ref comes from the k3 term only; checked against finite differences of
    # the NumPy loss
    fd_ref = dg.finite_difference(
        lambda x: dg.trl_exact.grpo_loss(new, old, x, adv, mask).loss, ref, h=1e-6
    )
    assert dg.max_abs_error(to_numpy(ref_t.grad), fd_ref) < 1e-8
    assert np.all(to_numpy(ref_t.grad)[mask == 0] == 0) and np.abs(fd_ref).max() > 1e-4


# --------------------------------------------------------------------------------------
# Advantages
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("ddof", [0, 1])
def test_group_advantages_match_numpy(ddof):
    r = np.random.default_rng(0).normal(size=(4, 8))
    r[1] = 1.0  # zero-std group: advantages 0
    np.testing.assert_allclose(
        to_numpy(T.group_advantages(tensor(r), ddof=ddof)),
        dg.group_advantages(r, ddof=ddof),
        **TIGHT,
    )
    for bad, err in (
        (np.zeros((3, 1)), ValueError),
        (np.zeros(4), ValueError),
        ("x", TypeError),
        (np.array([[1.0, np.nan]]), ValueError),
    ):
        with pytest.raises(err):
            dg.group_advantages(bad)
        with pytest.raises(err):
            T.group_advantages(bad if isinstance(bad, str) else tensor(bad))
    with pytest.raises(ValueError, match="eps"):
        T.group_advantages(tensor(r), eps=0)


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


SCALES = ["group", "batch", "none", True, False]


@pytest.mark.parametrize("table", list(_reward_tables()), ids=str)
@pytest.mark.parametrize("aggregation", ["sum_then_normalize", "normalize_then_sum"])
@pytest.mark.parametrize("scale", SCALES, ids=str)
def test_reward_advantages_match_numpy(table, aggregation, scale):
    rpf = _reward_tables()[table]
    weights = None if rpf.shape[1] == 1 else [1.0, 0.5, -2.0]
    expected = dg.trl_exact.reward_advantages(
        rpf,
        4,
        reward_weights=weights,
        scale_rewards=scale,
        multi_objective_aggregation=aggregation,
    )
    out = T.reward_advantages(
        tensor(rpf),
        4,
        reward_weights=weights,
        scale_rewards=scale,
        multi_objective_aggregation=aggregation,
    )
    np.testing.assert_allclose(to_numpy(out.advantages), expected.advantages, **TIGHT)
    np.testing.assert_allclose(
        to_numpy(out.rewards), expected.rewards, **TIGHT, equal_nan=True
    )
    assert set(out.metrics) == set(expected.metrics)
    for name, value in expected.metrics.items():
        np.testing.assert_allclose(
            out.metrics[name].item(), value, **TIGHT, equal_nan=True, err_msg=name
        )


@settings(max_examples=30, deadline=None)
@given(
    groups=st.integers(1, 4),
    g=st.integers(2, 5),
    k=st.integers(1, 3),
    seed=st.integers(0, 10_000),
    nan_frac=st.sampled_from([0.0, 0.2, 0.6]),
    scale=st.sampled_from(SCALES),
    aggregation=st.sampled_from(["sum_then_normalize", "normalize_then_sum"]),
)
def test_reward_advantages_property(groups, g, k, seed, nan_frac, scale, aggregation):
    rng = np.random.default_rng(seed)
    # small integers: ties and zero-std groups are common
    rpf = rng.integers(0, 3, (groups * g, k)).astype(float)
    rpf[rng.random(rpf.shape) < nan_frac] = np.nan
    expected = dg.trl_exact.reward_advantages(
        rpf, g, scale_rewards=scale, multi_objective_aggregation=aggregation
    )
    out = T.reward_advantages(
        tensor(rpf), g, scale_rewards=scale, multi_objective_aggregation=aggregation
    )
    np.testing.assert_allclose(
        to_numpy(out.advantages), expected.advantages, rtol=1e-12, atol=1e-9
    )
    for name, value in expected.metrics.items():
        np.testing.assert_allclose(
            out.metrics[name].item(), value, **TIGHT, equal_nan=True
        )


@pytest.mark.parametrize(
    "kwargs, err",
    [
        (dict(rewards_per_func=None), TypeError),
        (dict(rewards_per_func=np.ones((6, 2)), num_generations=4), ValueError),
        (dict(num_generations=1), ValueError),
        (dict(num_generations=2.0), TypeError),
        (dict(rewards_per_func=np.array([[np.inf, 1.0]] * 4)), ValueError),
        (dict(reward_weights=[1.0]), ValueError),
        (dict(scale_rewards="row"), ValueError),
        (dict(multi_objective_aggregation="mean"), ValueError),
        (dict(eps=0.0), ValueError),
        (dict(rewards_per_func=np.ones((2, 2, 2))), ValueError),
    ],
)
def test_reward_advantages_invalid_like_numpy(kwargs, err):
    full = dict(rewards_per_func=np.ones((4, 2)), num_generations=2) | kwargs
    with pytest.raises(err):
        dg.trl_exact.reward_advantages(**full)
    rpf = full.pop("rewards_per_func")
    with pytest.raises(err):
        T.reward_advantages(tensor(rpf) if isinstance(rpf, np.ndarray) else rpf, **full)


# --------------------------------------------------------------------------------------
# TRL 1.16.0 fixtures (produced by TRL's own trainer code; see
# tests/trl_exact/test_trl_parity.py)
# --------------------------------------------------------------------------------------


def test_advantages_match_trl_fixtures():
    for case in trl_fixture("trl_advantages.json")["cases"]:
        o = case["options"]
        out = T.reward_advantages(
            tensor(nan_array(case["inputs"]["rewards_per_func"])),
            o["num_generations"],
            reward_weights=o["reward_weights"],
            scale_rewards=o["scale_rewards"],
            multi_objective_aggregation=o["multi_objective_aggregation"],
        )
        # TRL's advantage pipeline is float32 end to end
        np.testing.assert_allclose(
            to_numpy(out.advantages),
            case["advantages"],
            rtol=1e-5,
            atol=1e-6,
            err_msg=case["name"],
        )
        for metric, value in case["metrics"].items():
            np.testing.assert_allclose(
                out.metrics[metric].item(),
                value,
                rtol=1e-5,
                atol=1e-6,
                err_msg=case["name"],
            )
