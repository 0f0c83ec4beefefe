"""dpo_grpo.chapters.misconceptions: the chapter-8 counter-examples show what the book
says they show."""

import numpy as np
import pytest

import dpo_grpo as dg
from dpo_grpo.chapters import misconceptions


def test_clip_kl_toy_shared_parameters_move_unsampled_tokens():
    shared, separate = (
        misconceptions.clip_kl_toy(shared=True),
        misconceptions.clip_kl_toy(shared=False),
    )
    for run in (shared, separate):
        assert run["first_clip"] is not None
        inside = run["ratios"][:-1]
        assert np.all((inside >= 0.8) & (inside <= 1.2))
        np.testing.assert_allclose(run["probs"].sum(axis=1), 1.0)
    assert shared["kl"][-1] > 0.3 and shared["kl"][-1] > 10 * separate["kl"][-1]
    assert shared["probs"][-1, 3] > 100 * shared["p_old"][3]
    # what a trainer logs misses the move
    assert shared["sampled_k3"][-1] < 0.1 * shared["kl"][-1]
    assert shared["kl"][-2] > 0.5  # already before the first clip (exercise 08.3)


def test_bandit_clip_activity_replays_the_package_run():
    act = misconceptions.bandit_clip_activity()
    assert act["max_error"] == 0.0  # the same run as dg.bandit_trajectory, bit for bit
    assert act["n_token_updates"] == 80 * 2 * 32
    # at the book's learning rate the clip never engages (chapter 8, section 8.6;
    # explorables, section 6)
    assert act["n_platform"] == 0 and act["n_outside"] == 0
    assert 0.8 < act["ratio_min"] < 1.0 < act["ratio_max"] < 1.2
    fast = misconceptions.bandit_clip_activity(steps=20, lr=1.5)
    assert (
        fast["max_error"] == 0.0
        and fast["n_platform"] > 0
        and fast["n_outside"] >= fast["n_platform"]
    )


def test_group_mean_spread_tracks_the_sampling_distribution():
    rows = misconceptions.group_mean_spread(
        [1.0, 0.5, 0.0, -0.5],
        [1.0, 0.0, 0.0, 0.0],
        group_sizes=(4, 64),
        temperatures=(0.5, 2.0),
        n_groups=4000,
        seed=1,
    )
    for r in rows:
        assert abs(r["mean"] - r["V_T"]) < 5 * r["std"] / np.sqrt(4000)
        p = r["V_T"]
        assert r["std"] == pytest.approx(np.sqrt(p * (1 - p) / r["G"]), rel=0.1)
    by = {(r["T"], r["G"]): r for r in rows}
    assert by[(0.5, 4)]["V_T"] > by[(2.0, 4)]["V_T"]


def test_scale_effects():
    eff = misconceptions.scale_effects()
    assert eff["shift"] < 1e-12
    changes = [eff["scale"][a] for a in (10.0, 1e-2, 1e-3, 1e-4)]
    assert changes == sorted(changes) and changes[0] < 1e-3 and changes[-1] > 0.5
    np.testing.assert_allclose(eff["negative"], -eff["base"])
    i, j = eff["swapped_pair"]
    assert (
        eff["rank_error"][i] == pytest.approx(eff["base"][j])
        and eff["ties"][i] == eff["ties"][j]
    )


def test_trl_step_log_on_policy():
    log = misconceptions.trl_step_log(steps=8, beta=0.04)
    assert (
        abs(log[0]["loss"]) < 1e-15 and log[0]["kl"] == 0.0 and log[0]["grad_norm"] > 0
    )
    for r in log:
        assert r["clip_ratio"] == 0.0
        assert r["loss"] == pytest.approx(0.04 * r["kl"], abs=1e-12)
    zero = misconceptions.trl_step_log(steps=8, beta=0.0)
    assert max(abs(r["loss"]) for r in zero) < 1e-12
    two = misconceptions.trl_step_log(
        steps=8, beta=0.0, num_iterations=2, lr=0.5, group_size=8
    )
    assert all(r["clip_ratio"] == 0.0 for r in two if r["iteration"] == 0)
    assert any(r["clip_ratio"] > 0 for r in two if r["iteration"] == 1)


def test_kl_pull_back_moves_towards_the_reference():
    h = misconceptions.kl_pull_back(steps=40)
    uniform = np.full(4, 0.25)
    kls = [dg.exact_kl(p, uniform) for p in h]
    assert kls[-1] < 0.2 * kls[0]
    still = misconceptions.kl_pull_back(start_logits=(0.0, 0.0, 0.0, 0.0), steps=5)
    np.testing.assert_array_equal(still, np.full((6, 4), 0.25))


def test_sampled_group_gradient_is_unbiased_for_the_enumerated_expectation():
    z, r = np.zeros(4), np.array([-0.2, 0.3, 1.0, 0.0])
    grads = np.array(
        [misconceptions.sampled_group_gradient(z, r, 4, s)[0] for s in range(3000)]
    )
    exact = -dg.enumerate_group_gradients(dg.softmax(z), r, 4).standardised
    se = grads.std(axis=0) / np.sqrt(len(grads))
    assert np.all(np.abs(grads.mean(axis=0) - exact) < 5 * se)
    assert not np.allclose(grads[0], grads[1])


def test_invalid_arguments():
    with pytest.raises(ValueError, match="rare_prob"):
        misconceptions.clip_kl_toy(rare_prob=1.5)
    with pytest.raises(ValueError, match="group_size"):
        misconceptions.sampled_group_gradient(np.zeros(3), np.zeros(3), 1, 0)
    with pytest.raises(ValueError, match="reward_table"):
        misconceptions.sampled_group_gradient(np.zeros(3), np.zeros(4), 4, 0)
    with pytest.raises(ValueError, match="temperature"):
        misconceptions.group_mean_spread([0.0, 1.0], [0.0, 1.0], temperatures=(0.0,))
    with pytest.raises(ValueError, match="num_iterations"):
        misconceptions.trl_step_log(num_iterations=0)
    with pytest.raises(TypeError, match="steps"):
        misconceptions.kl_pull_back(steps=2.5)


def test_num_iterations_drift_pairs_seeds_and_clips_only_when_reused():
    out = misconceptions.num_iterations_drift(seeds=(0, 1, 2), steps=6, last=2)
    assert set(out["kl"]) == {1, 4}
    # one update per rollout: every ratio is 1, nothing is clipped
    assert np.all(out["clip_ratio"][1] == 0.0)
    assert np.allclose(out["kl_difference"], out["kl"][4] - out["kl"][1])
    # the same seed gives the same log
    again = misconceptions.num_iterations_drift(seeds=(0, 1, 2), steps=6, last=2)
    assert np.array_equal(out["kl"][4], again["kl"][4])
    with pytest.raises(ValueError):
        misconceptions.num_iterations_drift(num_iterations=(2,))
