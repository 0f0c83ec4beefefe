"""dpo_grpo.chapters.update: step 7 (Adam, the warm-up schedule, the monitoring dict and
the warning signs)."""

import numpy as np
import pytest
from dpo_grpo.chapters import pipeline, rollout, scoring, token_loss, update
from testing_support import toy_reward_fns


def test_monitor_keys():
    st_ = pipeline.new_state()
    logs = pipeline.grpo_step(st_, toy_reward_fns(), num_iterations=2)
    assert len(logs) == 2 and [l["epoch"] for l in logs] == [0, 1]
    for key in (
        "reward",
        "reward_std",
        "frac_reward_zero_std",
        "rewards/correct/mean",
        "rewards/brevity/std",
        "kl",
        "clip_ratio/region_mean",
        "completions/mean_length",
        "completions/max_length",
        "completions/clipped_ratio",
        "policy_version",
        "loss",
        "learning_rate",
    ):
        assert key in logs[0], key
    assert "kl" not in pipeline.grpo_step(st_, toy_reward_fns(), beta=0.0)[0]


def test_monitor_values_by_hand():
    # three completions of one prompt: one stops at EOS after 2 tokens, two hit max_len
    # = 3 without EOS
    tok = np.array([[3, rollout.EOS, rollout.EOS], [1, 2, 4], [2, 2, 2]])
    mask = np.array([[1.0, 1, 0], [1, 1, 1], [1, 1, 1]])
    ids = np.zeros(3, dtype=np.int64)
    old = rollout.token_logps(np.zeros((1, 3, 5)), ids, tok)
    ro = rollout.Rollout(
        ids,
        tok,
        mask,
        old,
        old,
        3,
        7,
        {"temperature": 1.0, "max_len": 3, "group_size": 3, "engine_logit_noise": 0.0},
    )
    rpf = scoring.score(
        ro, [scoring.target_token_reward([4]), scoring.length_penalty(0.1)]
    )
    # brevity counts the tokens before EOS (the EOS itself is free): 1, 3, 3
    np.testing.assert_allclose(rpf, [[0.0, -0.1], [1.0, -0.3], [0.0, -0.3]], rtol=1e-15)
    stats = scoring.group_statistics(rpf, ids, 3)
    log = update.monitor(
        ro,
        stats,
        rpf,
        token_loss.loss_and_grad(old, ro, stats.advantages, old),
        reward_names=["c", "b"],
    )
    assert (
        log["completions/clipped_ratio"] == pytest.approx(2 / 3)
        and log["completions/max_length"] == 3
    )
    assert log["completions/mean_length"] == pytest.approx(8 / 3)
    assert log["rewards/c/mean"] == pytest.approx(1 / 3) and log[
        "rewards/c/std"
    ] == pytest.approx(np.sqrt(1 / 3))
    assert log["rewards/b/mean"] == pytest.approx(-0.7 / 3)
    # ddof 1: squares sum to 0.08 / 3, over 2
    assert log["rewards/b/std"] == pytest.approx(np.sqrt(0.04 / 3))
    assert log["policy_version"] == 7 and log["kl"] == 0.0  # new = ref


def test_linear_warmup_and_adam_by_hand():
    assert [update.linear_warmup_lr(s, 0.3, 3) for s in range(5)] == pytest.approx(
        [0.1, 0.2, 0.3, 0.3, 0.3]
    )
    # bias-corrected Adam under a constant gradient moves each weight by lr * g / (|g| +
    # eps) every step
    opt = update.Adam()
    g = np.array([0.5, -4.0])
    x = opt.step(np.array([1.0, -2.0]), g, 0.1)
    np.testing.assert_allclose(
        x, [1.0 - 0.1 * 0.5 / (0.5 + 1e-8), -2.0 + 0.1 * 4.0 / (4.0 + 1e-8)], rtol=1e-13
    )
    x = opt.step(x, g, 0.1)
    np.testing.assert_allclose(
        x, [1.0 - 0.2 * 0.5 / (0.5 + 1e-8), -2.0 + 0.2 * 4.0 / (4.0 + 1e-8)], rtol=1e-12
    )
    assert opt.t == 2


def _hist(rewards, lengths, kls, zero):
    return [
        {"reward": r, "completions/mean_length": l, "kl": k, "frac_reward_zero_std": z}
        for r, l, k, z in zip(rewards, lengths, kls, zero)
    ]


def test_warning_signs():
    calm = _hist([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [10] * 6, [0.01] * 6, [0.1] * 6)
    assert update.warning_signs(calm) == []
    hack = _hist(
        [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [10, 12, 15, 20, 25, 30], [0.01] * 6, [0.1] * 6
    )
    assert any("length" in f for f in update.warning_signs(hack))
    spike = _hist([0.1] * 6, [10] * 6, [0.01, 0.01, 0.012, 0.01, 0.011, 0.2], [0.1] * 6)
    assert any("KL spike" in f for f in update.warning_signs(spike))
    zero = _hist([0.1] * 6, [10] * 6, [0.01] * 6, [0.1, 0.1, 0.1, 0.5, 0.6, 0.7])
    assert any("zero-std" in f for f in update.warning_signs(zero))
    with pytest.raises(ValueError):
        update.warning_signs(calm[:1])
