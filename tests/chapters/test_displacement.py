"""dpo_grpo.chapters.displacement: likelihood displacement on a log-linear toy and TRL's
remedies."""

import numpy as np
import pytest

from dpo_grpo.chapters import displacement as dp


def test_dpo_lowers_both_log_probs_while_the_margin_grows():
    t = dp.displacement_run(steps=200)
    assert np.all(np.diff(t.margin) > 0)
    assert np.all(np.diff(t.logp_chosen) < 0) and np.all(np.diff(t.logp_rejected) < 0)
    assert t.p_other[-1] > 0.99
    # the log-probs are consistent: margin = (logp_w - logp_l) - reference gap (0,
    # uniform reference)
    np.testing.assert_allclose(t.margin, t.logp_chosen - t.logp_rejected, atol=1e-12)


def test_sft_term_raises_the_chosen_log_prob():
    t = dp.displacement_run(["sigmoid", "sft"], [1.0, 0.1], steps=200)
    assert t.logp_chosen[-1] > t.logp_chosen[0] and t.margin[-1] > 1


def test_ipo_stops_at_its_target_margin():
    t = dp.displacement_run("ipo", beta=0.5, lr=0.1, steps=2000)
    assert t.margin[-1] == pytest.approx(1.0, abs=1e-9)
    assert t.logp_chosen[-1] == pytest.approx(t.logp_chosen[500], abs=1e-9)
    assert dp.ipo_loss(1.0, 0.5) == 0.0 and dp.ipo_loss(0.0, 0.5) == 1.0
    dpo = dp.displacement_run(steps=2000)
    assert dpo.logp_chosen[-1] < dpo.logp_chosen[200] - 10


def test_ld_alpha_weights_the_verbose_tail():
    c, r, wc, wr = dp.ld_sequence_logps(np.full(10, -0.5), np.full(4, -0.5), 0.5)
    assert c == pytest.approx(-2.0 - 0.5 * 3.0) and r == pytest.approx(-2.0)
    np.testing.assert_array_equal(wc, [1, 1, 1, 1] + [0.5] * 6)
    np.testing.assert_array_equal(wr, [1, 1, 1, 1])
    assert dp.ld_sequence_logps(np.full(10, -0.5), np.full(4, -0.5), 1.0)[
        0
    ] == pytest.approx(-5.0)


def test_bad_input():
    with pytest.raises(ValueError, match="loss_type"):
        dp.displacement_run(["sigmoid", "hinge"])
    with pytest.raises(ValueError, match="loss_weights"):
        dp.displacement_run(["sigmoid", "sft"], [1.0])
    with pytest.raises(ValueError, match="ld_alpha"):
        dp.ld_sequence_logps([-1.0], [-1.0], 1.5)
