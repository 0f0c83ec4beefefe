"""dpo_grpo.reference.advantages: the article's group advantages, conventions,
invariances and input validation."""

import math

import dpo_grpo as dg
import numpy as np
import pytest
from dpo_grpo.reference import examples as ex
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

groups = arrays(
    np.float64,
    st.tuples(st.integers(1, 4), st.integers(2, 8)),
    elements=st.floats(-100, 100, allow_nan=False, width=64),
)


def test_article_advantages():
    adv = dg.group_advantages(ex.REWARD_GROUPS)
    np.testing.assert_array_equal(
        np.round(adv, 4),
        [[-1.2699, 0.1154, 1.5008, -0.3463], [-1.2648, -0.6324, 0.6324, 1.2648]],
    )
    np.testing.assert_allclose(adv.mean(axis=1), 0, atol=1e-15)


def test_population_vs_sample_std():
    r = ex.REWARD_GROUPS[0]
    assert round(r.std(ddof=0), 6) == 0.433013 and round(r.std(ddof=1), 6) == 0.5
    a0 = dg.group_advantages(ex.REWARD_GROUPS[:1], ddof=0)
    a1 = dg.group_advantages(ex.REWARD_GROUPS[:1], ddof=1)
    assert np.all(np.abs(a1) < np.abs(a0))
    centred = r - r.mean()  # [-0.55, 0.05, 0.65, -0.15]
    # sum sq 0.75 / 4
    np.testing.assert_allclose(a0[0], centred / (np.sqrt(0.1875) + 1e-4), rtol=1e-13)
    # sum sq 0.75 / 3
    np.testing.assert_allclose(a1[0], centred / (0.5 + 1e-4), rtol=1e-13)


def test_same_rank_different_gaps():
    a, b = dg.group_advantages(ex.SAME_RANK_GROUPS)
    assert (np.argsort(a) == np.argsort(b)).all() and not np.allclose(a, b, atol=1e-3)


@given(groups)
def test_rows_have_mean_zero(r):
    np.testing.assert_allclose(dg.group_advantages(r).mean(axis=1), 0, atol=1e-9)


@given(groups, st.floats(-50, 50))
def test_shift_invariance(r, b):
    np.testing.assert_allclose(
        dg.group_advantages(r + b), dg.group_advantages(r), atol=1e-6
    )


@given(groups, st.floats(0.1, 10))
def test_positive_scaling_invariance_as_eps_vanishes(r, a):
    # entries in [-100, 100]: neighbours differ by >= 1, std >> eps
    r = r + 201.0 * np.arange(r.shape[1])
    np.testing.assert_allclose(
        dg.group_advantages(a * r, eps=1e-12),
        dg.group_advantages(r, eps=1e-12),
        atol=1e-8,
    )


def test_fixed_eps_breaks_scaling_exactly_as_predicted():
    r = ex.REWARD_GROUPS[:1]
    s, eps, a = r.std(), 1e-4, 1e-3
    centred = r - r.mean()
    np.testing.assert_allclose(
        dg.group_advantages(a * r, eps=eps), centred / (s + eps / a), rtol=1e-12
    )
    assert not np.allclose(
        dg.group_advantages(a * r), dg.group_advantages(r), atol=1e-2
    )


def test_negative_scale_flips_direction():
    r = ex.REWARD_GROUPS[:1]
    np.testing.assert_allclose(
        dg.group_advantages(-r), -dg.group_advantages(r), atol=1e-12
    )


def test_equal_rewards_give_zero_advantages():
    assert np.all(dg.group_advantages([[1.0, 1.0, 1.0]]) == 0)
    # 0.7 is not exact in binary: the mean is off by one ulp, divided by eps -> ~1e-12,
    # not exactly 0
    assert np.all(np.abs(dg.group_advantages([[0.7, 0.7, 0.7]])) < 1e-11)


def test_leave_one_out_and_centred():
    r = np.array([[1.0, 2.0, 6.0]])
    np.testing.assert_allclose(dg.centered_advantages(r), [[-2, -1, 3]])
    np.testing.assert_allclose(
        dg.leave_one_out_advantages(r), [[1 - 4, 2 - 3.5, 6 - 1.5]]
    )
    np.testing.assert_allclose(
        dg.leave_one_out_advantages(r), dg.centered_advantages(r) * 3 / 2
    )


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: dg.group_advantages([[1.0]]), ValueError, "G >= 2"),
        (lambda: dg.group_advantages([1.0, 2.0]), ValueError, "2-D"),
        (lambda: dg.group_advantages([[1.0, np.nan]]), ValueError, "finite"),
        (lambda: dg.group_advantages([[1.0, 2.0]], eps=0), ValueError, "eps"),
        (lambda: dg.group_advantages([[1.0, 2.0]], eps=-1e-4), ValueError, "eps"),
        (lambda: dg.group_advantages([[1.0, 2.0]], ddof=2), ValueError, "ddof"),
        (lambda: dg.group_advantages(np.zeros((0, 3))), ValueError, "empty"),
        (lambda: dg.group_advantages(None), TypeError, "rewards"),
    ],
)
def test_invalid_group_inputs(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_group_advantages_standardise_within_each_group_with_eps():
    """Two groups with different spreads, eps 0.5 (large, to be seen). Group 1
    [1, 0, 0, 1]: mean 0.5, population std 0.5, A = +-0.5 / (0.5 + 0.5) = +-0.5.
    Group 2 [0, 0, 0, 4]: mean 1, std sqrt(12 / 4) = sqrt(3), A = [-1, -1, -1, 3] /
    (sqrt(3) + 0.5). Statistics pooled over both groups, or eps added to the variance,
    give other numbers."""
    adv = dg.group_advantages([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 4.0]], eps=0.5)
    np.testing.assert_allclose(adv[0], [0.5, -0.5, -0.5, 0.5], rtol=1e-15)
    np.testing.assert_allclose(
        adv[1], np.array([-1, -1, -1, 3]) / (math.sqrt(3) + 0.5), rtol=1e-15
    )


def test_group_advantages_ddof_1_divides_by_the_sample_std():
    """[1, 0, 0, 1] with ddof=1: std sqrt(1 / 3), as TRL computes it."""
    adv = dg.group_advantages([[1.0, 0.0, 0.0, 1.0]], eps=1e-4, ddof=1)
    np.testing.assert_allclose(
        adv[0], np.array([0.5, -0.5, -0.5, 0.5]) / (math.sqrt(1 / 3) + 1e-4), rtol=1e-15
    )
