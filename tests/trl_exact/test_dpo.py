"""dpo_grpo.trl_exact.dpo: the article's DPO numbers, gradients, the loss types and
input validation."""

import dpo_grpo as dg
import numpy as np
import pytest
from dpo_grpo.reference import examples as ex

P = ex.DPO_PAIRS


def test_article_pairs_logits_and_loss():
    loss, logits = dg.trl_exact.dpo_loss(**P, beta=0.1)[:2]
    np.testing.assert_allclose(logits, [0.02, 0.03], atol=1e-12)
    assert round(loss, 6) == 0.680728


def test_article_pairs_rewards_metrics_and_gradient():
    out = dg.trl_exact.dpo_loss(**P, beta=0.1)
    np.testing.assert_allclose(out.chosen_rewards, [-0.02, 0.02], atol=1e-15)
    np.testing.assert_allclose(out.rejected_rewards, [-0.04, -0.01], atol=1e-15)
    m = out.metrics
    assert m["rewards/chosen"] == pytest.approx(0.0, abs=1e-15)
    assert m["rewards/rejected"] == pytest.approx(-0.025, abs=1e-15)
    assert m["rewards/margins"] == pytest.approx(0.025, abs=1e-15)
    assert m["rewards/accuracies"] == 1.0
    # d/d pi_c of mean(-log sigmoid(z)) = -sigmoid(-z) beta / P, and the rejected
    # gradient is its negative
    expected = -(1 / (1 + np.exp([0.02, 0.03]))) * 0.1 / 2
    np.testing.assert_allclose(out.grad_policy_chosen, expected, rtol=1e-13)
    np.testing.assert_array_equal(out.grad_policy_rejected, -out.grad_policy_chosen)


def test_accuracy_counts_strict_wins_only():
    # TRL: (chosen_rewards > rejected_rewards).float().mean(); a tie (policy =
    # reference) is not a win
    out = dg.trl_exact.dpo_loss(
        [-1.0, -1.0, -1.0], [-2.0, -1.0, -3.0], [-1.0, -1.0, -1.0], [-2.0, -1.0, -2.0]
    )
    # pair 3 wins, pairs 1 and 2 tie at 0
    assert out.metrics["rewards/accuracies"] == pytest.approx(1 / 3)


def test_swapped_policy_logprobs():
    out = dg.trl_exact.dpo_loss(
        P["policy_rejected"],
        P["policy_chosen"],
        P["ref_chosen"],
        P["ref_rejected"],
        beta=0.1,
    )
    np.testing.assert_allclose(out.logits, [-0.10, -0.05], atol=1e-12)
    assert round(out.loss, 6) == 0.731428


def test_chosen_probability_drops_but_loss_drops():
    c = ex.DPO_COUNTEREXAMPLE

    def loss(p):
        return dg.trl_exact.dpo_loss(
            np.log(p[:1]),
            np.log(p[1:2]),
            np.log(c["ref"][:1]),
            np.log(c["ref"][1:2]),
            beta=c["beta"],
        ).loss

    before, after = loss(c["before"]), loss(c["after"])
    assert round(before, 6) == 0.673079 and round(after, 6) == 0.639724
    assert c["after"][0] < c["before"][0]  # the chosen answer became less likely
    assert (
        c["after"][0] / c["after"][1] == pytest.approx(2.0)
        and c["before"][0] / c["before"][1] == 1.0
    )


def test_policy_equal_reference_gives_log2():
    out = dg.trl_exact.dpo_loss([-3.0, -1.0], [-2.0, -5.0], [-3.0, -1.0], [-2.0, -5.0])
    assert out.loss == pytest.approx(np.log(2), abs=1e-15)
    # equal implicit rewards: no pair is ranked correctly
    assert out.metrics["rewards/accuracies"] == 0.0


def test_gradient_matches_finite_differences():
    pairs = np.stack([P["policy_chosen"], P["policy_rejected"]], axis=1)
    for loss_type, ls in (("sigmoid", 0.0), ("robust", 0.2), ("hinge", 0.0)):
        out = dg.trl_exact.dpo_loss(
            pairs[:, 0],
            pairs[:, 1],
            P["ref_chosen"],
            P["ref_rejected"],
            beta=0.1,
            loss_type=loss_type,
            label_smoothing=ls,
        )
        analytic = np.column_stack([out.grad_policy_chosen, out.grad_policy_rejected])
        numeric = dg.finite_difference(
            lambda a: (
                dg.trl_exact.dpo_loss(
                    a[:, 0],
                    a[:, 1],
                    P["ref_chosen"],
                    P["ref_rejected"],
                    beta=0.1,
                    loss_type=loss_type,
                    label_smoothing=ls,
                ).loss
            ),
            pairs,
        )
        assert dg.max_abs_error(analytic, numeric) < 1e-8, loss_type


