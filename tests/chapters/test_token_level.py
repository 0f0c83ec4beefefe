"""dpo_grpo.chapters.token_level: the token-level worked example of chapter 3 (log-probs
from logits, ratios that vary within an answer, clip regions, loss_type weights, k3,
loss and per-token gradient)."""

import numpy as np
import pytest

from dpo_grpo.chapters import token_level as tl
from dpo_grpo.trl_exact.grpo import grpo_loss

EX = tl.token_level_example()


def test_log_probs_are_gathered_from_the_logits():
    for key in ("old", "new", "ref"):
        z = EX.logits[key][1, 2]  # answer 2, third token (id 0)
        assert EX.logps[key][1, 2] == pytest.approx(
            z[0] - np.log(np.exp(z).sum()), abs=1e-12
        )
        assert np.all(EX.logps[key][EX.mask == 0] == 0)
    np.testing.assert_array_equal(EX.lengths, [5, 3, 7])
    np.testing.assert_allclose(
        EX.advantages, [np.sqrt(2), -np.sqrt(0.5), -np.sqrt(0.5)], rtol=1e-3
    )


def test_ratios_vary_within_each_answer_and_regions_are_mixed():
    tab = tl.token_table(EX)
    for i, n in enumerate(EX.lengths):
        r = tab.ratio[i, :n]
        assert np.ptp(r) > 0.05
    valid = tab.region[EX.mask > 0]
    counts = {
        k: int((valid == k).sum()) for k in ("inside", "platform", "wrong_direction")
    }
    assert counts == {"inside": 9, "platform": 3, "wrong_direction": 3}
    # clipped tokens have exactly zero surrogate gradient: with beta = 0 their gradient
    # is 0
    tab0 = tl.token_table(EX, beta=0.0)
    assert np.all(tab0.grad[tab0.region == "platform"] == 0)
    assert np.all(tab0.grad[(tab0.region != "platform") & (EX.mask > 0)] != 0)


@pytest.mark.parametrize("loss_type", tl.LOSS_TYPES_SHOWN)
def test_weights_and_gradient_match_finite_differences(loss_type):
    tab = tl.token_table(EX, loss_type=loss_type)
    # the loss is the weighted sum of per-token losses
    assert tab.loss == pytest.approx(
        float((tab.weight * tab.per_token_loss).sum()), rel=1e-12
    )
    new = EX.logps["new"].copy()
    fd = np.zeros_like(new)
    h = 1e-6
    for i, t in zip(*np.nonzero(EX.mask)):
        for sign in (1, -1):
            x = new.copy()
            x[i, t] += sign * h
            fd[i, t] += (
                sign
                * grpo_loss(
                    x,
                    EX.logps["old"],
                    EX.logps["ref"],
                    EX.advantages,
                    EX.mask,
                    loss_type=loss_type,
                ).loss
                / (2 * h)
            )
    np.testing.assert_allclose(tab.grad, fd, atol=1e-7)


def test_loss_type_weights_closed_forms():
    m = EX.mask
    np.testing.assert_allclose(tl.loss_type_weights(m, "grpo")[0, 0], 1 / (3 * 5))
    np.testing.assert_allclose(tl.loss_type_weights(m, "grpo")[2, 0], 1 / (3 * 7))
    np.testing.assert_allclose(tl.loss_type_weights(m, "dapo")[0, 0], 1 / 15)
    np.testing.assert_allclose(tl.loss_type_weights(m, "bnpo")[2, 6], 1 / 15)
    np.testing.assert_allclose(tl.loss_type_weights(m, "dr_grpo")[1, 0], 1 / (3 * 7))
    np.testing.assert_allclose(
        tl.loss_type_weights(m, "dr_grpo", max_completion_length=100)[1, 0], 1 / 300
    )
    assert tl.loss_type_weights(m, "grpo")[1, 5] == 0


def test_k3_per_token_and_rows():
    tab = tl.token_table(EX)
    d = EX.logps["ref"] - EX.logps["new"]
    np.testing.assert_allclose(tab.k3, (np.exp(d) - d - 1) * EX.mask, atol=1e-15)
    assert len(tab.rows) == 15 and tab.rows[0]["answer"] == 0 and tab.rows[-1]["t"] == 6


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="rewards"):
        tl.token_level_example(rewards=[1.0, 0.0])
    with pytest.raises(ValueError, match="token_ids"):
        tl.token_level_example(token_ids=[[1, -1, 2]], rewards=[1.0])
    with pytest.raises(TypeError, match="example"):
        tl.token_table("not an example")
    with pytest.raises(ValueError, match="loss_type"):
        tl.loss_type_weights(EX.mask, "sum")
