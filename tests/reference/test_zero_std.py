"""dpo_grpo.reference.zero_std: p**G + (1-p)**G, its Monte-Carlo check, and the
two-sample near-zero-std example."""

import dpo_grpo as dg
import numpy as np
import pytest
from dpo_grpo.reference import examples as ex
from hypothesis import given
from hypothesis import strategies as st


@given(st.floats(0, 1), st.integers(2, 64))
def test_formula(p, g):
    assert dg.zero_std_probability(p, g) == pytest.approx(p**g + (1 - p) ** g)


def test_formula_by_hand():
    assert dg.zero_std_probability(0.5, 4) == 0.125  # 2 / 16
    # 0.81 + 0.01
    assert dg.zero_std_probability(0.9, 2) == pytest.approx(0.82, rel=1e-15)
    assert (
        dg.zero_std_probability(0.0, 8) == 1.0
        and dg.zero_std_probability(1.0, 8) == 1.0
    )
    np.testing.assert_allclose(
        dg.zero_std_probability(np.array([0.5, 0.9]), 2), [0.5, 0.82], rtol=1e-15
    )
    assert dg.expected_zero_std_fraction([0.5, 1.0], 2) == pytest.approx(
        0.75, rel=1e-15
    )


@pytest.mark.parametrize("p, g", [(0.5, 4), (0.9, 8), (0.1, 16), (0.97, 16)])
def test_monte_carlo_agrees(p, g):
    n = 40000
    exact = dg.zero_std_probability(p, g)
    mc = dg.zero_std_monte_carlo(p, g, n_groups=n, seed=1)
    assert abs(mc - exact) < 4 * np.sqrt(exact * (1 - exact) / n) + 1e-9


def test_batch_fraction_and_simulation():
    rates = np.linspace(0.0, 1.0, 21)
    exp = dg.expected_zero_std_fraction(rates, 8)
    assert exp == pytest.approx(np.mean(rates**8 + (1 - rates) ** 8))
    sims = [dg.simulate_zero_std_fraction(rates, 8, seed=s) for s in range(200)]
    assert abs(np.mean(sims) - exp) < 0.02


def test_two_sample_gaps():
    got = [round(dg.two_sample_advantage(d), 6) for d in ex.TWO_SAMPLE_GAPS]
    assert got == [0.999800, 0.980392, 0.047619]
    for d in ex.TWO_SAMPLE_GAPS:
        assert dg.two_sample_advantage(d) == pytest.approx(d / (d + 2e-4), rel=1e-12)
    # eps is read: the group [0, 1] has population std 0.5, so A = 0.5 / (0.5 + eps)
    assert dg.two_sample_advantage(1.0, eps=0.5) == pytest.approx(0.5, rel=1e-15)


def test_invalid():
    with pytest.raises(ValueError, match="pass_rate"):
        dg.zero_std_probability(1.2, 4)
    with pytest.raises(ValueError, match="group_size"):
        dg.zero_std_probability(0.5, 1)
    with pytest.raises(ValueError, match="gap"):
        dg.two_sample_advantage(0.0)
