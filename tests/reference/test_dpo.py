"""dpo_grpo.reference.dpo: the readable DPO loss pinned by hand, log-sigmoid, the
gradient weight, the closed-form optimum and the implicit reward."""

import math

import dpo_grpo as dg
import numpy as np
import pytest
from dpo_grpo.reference import examples as ex
from hypothesis import given
from hypothesis import strategies as st

P = ex.DPO_PAIRS


def test_gradient_weight_closed_form():
    z = np.array([0.0, 2.0, -2.0])
    np.testing.assert_allclose(
        dg.dpo_gradient_weight(z),
        [0.5, 1 / (1 + np.exp(2.0)), 1 / (1 + np.exp(-2.0))],
        rtol=1e-15,
    )
    # the weight is large for a wrongly ranked pair (z < 0) and is what scales the
    # sigmoid loss's gradient
    out = dg.trl_exact.dpo_loss(z, np.zeros(3), np.zeros(3), np.zeros(3), beta=1.0)
    np.testing.assert_allclose(
        out.grad_policy_chosen, -dg.dpo_gradient_weight(z) / 3, rtol=1e-15
    )


@given(st.floats(-1e4, 1e4))
def test_log_sigmoid_stable(x):
    value = dg.log_sigmoid(x)
    assert np.isfinite(value) and value <= 0
    assert dg.log_sigmoid(x) - dg.log_sigmoid(-x) == pytest.approx(
        x, abs=1e-9 * max(1, abs(x))
    )


def test_closed_form_optimum_identity():
    o = ex.OBJECTIVE_IDENTITY
    assert dg.max_objective_identity_error(**o) <= 4.5e-16 * 2
    # it is the largest gap over the seeded Dirichlet(1) draws (not, say, the smallest,
    # which is 0 here)
    draws = np.random.default_rng(o["seed"]).dirichlet(np.ones(3), size=o["n_policies"])
    gaps = [
        dg.objective_identity_gap(p, o["rewards"], o["ref_policy"], o["beta"])
        for p in draws
    ]
    assert dg.max_objective_identity_error(**o) == max(gaps)


def test_optimum_beats_random_policies():
    o = ex.OBJECTIVE_IDENTITY
    pi_star, log_z = dg.optimal_policy(o["ref_policy"], o["rewards"], o["beta"])
    best = dg.kl_regularised_objective(
        pi_star, o["rewards"], o["ref_policy"], o["beta"]
    )
    assert best == pytest.approx(o["beta"] * log_z, abs=1e-14)
    rng = np.random.default_rng(0)
    for p in rng.dirichlet(np.ones(3), size=50):
        assert (
            dg.kl_regularised_objective(p, o["rewards"], o["ref_policy"], o["beta"])
            < best
        )


def test_implicit_reward_recovers_reward_up_to_constant():
    o = ex.OBJECTIVE_IDENTITY
    pi_star, log_z = dg.optimal_policy(o["ref_policy"], o["rewards"], o["beta"])
    r = dg.implicit_reward(np.log(pi_star), np.log(o["ref_policy"]), o["beta"], log_z)
    np.testing.assert_allclose(r, o["rewards"], atol=1e-12)
    # Bradley-Terry on rewards: the shared log Z cancels
    assert dg.bradley_terry_probability(r[2], r[0]) == pytest.approx(
        1 / (1 + np.exp(-(r[2] - r[0])))
    )


def test_dpo_loss_is_minus_log_sigmoid_of_beta_margin():
    """Two pairs, beta 0.5. Pair 1: margin u = (-1 - -3) - (-2 - -2) = 2, logit
    beta u = 1, loss -log sigma(1) = log(1 + e^-1); pair 2: u = (-2 - -1) - (-1 - -1)
    = -1, logit -0.5, loss log(1 + e^0.5). The loss is their mean; the logits are
    returned."""
    loss, logits = dg.dpo_loss(
        [-1.0, -2.0], [-3.0, -1.0], [-2.0, -1.0], [-2.0, -1.0], 0.5
    )
    np.testing.assert_allclose(logits, [1.0, -0.5], rtol=1e-15)
    expected = (math.log1p(math.exp(-1.0)) + math.log1p(math.exp(0.5))) / 2
    assert loss == pytest.approx(expected, rel=1e-14)
    assert loss == pytest.approx(0.6436693358491648, rel=1e-12)


def test_dpo_loss_subtracts_the_reference_margin():
    """The same policy log-probs against a reference that already prefers the chosen
    answer by 2 nats: the margin is 0, the loss log 2, whatever beta."""
    for beta in (0.1, 1.0):
        loss, logits = dg.dpo_loss([-1.0], [-3.0], [-1.0], [-3.0], beta)
        assert logits[0] == 0.0 and loss == pytest.approx(math.log(2), rel=1e-15)
