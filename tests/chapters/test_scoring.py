"""dpo_grpo.chapters.scoring: steps 3 and 4 (rewards, group statistics over complete
groups)."""

import numpy as np
import pytest

from dpo_grpo.chapters import scoring
from dpo_grpo.trl_exact.advantages import reward_advantages
from testing_support import toy_reward_fns, toy_rollout


def test_assert_complete_groups():
    scoring.assert_complete_groups([0, 0, 1, 1], 2)
    with pytest.raises(ValueError, match="block 0"):
        scoring.assert_complete_groups([0, 1, 0, 1], 2)
    with pytest.raises(ValueError, match="more than one block"):
        scoring.assert_complete_groups([0, 0, 0, 0], 2)
    with pytest.raises(ValueError, match="do not split"):
        scoring.assert_complete_groups([0, 0, 0], 2)


def test_group_messages_in_english_and_chinese(monkeypatch):
    """Chapter 5 prints these messages: English as before, Chinese under
    DPO_GRPO_LANG=zh."""
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    with pytest.raises(ValueError) as en:
        scoring.assert_complete_groups([0, 1, 0, 1], 2)
    assert str(en.value) == (
        "group boundary broken: block 0 (rows 0..1) mixes prompt ids [0, 1]"
    )
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    with pytest.raises(
        ValueError, match=r"组边界被打破：第 0 块（第 0\.\.1 行）.*\[0, 1\]"
    ):
        scoring.assert_complete_groups([0, 1, 0, 1], 2)
    with pytest.raises(ValueError, match="占了不止一个 2 行的块"):
        scoring.assert_complete_groups([0, 0, 0, 0], 2)


def test_group_statistics_matches_reward_advantages():
    _, ro = toy_rollout()
    rpf = scoring.score(ro, toy_reward_fns())
    stats = scoring.group_statistics(rpf, ro.prompt_ids, 4)
    ref = reward_advantages(rpf, 4)
    np.testing.assert_allclose(stats.advantages, ref.advantages)
    total = rpf.sum(1).reshape(-1, 4)
    np.testing.assert_allclose(stats.mean, total.mean(1))
    np.testing.assert_allclose(stats.std, total.std(1, ddof=1))
    with pytest.raises(ValueError, match="group boundary"):
        scoring.group_statistics(
            rpf[::-1][np.r_[0:2, 6:8, 2:6]], ro.prompt_ids[np.r_[0:2, 4:6, 2:4, 6:8]], 4
        )


def test_score_none_becomes_nan():
    _, ro = toy_rollout()
    rpf = scoring.score(ro, [lambda p, c: None if p == 1 else 1.0])
    assert np.isnan(rpf[:4]).all() and (rpf[4:] == 1).all()
    with pytest.raises(TypeError):
        scoring.score(ro, [])
