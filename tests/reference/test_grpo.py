"""dpo_grpo.reference.grpo: the readable GRPO loss pinned term by term (normaliser,
clip, k3 penalty, sign, gradient), the clipped objective's platform values and its
gradient with delta."""

import math

import dpo_grpo as dg
import numpy as np
import pytest
from dpo_grpo.reference import examples as ex


def test_clipped_objective_platform_values():
    eps = 0.2
    np.testing.assert_allclose(dg.clipped_objective([1.5, 2.0], 1.0, eps), [1.2, 1.2])
    np.testing.assert_allclose(
        dg.clipped_objective([0.5, 0.1], -1.0, eps), [-0.8, -0.8]
    )
    # wrong direction: not clipped
    np.testing.assert_allclose(dg.clipped_objective([1.5], -1.0, eps), [-1.5])
    # two-sided cap
    np.testing.assert_allclose(
        dg.clipped_objective([3.0], -1.0, eps, delta=2.0), [-2.0]
    )


def test_clipped_objective_grad_with_delta():
    # A < 0: the unclipped branch is min(rho, delta) A, flat (gradient 0) once rho >
    # delta
    grad = dg.clipped_objective_grad([0.5, 1.5, 2.5], -1.0, epsilon=0.2, delta=2.0)
    # low platform, wrong-direction slope, capped
    np.testing.assert_array_equal(grad, [0.0, -1.0, 0.0])
    np.testing.assert_array_equal(
        dg.clipped_objective_grad([0.5, 1.5, 2.5], -1.0, epsilon=0.2), [0.0, -1.0, -1.0]
    )
    # A > 0: the upper clip at 1 + eps acts before delta does
    np.testing.assert_array_equal(
        dg.clipped_objective_grad([0.5, 1.1, 2.5], 2.0, epsilon=0.2, delta=2.0),
        [2.0, 2.0, 0.0],
    )


# --- grpo_loss, pinned term by term on batches small enough to compute by hand ------
# (one answer per row, log-probs chosen so that each ratio is a round number)

ONES = np.ones((1, 1))


def test_grpo_loss_normaliser_is_mean_over_tokens_then_over_answers():
    """Answer 0 has one token, answer 1 three; on-policy (ratio 1), beta 0, so each
    token's loss is -A. Mean over each answer's tokens, then over answers:
    (-3 + -1) / 2 = -2 (a mean over all four tokens would give -6 / 4 = -1.5). Each
    token's gradient is its weight 1 / (B |y_i|) times -A."""
    zeros = np.zeros((2, 3))
    mask = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    loss, grad = dg.grpo_loss(zeros, zeros, zeros, [3.0, 1.0], mask, beta=0.0)
    assert loss == pytest.approx(-2.0, abs=1e-15)
    np.testing.assert_allclose(
        grad, [[-3 / 2, 0, 0], [-1 / 6, -1 / 6, -1 / 6]], rtol=1e-15, atol=0
    )


def test_grpo_loss_clips_the_ratio_on_the_side_the_advantage_pushes():
    """Four one-token answers, epsilon 0.2, beta 0. A = +2 at ratio 1.5: the clip
    caps it at 1.2 (loss -2.4, gradient 0); A = +2 at ratio 1.1: inside (loss -2.2,
    gradient -2.2); A = -1 at ratio 0.5: capped at 0.8 (loss 0.8, gradient 0); A = -1
    at ratio 1.5: the wrong direction is not clipped (loss 1.5, gradient 1.5). Each
    answer weighs 1/4."""
    new = np.log([[1.5], [1.1], [0.5], [1.5]])
    zeros = np.zeros((4, 1))
    loss, grad = dg.grpo_loss(
        new, zeros, zeros, [2.0, 2.0, -1.0, -1.0], np.ones((4, 1)), beta=0.0
    )
    assert loss == pytest.approx((-2.4 - 2.2 + 0.8 + 1.5) / 4, rel=1e-14)
    np.testing.assert_allclose(
        grad[:, 0], [0.0, -2.2 / 4, 0.0, 1.5 / 4], rtol=1e-14, atol=0
    )


def test_grpo_loss_kl_term_is_beta_times_k3_of_ref_over_new():
    """A = 0 and on-policy, so only the KL term is left: with ref - new = log 2,
    k3 = e^(ref-new) - (ref-new) - 1 = 1 - log 2, so the loss is beta (1 - log 2) and
    its gradient beta (1 - e^(ref-new)) = -beta (k1 = new - ref would give a loss of
    -beta log 2 and a gradient of +beta)."""
    beta = 0.04
    loss, grad = dg.grpo_loss(
        ONES * 0, ONES * 0, np.log(2) * ONES, [0.0], ONES, beta=beta
    )
    assert loss == pytest.approx(beta * (1 - math.log(2)), rel=1e-14)
    assert grad[0, 0] == pytest.approx(-beta, rel=1e-14)


def test_grpo_loss_is_minus_the_objective_so_descent_raises_good_answers():
    """The loss is the negative of the clipped objective: on-policy with A = +1 it is
    -1, and its gradient is negative, so a gradient-descent step raises the log-prob of
    an answer with a positive advantage (and lowers it for A < 0)."""
    loss, grad = dg.grpo_loss(ONES * 0, ONES * 0, ONES * 0, [1.0], ONES, beta=0.0)
    assert loss == -1.0 and grad[0, 0] == -1.0
    loss, grad = dg.grpo_loss(ONES * 0, ONES * 0, ONES * 0, [-1.0], ONES, beta=0.0)
    assert loss == 1.0 and grad[0, 0] == 1.0


def test_grpo_loss_gradient_matches_finite_differences():
    b = ex.random_grpo_batch(3, batch=4, length=6)
    _, grad = dg.grpo_loss(**b)
    numeric = dg.finite_difference(
        lambda x: dg.grpo_loss(**{**b, "new_logps": x})[0], b["new_logps"]
    )
    np.testing.assert_allclose(grad, numeric * b["mask"], atol=1e-7)
