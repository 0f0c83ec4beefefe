"""dpo_grpo.chapters.dpo_beta: DPO's beta under SGD scales the step; under Adam, on
shared parameters, it decides which pairs still count."""

import numpy as np
import pytest

from dpo_grpo.chapters import dpo_beta as db
from dpo_grpo.reference.dpo import sigmoid


def test_pair_weights_closed_form():
    w = db.pair_weights([0.2, 20.0], 1.0)
    s = sigmoid(np.array([-0.2, -20.0]))
    np.testing.assert_allclose(w, s / s.sum(), rtol=1e-14)
    assert (
        db.pair_weights(db.MARGINS, 0.1)[3]
        > 0.08
        > 1e-6
        > db.pair_weights(db.MARGINS, 1.0)[3]
    )


def test_no_pair_has_a_parameter_of_its_own():
    # every parameter moves two pairs' margins or more: Adam cannot normalise a pair
    # on its own
    assert db.DIRECTIONS.shape[1] < db.DIRECTIONS.shape[0]
    assert ((db.DIRECTIONS != 0).sum(axis=0) >= 2).all()


def test_sgd_scales_with_beta_adam_does_not():
    c = db.beta_under_optimisers()
    assert c.sgd_first_step[1.0] / c.sgd_first_step[0.1] > 4
    # Adam's first step is lr * sign(g) per coordinate, for any beta
    assert c.adam_first_step[0.1] == pytest.approx(0.01, rel=1e-5)
    assert c.adam_first_step[1.0] == pytest.approx(0.01, rel=1e-5)
    assert c.sgd_gain[1.0][0] / c.sgd_gain[0.1][0] > 4
    assert 1.0 < c.adam_gain[1.0][0] / c.adam_gain[0.1][0] < 1.2
    assert c.adam_scale_error < 1e-5


def test_beta_decides_which_pairs_count_under_adam():
    c = db.beta_under_optimisers()
    # at beta = 0.1 the well separated pair outvotes the three others on the shared
    # parameter and its margin grows; at beta = 1 it no longer counts and its
    # margin falls
    assert c.shared_pull[0.1][3] > -c.shared_pull[0.1][:3].sum() > 0
    assert 0 < c.shared_pull[1.0][3] < 1e-8 < -c.shared_pull[1.0][:3].sum()
    assert c.adam_gain[0.1][3] > 0.4
    assert c.adam_gain[1.0][3] < -0.4
    # not an Adam-epsilon stall: without epsilon the picture is the same
    path = db.optimise(db.MARGINS, 1.0, adam_eps=0.0)
    np.testing.assert_allclose(
        db.margins_along(path[-1]) - db.MARGINS, c.adam_gain[1.0], atol=1e-6
    )


def test_adam_is_invariant_to_the_loss_scale_without_eps():
    a = db.optimise(db.MARGINS, 0.3, steps=20, adam_eps=0.0)
    b = db.optimise(db.MARGINS, 0.3, steps=20, adam_eps=0.0, loss_scale=7.0)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    s = db.optimise(db.MARGINS, 0.3, steps=20, optimizer="sgd")
    t = db.optimise(db.MARGINS, 0.3, steps=20, optimizer="sgd", loss_scale=7.0)
    assert np.abs(s - t).max() > 1e-4


def test_bad_input():
    with pytest.raises(ValueError, match="optimizer"):
        db.optimise(db.MARGINS, 0.1, optimizer="rmsprop")
    with pytest.raises(ValueError, match="beta"):
        db.pair_weights([1.0], 0.0)
    with pytest.raises(ValueError, match="directions"):
        db.optimise([0.1, 0.2], 0.1, directions=np.eye(3))
