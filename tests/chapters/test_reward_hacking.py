"""dpo_grpo.chapters.reward_hacking: the length-loving reward is exploited; a larger KL
weight slows it, never fixes it."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpo_grpo.chapters import reward_hacking as rh
from dpo_grpo.reference.dpo import optimal_policy

BETAS = (0.0, 0.04, 0.2, 1.0)


@pytest.fixture(scope="module")
def runs():
    return {b: rh.train_hacking(b) for b in BETAS}


def test_the_reward_prefers_a_worse_answer_type():
    rbar = rh.expected_reward()
    t = rh.ANSWER_TYPES
    assert np.argmax(rbar) != np.argmax(t.p_correct)
    assert t.p_correct[np.argmax(rbar)] < t.ref_probs @ t.p_correct


def test_training_reward_rises_while_accuracy_falls(runs):
    r = runs[0.04]
    assert r.reward[-1] > r.reward[0] + 0.2
    assert r.accuracy[-1] < r.accuracy[0] - 0.1
    assert r.length[-1] > 2 * r.length[0]
    # what a training log would show
    assert np.mean(r.batch_reward[-20:]) > np.mean(r.batch_reward[:20])


def test_larger_kl_slows_but_does_not_reverse(runs):
    acc0 = runs[0.0].accuracy[0]
    finals = [runs[b] for b in BETAS]
    # ordered: more KL weight -> less KL, less reward gained, less accuracy lost, at
    # every checkpoint
    for step in (50, 100, 200):
        kls = [r.kl[step] for r in finals]
        accs = [r.accuracy[step] for r in finals]
        assert all(np.diff(kls) < 0) and all(np.diff(accs) > 0)
    # but every run moves the same way: reward up, accuracy down, never above the
    # reference's accuracy
    for r in finals:
        assert r.reward[-1] > r.reward[0] and r.accuracy[-1] < acc0
        assert r.accuracy.max() <= acc0 + 1e-3


def test_kl_optimum_moves_in_one_direction_for_every_beta():
    betas = np.geomspace(0.01, 100, 25)
    path = rh.kl_optimum_path(betas)
    ref = rh.policy_metrics(rh.ANSWER_TYPES.ref_probs)
    assert np.all(path["accuracy"] < ref["accuracy"]) and np.all(
        path["length"] > ref["length"]
    )
    assert np.all(np.diff(path["accuracy"]) > 0) and np.all(
        np.diff(path["kl_to_ref"]) < 0
    )
    cov = rh.first_order_quality_change()
    assert cov < 0
    big = 1e4
    assert (
        rh.kl_optimum_path([big])["accuracy"][0] - ref["accuracy"]
    ) * big == pytest.approx(cov, rel=1e-3)
    np.testing.assert_allclose(
        path["probs"][3],
        optimal_policy(rh.ANSWER_TYPES.ref_probs, rh.expected_reward(), betas[3])[0],
    )


def test_the_first_order_sign_holds_only_for_large_beta():
    """A negative covariance does not fix the direction at every beta: a small beta goes
    to the reward's favourite."""
    half = np.array([0.5, 0.5, 0.5])
    t = rh.AnswerTypes(
        names=("long right", "mid wrong", "short right"),
        length=np.array([1000.0, 750.0, 10.0]),
        p_correct=np.array([0.9, 0.5, 0.8]),
        p_valid=half,
        p_format=half,
        ref_probs=np.array([0.01, 0.5, 0.49]),
    )
    rbar = rh.expected_reward(t)
    # the favourite is also the most accurate
    assert np.argmax(rbar) == 0 and np.argmax(t.p_correct) == 0
    cov = rh.first_order_quality_change(t)
    ref = rh.policy_metrics(t.ref_probs, t)["accuracy"]
    assert cov < 0
    path = rh.kl_optimum_path([0.03, 0.1, 0.3, 1.0, 100.0], t)
    # large beta: the drift has the covariance's sign
    assert np.all(path["accuracy"][2:] < ref)
    assert np.all(path["accuracy"][:2] > ref)  # small beta: the sign flips
    assert path["accuracy"][0] == pytest.approx(t.p_correct[0], abs=1e-3)
    big = 1e4
    assert (rh.kl_optimum_path([big], t)["accuracy"][0] - ref) * big == pytest.approx(
        cov, rel=1e-3
    )


def test_a_reward_without_the_length_bonus_is_not_hacked():
    r = rh.train_hacking(0.04, length_weight=0.0)
    assert r.accuracy[-1] > r.accuracy[0]
    assert rh.first_order_quality_change(length_weight=0.0) > 0


def test_held_out_evaluation_is_decoupled(runs):
    r = runs[0.04]
    before, after = rh.evaluate(r.probs[0], seed=3), rh.evaluate(r.probs[-1], seed=3)
    assert after["training_reward"] > before["training_reward"]
    assert (
        after["accuracy"] < before["accuracy"]
        and after["format_ok"] < before["format_ok"]
    )
    assert after["length"] > before["length"]
    exact = rh.policy_metrics(r.probs[-1])
    big = rh.evaluate(r.probs[-1], n_prompts=200_000, seed=5)
    for key in ("accuracy", "reasoning_valid", "format_ok", "length"):
        assert big[key] == pytest.approx(exact[key], rel=0.02)


@given(st.integers(0, 2**16))
def test_deterministic_given_seed(seed):
    a = rh.train_hacking(0.04, steps=3, seed=seed)
    b = rh.train_hacking(0.04, steps=3, seed=seed)
    np.testing.assert_array_equal(a.probs, b.probs)
    assert a.probs.shape == (4, 5) and np.allclose(a.probs.sum(axis=1), 1.0)


def test_validation():
    with pytest.raises(ValueError, match="beta"):
        rh.train_hacking(-0.1)
    with pytest.raises(ValueError, match="group_size"):
        rh.train_hacking(0.04, group_size=1)
    with pytest.raises(ValueError, match="betas"):
        rh.kl_optimum_path([0.0, 1.0])
    with pytest.raises(ValueError, match="probs"):
        rh.policy_metrics([0.5, 0.5])
    with pytest.raises(TypeError, match="types"):
        rh.train_hacking(0.04, types={"names": ()})
    bad = rh.ANSWER_TYPES._replace(p_correct=np.array([0.5, 0.5, 1.5, 0.5, 0.5]))
    with pytest.raises(ValueError, match="p_correct"):
        rh.expected_reward(bad)


def test_timer_sees_the_three_phases_and_does_not_change_the_run():
    from dpo_grpo.chapters.phase_timer import PhaseTimer

    timer = PhaseTimer()
    timed = rh.train_hacking(0.04, steps=5, timer=timer)
    np.testing.assert_array_equal(timed.probs, rh.train_hacking(0.04, steps=5).probs)
    assert set(timer.counts) == {"generation", "scoring", "training"}
    assert all(n == 5 for n in timer.counts.values())
    with pytest.raises(TypeError, match="timer"):
        rh.train_hacking(0.04, steps=1, timer=3)


def test_sample_answers_for_spot_checks():
    s = rh.sample_answers(rh.ANSWER_TYPES.ref_probs, 7, seed=2)
    assert set(s) == {"type", "length", "correct", "valid", "format_ok"}
    assert all(len(x) == 7 for x in s.values())
    np.testing.assert_array_equal(s["length"], rh.ANSWER_TYPES.length[s["type"]])
