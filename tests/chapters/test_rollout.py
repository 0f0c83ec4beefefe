"""dpo_grpo.chapters.rollout: steps 1, 2 and 5 on the toy table policy (prompt
selection, the frozen rollout, log-probs, the chain rule to the logits, engine
weights)."""

import numpy as np
import pytest

import dpo_grpo as dg
from dpo_grpo.chapters import rollout, scoring, token_loss
from testing_support import toy_reward_fns, toy_rollout


def test_rollout_layout_and_old_logps():
    th, ro = toy_rollout()
    assert ro.token_ids.shape == ro.mask.shape == ro.old_logps.shape == (8, 5)
    assert ro.prompt_ids.tolist() == [1] * 4 + [4] * 4
    for row, m in zip(ro.token_ids, ro.mask):
        n = int(m.sum())
        assert n >= 1 and m[:n].all() and not m[n:].any()  # valid prefix, then padding
        assert (row[: n - 1] != rollout.EOS).all()  # no EOS before the last valid token
        assert (
            n == 5 or row[n - 1] == rollout.EOS
        )  # stopped by EOS unless it hit max_len
    expected = rollout.token_logps(th, ro.prompt_ids, ro.token_ids)
    np.testing.assert_array_equal(ro.old_logps, expected)
    np.testing.assert_array_equal(ro.sampling_logps, ro.old_logps)  # no engine noise
    assert np.array_equal(ro.lengths, ro.mask.sum(1))


def test_rollout_is_a_frozen_snapshot():
    th, ro = toy_rollout()
    old = ro.old_logps.copy()
    th += 10.0  # later updates of the live weights
    np.testing.assert_array_equal(ro.old_logps, old)


def test_engine_noise_gives_different_sampling_logps():
    _, ro = toy_rollout(engine_logit_noise=0.3)
    m = ro.mask.astype(bool)
    assert np.abs(ro.sampling_logps - ro.old_logps)[m].max() > 1e-3


def test_max_len_and_temperature():
    th, ro = toy_rollout(max_len=2, temperature=2.0)
    assert ro.mask[:, 2:].sum() == 0
    np.testing.assert_allclose(
        ro.old_logps, rollout.token_logps(th, ro.prompt_ids, ro.token_ids, 2.0)
    )
    with pytest.raises(ValueError, match="max_len"):
        rollout.sample_rollout(
            th, np.array([0]), 2, np.random.default_rng(0), max_len=9
        )


def test_logits_gradient_matches_finite_differences():
    th, ro = toy_rollout(temperature=1.5)
    g = np.random.default_rng(3).normal(size=ro.token_ids.shape) * ro.mask

    def f(x):
        return float(
            (g * rollout.token_logps(x, ro.prompt_ids, ro.token_ids, 1.5)).sum()
        )

    assert (
        dg.max_abs_error(
            rollout.logits_gradient(th, ro, g), dg.finite_difference(f, th, h=1e-6)
        )
        < 1e-8
    )


def test_gradient_step_lowers_the_loss():
    th, ro = toy_rollout()
    adv = scoring.group_statistics(
        scoring.score(ro, toy_reward_fns()), ro.prompt_ids, 4
    ).advantages
    ref = rollout.token_logps(th, ro.prompt_ids, ro.token_ids)

    def loss(x):
        return token_loss.loss_and_grad(
            rollout.token_logps(x, ro.prompt_ids, ro.token_ids), ro, adv, ref
        ).loss

    out = token_loss.loss_and_grad(
        rollout.token_logps(th, ro.prompt_ids, ro.token_ids), ro, adv, ref
    )
    g = rollout.logits_gradient(th, ro, out.grad)
    assert loss(th - 0.05 * g) < loss(th)


