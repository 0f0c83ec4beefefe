"""dpo_grpo.chapters.derivations_checks: the prefix-occupancy check of chapter 3
(section 3.5)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dpo_grpo.reference import examples
from dpo_grpo.chapters.derivations_checks import PREFIX_EXAMPLE, prefix_shift_kl

E = PREFIX_EXAMPLE


def _sequence_kl_by_enumeration(p1, q1, p2, q2):
    total = 0.0
    for a in range(p1.size):
        for b in range(p1.size):
            pp = p1[a] * p2[a, b]
            total += pp * np.log(pp / (q1[a] * q2[a, b]))
    return total


def test_example_numbers():
    out = prefix_shift_kl(**E)
    assert out.exact == pytest.approx(
        _sequence_kl_by_enumeration(E["p1"], E["q1"], E["p2"], E["q2"]), abs=1e-14
    )
    assert out.prefix_ratio == pytest.approx(out.exact, abs=1e-14)
    assert out.token_ratio == pytest.approx(out.token_ratio_formula, abs=1e-14)
    # the per-token correction is off because the prefix is weighted by old1, not p1
    assert abs(out.token_ratio - out.exact) > 0.05
    assert abs(out.bare - out.exact) > 0.5


def test_first_step_is_the_article_example():
    k = examples.KL_EXAMPLE
    np.testing.assert_array_equal(E["p1"], k["p"])
    np.testing.assert_array_equal(E["q1"], k["q"])
    np.testing.assert_array_equal(E["old1"], k["old"])


def _dist(draw, size):
    w = np.array(draw(st.lists(st.floats(0.05, 1.0), min_size=size, max_size=size)))
    return w / w.sum()


@st.composite
def models(draw):
    size = draw(st.integers(2, 4))
    return {
        "p1": _dist(draw, size),
        "q1": _dist(draw, size),
        "old1": _dist(draw, size),
        "p2": np.array([_dist(draw, size) for _ in range(size)]),
        "q2": np.array([_dist(draw, size) for _ in range(size)]),
        "old2": np.array([_dist(draw, size) for _ in range(size)]),
    }


@settings(max_examples=60, deadline=None)
@given(models())
def test_prefix_ratio_is_exact_and_token_ratio_weights_prefixes_by_old(m):
    out = prefix_shift_kl(**m)
    assert out.exact == pytest.approx(
        _sequence_kl_by_enumeration(m["p1"], m["q1"], m["p2"], m["q2"]), abs=1e-10
    )
    assert out.prefix_ratio == pytest.approx(out.exact, abs=1e-10)
    assert out.token_ratio == pytest.approx(out.token_ratio_formula, abs=1e-10)
    assert out.exact >= -1e-12 and out.bare >= 0


@settings(max_examples=40, deadline=None)
@given(models())
def test_token_ratio_is_exact_when_the_first_step_is_on_policy(m):
    m = dict(m, old1=m["p1"])
    out = prefix_shift_kl(**m)
    assert out.token_ratio == pytest.approx(out.exact, abs=1e-10)


def test_validation():
    with pytest.raises(ValueError, match="old1"):
        prefix_shift_kl(**dict(E, old1=np.array([0.5, 0.6, -0.1])))
    with pytest.raises(ValueError, match="p2"):
        prefix_shift_kl(**dict(E, p2=np.ones((2, 2)) / 2))
    with pytest.raises(ValueError, match="q2"):
        prefix_shift_kl(**dict(E, q2=np.array([[0.5, 0.5, 0.1]] * 3)))
    with pytest.raises(TypeError, match="p1"):
        prefix_shift_kl(**dict(E, p1="abc"))


# --- constant baselines (section 3.3) -------------------------------------------------

from dpo_grpo.reference.baselines import score_function_variance, true_gradient  # noqa: E402

# noqa: E402
from dpo_grpo.chapters.derivations_checks import (
    constant_baseline_moments,
    optimal_constant_baseline,
)

P, R = examples.ENUMERATION["probs"], examples.ENUMERATION["rewards"]


def test_baseline_moments_match_monte_carlo_and_the_true_gradient():
    for b in (0.0, 0.86, 3.0):
        exact = constant_baseline_moments(P, R, b)
        np.testing.assert_allclose(exact.mean, true_gradient(P, R), atol=1e-15)
        mc_mean, mc_var = score_function_variance(P, R, b, n_samples=200_000, seed=1)
        np.testing.assert_allclose(mc_mean, exact.mean, atol=0.02)
        assert mc_var == pytest.approx(exact.variance, rel=0.03)


def test_example_optimal_baseline_is_not_the_mean_reward():
    b_star = optimal_constant_baseline(P, R)
    # hand computation: E[r|s|^2] / E[|s|^2]
    assert b_star == pytest.approx(0.2308 / 0.62, abs=1e-12)
    v0 = constant_baseline_moments(P, R, 0.0).variance
    assert (
        constant_baseline_moments(P, R, b_star).variance
        < v0
        < constant_baseline_moments(P, R, P @ R).variance
    )


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 5).flatmap(
        lambda n: st.tuples(
            st.lists(st.floats(0.05, 1.0), min_size=n, max_size=n),
            st.lists(st.floats(-5, 5), min_size=n, max_size=n),
        )
    ),
    st.floats(-3, 3),
)
def test_optimal_baseline_minimises_the_variance(pr, shift):
    p = np.array(pr[0]) / np.sum(pr[0])
    r = np.array(pr[1])
    b_star = optimal_constant_baseline(p, r)
    v_star = constant_baseline_moments(p, r, b_star).variance
    assert v_star <= constant_baseline_moments(p, r, b_star + shift).variance + 1e-9
    np.testing.assert_allclose(
        constant_baseline_moments(p, r, shift).mean, true_gradient(p, r), atol=1e-12
    )


def test_baseline_validation():
    with pytest.raises(ValueError, match="rewards"):
        constant_baseline_moments(P, np.ones(2))
    with pytest.raises(ValueError, match="probs"):
        optimal_constant_baseline(np.array([0.5, 0.6]), np.ones(2))
    with pytest.raises(TypeError, match="baseline"):
        constant_baseline_moments(P, R, baseline="zero")
