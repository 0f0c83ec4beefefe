"""dpo_grpo.dpo: the article's DPO numbers, gradients, the closed-form optimum and input validation."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import dpo_grpo as dg
from dpo_grpo import examples as ex

P = ex.DPO_PAIRS


def test_article_pairs_logits_and_loss():
    loss, logits = dg.dpo_loss(**P, beta=0.1)[:2]
    np.testing.assert_allclose(logits, [0.02, 0.03], atol=1e-12)
    assert round(loss, 6) == 0.680728


def test_swapped_policy_logprobs():
    out = dg.dpo_loss(P["policy_rejected"], P["policy_chosen"], P["ref_chosen"], P["ref_rejected"], beta=0.1)
    np.testing.assert_allclose(out.logits, [-0.10, -0.05], atol=1e-12)
    assert round(out.loss, 6) == 0.731428


def test_chosen_probability_drops_but_loss_drops():
    c = ex.DPO_COUNTEREXAMPLE

    def loss(p):
        return dg.dpo_loss(np.log(p[:1]), np.log(p[1:2]), np.log(c["ref"][:1]), np.log(c["ref"][1:2]),
                           beta=c["beta"]).loss

    before, after = loss(c["before"]), loss(c["after"])
    assert round(before, 6) == 0.673079 and round(after, 6) == 0.639724
    assert c["after"][0] < c["before"][0]  # the chosen answer became less likely
    assert c["after"][0] / c["after"][1] == pytest.approx(2.0) and c["before"][0] / c["before"][1] == 1.0


def test_policy_equal_reference_gives_log2():
    out = dg.dpo_loss([-3.0, -1.0], [-2.0, -5.0], [-3.0, -1.0], [-2.0, -5.0])
    assert out.loss == pytest.approx(np.log(2), abs=1e-15)


def test_gradient_matches_finite_differences():
    pairs = np.stack([P["policy_chosen"], P["policy_rejected"]], axis=1)
    for loss_type, ls in (("sigmoid", 0.0), ("robust", 0.2), ("hinge", 0.0)):
        out = dg.dpo_loss(pairs[:, 0], pairs[:, 1], P["ref_chosen"], P["ref_rejected"], beta=0.1,
                          loss_type=loss_type, label_smoothing=ls)
        analytic = np.column_stack([out.grad_policy_chosen, out.grad_policy_rejected])
        numeric = dg.finite_difference(
            lambda a: dg.dpo_loss(a[:, 0], a[:, 1], P["ref_chosen"], P["ref_rejected"], beta=0.1,
                                  loss_type=loss_type, label_smoothing=ls).loss, pairs)
        assert dg.max_abs_error(analytic, numeric) < 1e-8, loss_type


def test_loss_types_closed_forms():
    z = np.array([-2.0, 0.5, 3.0])
    pc, pr, rc, rr = z, np.zeros(3), np.zeros(3), np.zeros(3)
    hinge = dg.dpo_loss(pc, pr, rc, rr, beta=1.0, loss_type="hinge").loss
    assert hinge == pytest.approx(np.mean(np.maximum(0, 1 - z)))
    s = 0.1
    robust = dg.dpo_loss(pc, pr, rc, rr, beta=1.0, loss_type="robust", label_smoothing=s).loss
    expected = np.mean((-(1 - s) * np.log(1 / (1 + np.exp(-z))) + s * np.log(1 / (1 + np.exp(z)))) / (1 - 2 * s))
    assert robust == pytest.approx(expected, rel=1e-12)
    assert dg.dpo_loss(pc, pr, rc, rr, beta=1.0, loss_type="robust").loss == pytest.approx(
        dg.dpo_loss(pc, pr, rc, rr, beta=1.0).loss)


@given(st.floats(-1e4, 1e4))
def test_log_sigmoid_stable(x):
    value = dg.log_sigmoid(x)
    assert np.isfinite(value) and value <= 0
    assert dg.log_sigmoid(x) - dg.log_sigmoid(-x) == pytest.approx(x, abs=1e-9 * max(1, abs(x)))


def test_closed_form_optimum_identity():
    assert dg.max_objective_identity_error(**ex.OBJECTIVE_IDENTITY) <= 4.5e-16 * 2


def test_optimum_beats_random_policies():
    o = ex.OBJECTIVE_IDENTITY
    pi_star, log_z = dg.optimal_policy(o["ref_policy"], o["rewards"], o["beta"])
    best = dg.kl_regularised_objective(pi_star, o["rewards"], o["ref_policy"], o["beta"])
    assert best == pytest.approx(o["beta"] * log_z, abs=1e-14)
    rng = np.random.default_rng(0)
    for p in rng.dirichlet(np.ones(3), size=50):
        assert dg.kl_regularised_objective(p, o["rewards"], o["ref_policy"], o["beta"]) < best


def test_implicit_reward_recovers_reward_up_to_constant():
    o = ex.OBJECTIVE_IDENTITY
    pi_star, log_z = dg.optimal_policy(o["ref_policy"], o["rewards"], o["beta"])
    r = dg.implicit_reward(np.log(pi_star), np.log(o["ref_policy"]), o["beta"], log_z)
    np.testing.assert_allclose(r, o["rewards"], atol=1e-12)
    # Bradley-Terry on rewards: the shared log Z cancels
    assert dg.bradley_terry_probability(r[2], r[0]) == pytest.approx(1 / (1 + np.exp(-(r[2] - r[0]))))


@pytest.mark.parametrize("kwargs, match", [
    (dict(policy_chosen=[], policy_rejected=[], ref_chosen=[], ref_rejected=[]), "policy_chosen must not be empty"),
    (dict(policy_chosen=[1.0, 2.0], policy_rejected=[1.0], ref_chosen=[1.0, 2.0], ref_rejected=[1.0, 2.0]),
     "policy_rejected must have the same shape"),
    (dict(policy_chosen=[np.nan], policy_rejected=[1.0], ref_chosen=[1.0], ref_rejected=[1.0]), "finite"),
    (dict(policy_chosen=[1.0], policy_rejected=[1.0], ref_chosen=[np.inf], ref_rejected=[1.0]), "ref_chosen"),
    (dict(policy_chosen=[1.0], policy_rejected=[2.0], ref_chosen=[3.0], ref_rejected=[4.0], beta=0), "beta"),
    (dict(policy_chosen=[1.0], policy_rejected=[2.0], ref_chosen=[3.0], ref_rejected=[4.0], beta=-1), "beta"),
    (dict(policy_chosen=[1.0], policy_rejected=[2.0], ref_chosen=[3.0], ref_rejected=[4.0], loss_type="ipo"),
     "loss_type"),
    (dict(policy_chosen=[1.0], policy_rejected=[2.0], ref_chosen=[3.0], ref_rejected=[4.0], label_smoothing=0.1),
     "label_smoothing"),
    (dict(policy_chosen=[1.0], policy_rejected=[2.0], ref_chosen=[3.0], ref_rejected=[4.0], loss_type="robust",
          label_smoothing=0.5), "label_smoothing"),
])
def test_invalid_inputs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        dg.dpo_loss(**kwargs)


def test_type_errors():
    with pytest.raises(TypeError, match="policy_chosen"):
        dg.dpo_loss("abc", [1.0], [1.0], [1.0])
    with pytest.raises(TypeError, match="beta"):
        dg.dpo_loss([1.0], [1.0], [1.0], [1.0], beta="0.1")