def test_engine_importance_weights_arithmetic():
    old = np.log(np.array([[0.5, 0.4, 0.3], [0.2, 0.2, 0.9]]))
    samp = np.log(np.array([[0.25, 0.4, 0.6], [0.2, 0.1, 0.1]]))
    mask = np.array([[1, 1, 1], [1, 1, 0]])
    tok = rollout.engine_importance_weights(
        old, samp, mask, mode="token_truncate", clip_max=None
    )
    np.testing.assert_allclose(tok[0], [2.0, 1.0, 0.5])
    np.testing.assert_allclose(tok[1, :2], [1.0, 2.0])
    assert tok[1, 2] == 1.0  # padding contributes log-ratio 0
    seq = rollout.engine_importance_weights(
        old, samp, mask, mode="sequence_truncate", clip_max=None
    )
    np.testing.assert_allclose(seq[:, 0], [1.0, 2.0])
    np.testing.assert_allclose(
        rollout.engine_importance_weights(
            old, samp, mask, mode="token_truncate", clip_max=1.5
        )[0],
        [1.5, 1.0, 0.5],
    )
    np.testing.assert_allclose(
        rollout.engine_importance_weights(
            old, samp, mask, mode="token_mask", clip_min=0.6, clip_max=1.5
        )[0],
        [0.0, 1.0, 0.0],
    )
    np.testing.assert_allclose(
        rollout.engine_importance_weights(
            old, samp, mask, mode="sequence_mask", clip_max=1.5
        )[:, 0],
        [1.0, 0.0],
    )
    with pytest.raises(ValueError, match="mode"):
        rollout.engine_importance_weights(old, samp, mask, mode="tokens")
    with pytest.raises(ValueError, match="clip_min"):
        rollout.engine_importance_weights(old, samp, mask, clip_min=2.0, clip_max=1.0)


def test_pass_rate_tracker_and_selection():
    tr = rollout.PassRateTracker(4)
    np.testing.assert_allclose(tr.pass_rates(), 0.5)
    tr.update(
        np.array([0, 0, 1, 1, 2, 2]),
        np.array([1.0, 1.0, 0.0, 0.0, 1.0, np.nan]),
        step=3,
    )
    np.testing.assert_allclose(tr.pass_rates(), [3 / 4, 1 / 4, 2 / 3, 1 / 2])
    assert tr.last_step.tolist() == [3, 3, 3, -1]
    at = rollout.PassRateTracker(1, threshold=0.5)
    at.update(np.array([0, 0]), np.array([0.5, 0.49]), step=0)
    # reward >= threshold passes
    assert at.passes.tolist() == [1] and at.attempts.tolist() == [2]
    p = rollout.selection_probabilities(tr, "frontier", floor=0.0)
    # the unseen prompt has pass rate 0.5
    assert abs(p.sum() - 1) < 1e-12 and p.argmax() == 3
    w = np.array([3 / 16, 3 / 16, 2 / 9, 1 / 4]) + 0.05  # p (1 - p) + floor
    np.testing.assert_allclose(
        rollout.selection_probabilities(tr, "frontier"), w / w.sum(), rtol=1e-13
    )
    np.testing.assert_allclose(rollout.selection_probabilities(tr), 0.25)
    pick = rollout.select_prompts(tr, 3, np.random.default_rng(0), "frontier")
    assert len(set(pick.tolist())) == 3 and list(pick) == sorted(pick)
    with pytest.raises(ValueError, match="strategy"):
        rollout.selection_probabilities(tr, "hard")
    with pytest.raises(ValueError, match="n"):
        rollout.select_prompts(tr, 5, np.random.default_rng(0))
    with pytest.raises(TypeError, match="rng"):
        rollout.select_prompts(tr, 2, 0)


def test_validation_errors():
    with pytest.raises(ValueError, match="theta"):
        rollout.token_logps(np.zeros((2, 3)), [0], np.zeros((1, 3), int))
    with pytest.raises(ValueError, match="prompt_ids"):
        rollout.token_logps(np.zeros((2, 3, 4)), [5], np.zeros((1, 3), int))
    with pytest.raises(TypeError, match="token_ids"):
        rollout.token_logps(np.zeros((2, 3, 4)), [0], np.zeros((1, 3)))
    with pytest.raises(ValueError, match="group_size"):
        rollout.sample_rollout(
            np.zeros((2, 3, 4)), np.array([0]), 1, np.random.default_rng(0)
        )
