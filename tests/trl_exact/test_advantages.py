"""dpo_grpo.trl_exact.advantages: TRL-style reward aggregation (reward_advantages): NaN
semantics, scaling, weights, logged metrics and input validation."""

import dpo_grpo as dg
import numpy as np
import pytest
from dpo_grpo.reference import examples as ex
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

groups = arrays(
    np.float64,
    st.tuples(st.integers(1, 4), st.integers(2, 8)),
    elements=st.floats(-100, 100, allow_nan=False, width=64),
)


# --- TRL-style reward_advantages (full fixture parity lives in test_trl_parity.py) ----


def test_reward_advantages_single_function_matches_group_ddof1():
    r = ex.REWARD_GROUPS.reshape(-1, 1)
    out = dg.trl_exact.reward_advantages(r, num_generations=4)
    np.testing.assert_allclose(
        out.advantages,
        dg.group_advantages(ex.REWARD_GROUPS, ddof=1).ravel(),
        rtol=1e-12,
    )
    assert out.metrics["frac_reward_zero_std"] == 0.0
    assert out.metrics["reward"] == pytest.approx(ex.REWARD_GROUPS.mean())


def test_reward_advantages_nan_semantics():
    rpf = np.array(
        [
            [1.0, np.nan],
            [np.nan, np.nan],
            [0.0, 2.0],
            [3.0, np.nan],  # group 1: one unscorable row
            [np.nan, np.nan],
            [5.0, np.nan],
            [np.nan, np.nan],
            [np.nan, np.nan],
        ]
    )  # group 2: one valid
    out = dg.trl_exact.reward_advantages(rpf, 4, scale_rewards="none")
    assert out.advantages[1] == 0 and np.all(out.advantages[4:] == 0)
    valid = np.array([1.0, 2.0, 3.0])  # nansum over functions: 1, 0+2, 3
    np.testing.assert_allclose(out.advantages[[0, 2, 3]], valid - valid.mean())
    assert np.isfinite(out.advantages).all()


def test_reward_advantages_zero_std_fraction():
    rpf = np.array([[1.0], [1.0], [0.0], [1.0], [0.0], [0.0], [0.0], [0.0]])
    out = dg.trl_exact.reward_advantages(rpf, 4)
    assert out.metrics["frac_reward_zero_std"] == 0.5
    assert np.all(out.advantages[4:] == 0)
    # "zero std" is isclose(std, 0, atol=1e-8): a tiny but real spread still counts as
    # signal
    tiny = np.array([[0.0], [0.0], [0.0], [1e-3], [2.0], [2.0], [2.0], [2.0 + 1e-9]])
    out = dg.trl_exact.reward_advantages(tiny, 4)
    # group 1 (std 5e-4) has signal, group 2 (std 5e-10) not
    assert out.metrics["frac_reward_zero_std"] == 0.5
    np.testing.assert_allclose(
        out.advantages[:4], (tiny[:4, 0] - 2.5e-4) / (5e-4 + 1e-4), rtol=1e-9
    )


def test_reward_advantages_batch_scaling_by_hand():
    rpf = np.array([[1.0], [2.0], [3.0], [6.0]])
    centred = np.array([-0.5, 0.5, -1.5, 1.5])  # minus the group means 1.5 and 4.5
    batch = dg.trl_exact.reward_advantages(rpf, 2, scale_rewards="batch")
    # std of 1,2,3,6
    np.testing.assert_allclose(
        batch.advantages, centred / (np.sqrt(14 / 3) + 1e-4), rtol=1e-13
    )
    group = dg.trl_exact.reward_advantages(rpf, 2, scale_rewards="group")
    np.testing.assert_allclose(
        group.advantages,
        centred / (np.repeat([0.5, 1.5], 2) * np.sqrt(2) + 1e-4),
        rtol=1e-13,
    )
    for scale in ("none", False):
        np.testing.assert_allclose(
            dg.trl_exact.reward_advantages(rpf, 2, scale_rewards=scale).advantages,
            centred,
            rtol=1e-15,
        )


def test_reward_advantages_normalize_then_sum_by_hand():
    rpf = np.array([[1.0, 0.0], [3.0, 2.0], [np.nan, np.nan], [5.0, 1.0]])
    out = dg.trl_exact.reward_advantages(
        rpf, 2, multi_objective_aggregation="normalize_then_sum"
    )
    # each function of group 1 standardises to -+1 / (sqrt 2 + eps); two of them
    a = 2 / (np.sqrt(2) + 1e-4)
    # group 2 has one valid row (std NaN -> its z is NaN -> nansum 0); the unscorable
    # row stays out of the batch
    np.testing.assert_allclose(
        out.rewards[[0, 1, 3]], [-a, a, 0.0], rtol=1e-13, atol=1e-15
    )
    assert np.isnan(out.rewards[2])
    np.testing.assert_allclose(
        out.advantages, [-a / (a + 1e-4), a / (a + 1e-4), 0.0, 0.0], rtol=1e-13
    )


def test_reward_advantages_weights_and_logged_metrics():
    rpf = np.array([[1.0, 2.0], [3.0, 4.0]])
    out = dg.trl_exact.reward_advantages(rpf, 2, reward_weights=[2.0, 0.5])
    # 2 * 1 + 0.5 * 2, 2 * 3 + 0.5 * 4
    np.testing.assert_allclose(out.rewards, [3.0, 8.0], rtol=1e-15)
    assert out.metrics["reward"] == pytest.approx(5.5, rel=1e-15)
    assert out.metrics["reward_std"] == pytest.approx(2.5 * np.sqrt(2), rel=1e-15)
    np.testing.assert_allclose(
        out.advantages, np.array([-2.5, 2.5]) / (2.5 * np.sqrt(2) + 1e-4), rtol=1e-13
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(rewards_per_func=np.ones((6, 1)), num_generations=4), "divide"),
        (
            dict(
                rewards_per_func=np.ones((4, 2)),
                num_generations=4,
                reward_weights=[1.0],
            ),
            "reward_weights",
        ),
        (
            dict(
                rewards_per_func=np.ones((4, 1)),
                num_generations=4,
                scale_rewards="global",
            ),
            "scale_rewards",
        ),
        (
            dict(
                rewards_per_func=np.ones((4, 1)),
                num_generations=4,
                multi_objective_aggregation="mean",
            ),
            "multi_objective_aggregation",
        ),
        (dict(rewards_per_func=np.ones((4, 1)), num_generations=1), "num_generations"),
        (dict(rewards_per_func=np.full((4, 1), np.inf), num_generations=4), "inf"),
    ],
)
def test_reward_advantages_invalid(kwargs, match):
    with pytest.raises(ValueError, match=match):
        dg.trl_exact.reward_advantages(**kwargs)
