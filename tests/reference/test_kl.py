"""dpo_grpo.reference.kl: the article's KL example, k3's properties, and the
fixed-sample gradient trap."""

import dpo_grpo as dg
import numpy as np
import pytest
from dpo_grpo.reference import examples as ex
from hypothesis import given
from hypothesis import strategies as st

K = ex.KL_EXAMPLE


def test_article_kl_numbers():
    assert round(dg.exact_kl(K["p"], K["q"]), 6) == 0.634897
    assert dg.k3_expectation(K["p"], K["q"]) == pytest.approx(
        dg.exact_kl(K["p"], K["q"]), abs=1e-15
    )
    assert round(dg.k3_expectation(K["p"], K["q"], K["old"]), 6) == 1.146128
    assert dg.k3_expectation(
        K["p"], K["q"], K["old"], ratio_weighted=True
    ) == pytest.approx(dg.exact_kl(K["p"], K["q"]), abs=1e-15)


@given(st.floats(-30, 30))
def test_k3_non_negative_and_zero_only_at_zero(d):
    value = dg.k3(d)
    assert value >= 0
    assert (value == 0) == (d == 0) or abs(d) < 1e-7


def test_k1_unbiased_k2_k3_positive():
    p, q = K["p"], K["q"]
    delta = np.log(q) - np.log(p)
    assert np.sum(p * dg.k1(delta)) == pytest.approx(dg.exact_kl(p, q))
    assert np.all(dg.k2(delta) >= 0) and np.any(dg.k1(delta) < 0)


def test_estimator_closed_forms():
    d = np.array([0.0, 1.0, -2.0, np.log(2.0)])
    np.testing.assert_array_equal(dg.k1(d), -d)
    np.testing.assert_allclose(
        dg.k2(d), [0.0, 0.5, 2.0, 0.5 * np.log(2.0) ** 2], rtol=1e-15
    )
    np.testing.assert_allclose(
        dg.k3(d), [0.0, np.e - 2, np.exp(-2.0) + 1, 1 - np.log(2.0)], rtol=1e-15
    )
    # on the article's example k2 is biased upwards: E_p[k2] = 0.695250 > KL = 0.634897
    p, q = K["p"], K["q"]
    assert round(float(np.sum(p * dg.k2(np.log(q) - np.log(p)))), 6) == 0.695250
    np.testing.assert_allclose(
        dg.k3_per_action(p, q), q / p - np.log(q / p) - 1, rtol=1e-13
    )


def test_fixed_sample_gradient_is_p_minus_q_not_the_kl_gradient():
    z = np.log(K["p"])
    surrogate = dg.k3_surrogate_grad_logits(z, K["q"])
    np.testing.assert_allclose(surrogate, K["p"] - K["q"], atol=1e-12)
    true = dg.kl_grad_logits(z, K["q"])
    np.testing.assert_allclose(
        true,
        dg.finite_difference(lambda x: dg.exact_kl(dg.softmax(x), K["q"]), z),
        atol=1e-9,
    )
    assert np.max(np.abs(surrogate - true)) > 0.05


def test_fixed_sample_gradient_matches_finite_differences():
    z, s = np.log(K["p"]), K["old"]
    for weighted in (False, True):
        fd = dg.finite_difference(
            lambda x: float(
                np.sum(
                    s
                    * (dg.softmax(x) / s if weighted else 1.0)
                    * dg.k3_per_action(dg.softmax(x), K["q"])
                )
            ),
            z,
        )
        got = dg.k3_surrogate_grad_logits(z, K["q"], s, ratio_weighted=weighted)
        assert dg.max_abs_error(got, fd) < 1e-9


def test_ratio_correction_recovers_true_gradient_only_if_not_detached():
    z = np.log(K["p"])
    true = dg.kl_grad_logits(z, K["q"])
    corrected = dg.k3_surrogate_grad_logits(z, K["q"], K["old"], ratio_weighted=True)
    assert dg.max_abs_error(corrected, true) < 1e-12
    detached = dg.k3_surrogate_grad_logits(
        z, K["q"], K["old"], ratio_weighted=True, detach_ratio=True
    )
    assert np.max(np.abs(detached - true)) > 0.05


def test_invalid_inputs():
    with pytest.raises(ValueError, match="p must sum to 1"):
        dg.exact_kl([0.5, 0.6], [0.5, 0.5])
    with pytest.raises(ValueError, match="q must have strictly positive"):
        dg.exact_kl([0.5, 0.5], [1.0, 0.0])
    with pytest.raises(ValueError, match="same shape"):
        dg.exact_kl([0.5, 0.5], [0.2, 0.3, 0.5])
    with pytest.raises(ValueError, match="delta must contain only finite"):
        dg.k3([np.nan])


# --- the gradient view of k1, k2, k3 (section 3.5) ------------------------------------


def test_gradient_view_numbers_of_the_article_example():
    views = dg.estimator_views(K["p"], K["q"])
    np.testing.assert_allclose(views["k3"].grad, [0.5, -0.1, -0.4], atol=1e-15)
    np.testing.assert_allclose(views["k2"].grad, [0.4325, -0.2081, -0.2244], atol=5e-5)
    np.testing.assert_allclose(views["k1"].grad, 0.0, atol=1e-15)
    true = dg.kl_grad_logits(np.log(K["p"]), K["q"])
    np.testing.assert_allclose(views["k2"].grad, true, atol=1e-15)
    np.testing.assert_allclose(
        views["k3"].grad, dg.forward_kl_grad_logits(np.log(K["p"]), K["q"]), atol=1e-15
    )
    # the bare k3 gradient is the fixed-sample surrogate of the existing function
    np.testing.assert_allclose(
        views["k3"].grad,
        dg.k3_surrogate_grad_logits(np.log(K["p"]), K["q"]),
        atol=1e-15,
    )


def test_forward_kl_gradient_matches_finite_differences():
    z = np.array([0.3, -1.0, 0.8])
    fd = dg.finite_difference(lambda zz: dg.exact_kl(K["q"], dg.softmax(zz)), z)
    np.testing.assert_allclose(dg.forward_kl_grad_logits(z, K["q"]), fd, atol=1e-7)


def test_value_view_bias_and_variance_by_enumeration():
    p, q = K["p"], K["q"]
    delta = np.log(q) - np.log(p)
    kl = dg.exact_kl(p, q)
    views = dg.estimator_views(p, q)
    for name, fn in (("k1", dg.k1), ("k2", dg.k2), ("k3", dg.k3)):
        k = fn(delta)
        assert views[name].mean == pytest.approx(p @ k, abs=1e-15)
        assert views[name].value_bias == pytest.approx(p @ k - kl, abs=1e-15)
        assert views[name].variance == pytest.approx(p @ k**2 - (p @ k) ** 2, abs=1e-12)
    assert views["k1"].value_bias == pytest.approx(0, abs=1e-15)
    assert views["k3"].value_bias == pytest.approx(0, abs=1e-15)
    assert views["k2"].value_bias > 0.06
    # Schulman's point: close to the reference, k3 has far less variance than k1
    near = dg.estimator_views(dg.policy_gap_family(0.2), q)
    assert near["k3"].variance < 0.2 * near["k1"].variance


def test_policy_gap_family_endpoints():
    np.testing.assert_allclose(dg.policy_gap_family(0.0), K["q"], atol=1e-15)
    np.testing.assert_allclose(dg.policy_gap_family(1.0), K["p"], atol=1e-15)
    with pytest.raises(TypeError, match="gap"):
        dg.policy_gap_family("far")