def test_loss_types_closed_forms():
    z = np.array([-2.0, 0.5, 3.0])
    pc, pr, rc, rr = z, np.zeros(3), np.zeros(3), np.zeros(3)
    hinge = dg.trl_exact.dpo_loss(pc, pr, rc, rr, beta=1.0, loss_type="hinge").loss
    assert hinge == pytest.approx(np.mean(np.maximum(0, 1 - z)))
    s = 0.1
    robust = dg.trl_exact.dpo_loss(
        pc, pr, rc, rr, beta=1.0, loss_type="robust", label_smoothing=s
    ).loss
    expected = np.mean(
        (-(1 - s) * np.log(1 / (1 + np.exp(-z))) + s * np.log(1 / (1 + np.exp(z))))
        / (1 - 2 * s)
    )
    assert robust == pytest.approx(expected, rel=1e-12)
    assert dg.trl_exact.dpo_loss(
        pc, pr, rc, rr, beta=1.0, loss_type="robust"
    ).loss == pytest.approx(dg.trl_exact.dpo_loss(pc, pr, rc, rr, beta=1.0).loss)


def test_hinge_gradient_is_zero_from_the_kink_on():
    # torch.relu(1 - z), as TRL computes it, has gradient 0 at z = 1: only pairs with z
    # < 1 are pushed
    z = np.array([-2.0, 0.5, 1.0, 3.0])
    out = dg.trl_exact.dpo_loss(
        z, np.zeros(4), np.zeros(4), np.zeros(4), beta=1.0, loss_type="hinge"
    )
    np.testing.assert_array_equal(out.grad_policy_chosen, [-0.25, -0.25, 0.0, 0.0])
    assert out.loss == pytest.approx((3.0 + 0.5) / 4, abs=1e-15)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (
            dict(policy_chosen=[], policy_rejected=[], ref_chosen=[], ref_rejected=[]),
            "policy_chosen must not be empty",
        ),
        (
            dict(
                policy_chosen=[1.0, 2.0],
                policy_rejected=[1.0],
                ref_chosen=[1.0, 2.0],
                ref_rejected=[1.0, 2.0],
            ),
            "policy_rejected must have the same shape",
        ),
        (
            dict(
                policy_chosen=[np.nan],
                policy_rejected=[1.0],
                ref_chosen=[1.0],
                ref_rejected=[1.0],
            ),
            "finite",
        ),
        (
            dict(
                policy_chosen=[1.0],
                policy_rejected=[1.0],
                ref_chosen=[np.inf],
                ref_rejected=[1.0],
            ),
            "ref_chosen",
        ),
        (
            dict(
                policy_chosen=[1.0],
                policy_rejected=[2.0],
                ref_chosen=[3.0],
                ref_rejected=[4.0],
                beta=0,
            ),
            "beta",
        ),
        (
            dict(
                policy_chosen=[1.0],
                policy_rejected=[2.0],
                ref_chosen=[3.0],
                ref_rejected=[4.0],
                beta=-1,
            ),
            "beta",
        ),
        (
            dict(
                policy_chosen=[1.0],
                policy_rejected=[2.0],
                ref_chosen=[3.0],
                ref_rejected=[4.0],
                loss_type="ipo",
            ),
            "loss_type",
        ),
        (
            dict(
                policy_chosen=[1.0],
                policy_rejected=[2.0],
                ref_chosen=[3.0],
                ref_rejected=[4.0],
                label_smoothing=0.1,
            ),
            "label_smoothing",
        ),
        (
            dict(
                policy_chosen=[1.0],
                policy_rejected=[2.0],
                ref_chosen=[3.0],
                ref_rejected=[4.0],
                loss_type="robust",
                label_smoothing=0.5,
            ),
            "label_smoothing",
        ),
    ],
)
def test_invalid_inputs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        dg.trl_exact.dpo_loss(**kwargs)


def test_type_errors():
    with pytest.raises(TypeError, match="policy_chosen"):
        dg.trl_exact.dpo_loss("abc", [1.0], [1.0], [1.0])
    with pytest.raises(TypeError, match="beta"):
        dg.trl_exact.dpo_loss([1.0], [1.0], [1.0], [1.0], beta="0.1")
