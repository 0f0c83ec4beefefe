"""dpo_grpo.reference.examples: the random GRPO batch generator (the worked examples
themselves are checked, number by number, in the test module of the code that consumes
them)."""

import dpo_grpo as dg
import numpy as np
import pytest
from dpo_grpo.reference import examples as ex


def test_random_grpo_batch_shapes_masks_and_determinism():
    b = ex.random_grpo_batch(3, batch=7, length=9, min_length=4)
    assert list(b) == ["new_logps", "old_logps", "ref_logps", "advantages", "mask"]
    assert all(
        b[k].shape == (7, 9) for k in ("new_logps", "old_logps", "ref_logps", "mask")
    )
    assert b["advantages"].shape == (7,)
    lengths = b["mask"].sum(1)
    assert lengths[0] == 9 and lengths.min() >= 4
    assert np.all(np.diff(b["mask"], axis=1) <= 0), "prefix masks: ones, then zeros"
    assert np.all(b["old_logps"] < 0)
    again = ex.random_grpo_batch(3, batch=7, length=9, min_length=4)
    assert all(np.array_equal(b[k], again[k]) for k in b)
    assert not np.array_equal(
        b["new_logps"], ex.random_grpo_batch(4, batch=7, length=9)["new_logps"]
    )
    assert ex.random_grpo_batch(adv_2d=True)["advantages"].shape == (5, 6)
    still = ex.random_grpo_batch(new_noise=0.0, ref_noise=0.0)
    assert np.array_equal(still["new_logps"], still["old_logps"])
    assert np.isfinite(
        dg.trl_exact.grpo_loss(**b).loss
    )  # directly usable as grpo_loss(**batch)


@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        (dict(batch=0), ValueError, "batch"),
        (dict(length=2.5), TypeError, "length"),
        (dict(length=3, min_length=4), ValueError, "min_length"),
        (dict(new_noise=-1), ValueError, "new_noise"),
        (dict(ref_noise=float("nan")), ValueError, "ref_noise"),
        (dict(seed=-1), ValueError, "seed"),
        (dict(adv_2d="yes"), TypeError, "adv_2d"),
    ],
)
def test_random_grpo_batch_rejects_bad_arguments(kwargs, err, match):
    with pytest.raises(err, match=match):
        ex.random_grpo_batch(**kwargs)
