"""dpo_grpo.chapters.length_bias: Dr. GRPO's mechanism, computed on one group of
right/wrong, short/long answers."""

import numpy as np
import pytest

from dpo_grpo.chapters import length_bias as lb


def test_grpo_penalises_long_wrong_tokens_less():
    p = lb.per_token_push("grpo")
    a = 1 / (1 + 1e-4 / 0.5)  # advantages +-a: population std 0.5
    np.testing.assert_allclose(
        p.per_token,
        [-a / (4 * 20), -a / (4 * 80), a / (4 * 20), a / (4 * 80)],
        rtol=1e-12,
    )
    # each answer's total push is A_i / G whatever its length
    np.testing.assert_allclose(np.abs(p.per_answer), a / 4, rtol=1e-12)
    assert p.per_token[2] / p.per_token[3] == pytest.approx(4.0)


@pytest.mark.parametrize("loss_type", ["bnpo", "dapo", "dr_grpo"])
def test_token_level_denominators_weight_every_token_alike(loss_type):
    p = lb.per_token_push(loss_type)
    assert np.ptp(np.abs(p.per_token)) < 1e-15
    assert p.per_answer[3] / p.per_answer[2] == pytest.approx(4.0)


def test_dr_grpo_scale_depends_on_max_completion_length_dapo_does_not():
    short = lb.per_token_push("dr_grpo")
    long = lb.per_token_push("dr_grpo", max_completion_length=512)
    assert short.per_token[0] / long.per_token[0] == pytest.approx(512 / 80)
    np.testing.assert_allclose(
        np.abs(lb.per_token_push("dapo").per_token), 0.0049990002, rtol=1e-8
    )


def test_bad_input():
    with pytest.raises(ValueError, match="loss_type"):
        lb.per_token_push("mean")
    with pytest.raises(ValueError, match="lengths"):
        lb.length_group([1.0, 0.0], [3, 0])
    with pytest.raises(ValueError, match="shape"):
        lb.length_group([1.0, 0.0], [3])
