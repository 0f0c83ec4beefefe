"""dpo_grpo.reference.baselines: exact enumeration of group-baseline gradients (the (1 -
1/G) factor) and variance."""

import dpo_grpo as dg
import numpy as np
import pytest
from dpo_grpo.reference import examples as ex


def test_article_enumeration():
    e = dg.enumerate_group_gradients(**ex.ENUMERATION)
    assert e.n_groups == 27
    np.testing.assert_allclose(e.exact, [-0.372, -0.198, 0.570], atol=1e-15)
    np.testing.assert_allclose(e.centered, [-0.248, -0.132, 0.380], atol=1e-15)
    np.testing.assert_allclose(e.centered, (1 - 1 / 3) * e.exact, atol=1e-15)
    np.testing.assert_allclose(e.leave_one_out, e.exact, atol=1e-15)
    np.testing.assert_array_equal(
        np.round(e.standardised, 6), [-0.209534, -0.136999, 0.346534]
    )
    ratios = e.standardised / e.exact
    # standardising changes the direction, not just the length
    assert np.ptp(ratios) > 0.01


@pytest.mark.parametrize("g", [2, 4, 5])
def test_centred_shrinks_by_one_minus_one_over_g(g):
    p, r = np.array([0.1, 0.6, 0.3]), np.array([1.0, -0.5, 2.0])
    e = dg.enumerate_group_gradients(p, r, g)
    np.testing.assert_allclose(e.centered, (1 - 1 / g) * e.exact, atol=1e-14)
    np.testing.assert_allclose(e.leave_one_out, e.exact, atol=1e-14)


def test_constant_baseline_keeps_mean_and_lowers_variance():
    p, r = np.array([0.2, 0.3, 0.5]), np.array([9.0, 10.0, 12.0])
    m0, v0 = dg.score_function_variance(p, r, baseline=0.0, seed=1)
    mb, vb = dg.score_function_variance(p, r, baseline=p @ r, seed=1)
    np.testing.assert_allclose(m0, dg.true_gradient(p, r), atol=0.15)
    np.testing.assert_allclose(mb, dg.true_gradient(p, r), atol=0.05)
    assert vb < v0 / 20


def test_invalid():
    with pytest.raises(ValueError, match="group_size"):
        dg.enumerate_group_gradients([0.5, 0.5], [1.0, 0.0], 1)
    with pytest.raises(ValueError, match="too many"):
        dg.enumerate_group_gradients(np.full(10, 0.1), np.arange(10.0), 8)
