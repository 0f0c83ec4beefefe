"""Tests of dpo_grpo.chapters.adam_scaling: Adam cancels a constant scale, not a
fluctuating one."""

import numpy as np

from dpo_grpo.chapters import adam_scaling


def test_adam_dilution_cancels_a_constant_scale_not_a_fluctuating_one():
    out = adam_scaling.adam_dilution(steps=100, seed=1)
    assert out["constant_gap"] < 1e-9  # only eps separates them
    gap = np.abs(out["diluted"] - out["plain"]).max()
    assert gap > 1e-5
    # the diluted updates follow 1 - f: steps with more silent groups move less
    r = out["diluted"] / out["plain"]
    assert np.corrcoef(r, 1 - out["f"])[0, 1] > 0.2 and np.ptp(r) > 0.1
