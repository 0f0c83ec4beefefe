"""The explorables' pure data functions (dpo_grpo.interactive.explorables) against
hand-computed values."""

import math
import subprocess
import sys

import numpy as np
import pytest

from dpo_grpo.interactive import explorables as xp
from dpo_grpo.reference.advantages import group_advantages
from dpo_grpo.reference.bandit import bandit_trajectory

# --------------------------------------------------------------------------------------
# Pure data functions
# --------------------------------------------------------------------------------------


def _at(d, key, rho):
    i = int(np.argmin(np.abs(d["rho"] - rho)))
    assert abs(d["rho"][i] - rho) < 1e-9
    return d[key][i]


def test_clip_platform_boundaries_and_values():
    d = xp.clip_platform_data(epsilon=0.2)
    assert d["bounds"] == {"low": 0.8, "high": 1.2, "delta": None}
    # A = +1: min(rho, 1.2) on the right, rho itself on the left (not clipped, wrong
    # direction)
    assert _at(d, "objective_pos", 1.5) == pytest.approx(1.2)
    assert _at(d, "grad_pos", 1.5) == 0.0 and _at(d, "region_pos", 1.5) == "platform"
    assert _at(d, "objective_pos", 0.5) == pytest.approx(0.5)
    assert (
        _at(d, "grad_pos", 0.5) == 1.0
        and _at(d, "region_pos", 0.5) == "wrong_direction"
    )
    # A = -1: flat at -(1 - eps) on the left, keeps -rho on the right
    assert _at(d, "objective_neg", 0.5) == pytest.approx(-0.8)
    assert _at(d, "grad_neg", 0.5) == 0.0 and _at(d, "region_neg", 0.5) == "platform"
    assert _at(d, "objective_neg", 1.5) == pytest.approx(-1.5)
    assert (
        _at(d, "grad_neg", 1.5) == -1.0
        and _at(d, "region_neg", 1.5) == "wrong_direction"
    )
    assert _at(d, "region_pos", 1.0) == "inside" and _at(d, "grad_pos", 1.0) == 1.0
    # the boundaries are where the gradient switches: 1.2 itself is still inside, 1.205
    # on the platform
    assert _at(d, "grad_pos", 1.2) == 1.0 and _at(d, "grad_pos", 1.205) == 0.0
    assert _at(d, "grad_neg", 0.8) == -1.0 and _at(d, "grad_neg", 0.795) == 0.0


def test_clip_platform_asymmetric_and_delta():
    d = xp.clip_platform_data(epsilon=0.2, epsilon_high=0.28, delta=1.4)
    assert d["bounds"] == {"low": 0.8, "high": 1.28, "delta": 1.4}
    assert (
        _at(d, "objective_pos", 1.25) == pytest.approx(1.25)
        and _at(d, "grad_pos", 1.25) == 1.0
    )
    assert _at(d, "objective_pos", 1.3) == pytest.approx(1.28)
    # delta caps the unclipped wrong-direction branch for A < 0: flat at -delta,
    # gradient 0
    assert _at(d, "objective_neg", 1.5) == pytest.approx(-1.4)
    assert _at(d, "grad_neg", 1.5) == 0.0 and _at(d, "capped_neg", 1.5)
    assert _at(d, "objective_neg", 1.35) == pytest.approx(-1.35) and not _at(
        d, "capped_neg", 1.35
    )
    with pytest.raises(ValueError):
        xp.clip_platform_data(delta=0.9)


def test_clip_examples_are_the_articles_and_the_gallery_claims_hold():
    seq = xp.example_sequences()
    np.testing.assert_allclose(
        seq["ratio"], [1.2840, 1.1052, 0.7788, 0.9048], atol=5e-5
    )
    np.testing.assert_allclose(
        seq["advantage"], group_advantages(xp.ex.REWARD_GROUPS[:1])[0]
    )
    assert list(xp.clip_platform_data()["examples"]["region"]) == [
        "wrong_direction",
        "inside",
        "wrong_direction",
        "inside",
    ]
    assert (
        xp.clip_platform_data(epsilon_high=0.1)["examples"]["region"][1] == "platform"
    )
    assert xp.clip_platform_data(epsilon=0.05)["examples"]["region"][3] == "platform"
    ex = xp.clip_platform_data()["examples"]
    # objective per unit |A| for answer 1 (A > 0, rho = 1.1052 inside): rho itself
    assert ex["objective_unit"][1] == pytest.approx(ex["ratio"][1])
    assert ex["objective"][0] == pytest.approx(ex["ratio"][0] * ex["advantage"][0])


def test_zero_std_matches_p_to_the_G_plus_one_minus_p_to_the_G():
    d = xp.zero_std_data(group_size=8, pass_rate=0.8, eps=1e-4)
    assert d["probability"] == pytest.approx(0.8**8 + 0.2**8)
    assert d["probability"] == pytest.approx(0.16777472)
    np.testing.assert_allclose(d["prob_vs_p"], d["p"] ** 8 + (1 - d["p"]) ** 8)
    np.testing.assert_allclose(d["prob_vs_g"], 0.8 ** d["g"] + 0.2 ** d["g"])
    assert (
        d["prob_vs_p"][0] == 1.0
        and d["prob_vs_p"][-1] == 1.0
        and d["prob_vs_p"][50] == pytest.approx(2 * 0.5**8)
    )
    # seeded Monte Carlo: within 5 binomial standard errors of the exact value
    exact = d["mc_p"] ** 8 + (1 - d["mc_p"]) ** 8
    se = np.sqrt(exact * (1 - exact) / d["n_groups"]) + 1e-12
    assert np.all(np.abs(d["mc_vs_p"] - exact) <= 5 * se + 1e-9)
    again = xp.zero_std_data(group_size=8, pass_rate=0.8, eps=1e-4)
    np.testing.assert_array_equal(again["mc_vs_p"], d["mc_vs_p"])  # seeded
    # batch: the mean over its prompts of p_i^G + (1 - p_i)^G
    b = d["batch_pass_rates"]
    assert (
        b.size == 256
        and np.all((b >= 0) & (b <= 1))
        and b.mean() == pytest.approx(0.8, abs=0.05)
    )
    assert d["batch_expected"] == pytest.approx(np.mean(b**8 + (1 - b) ** 8))
    # two-sample suppression d / (d + 2 eps)
    np.testing.assert_allclose(
        d["two_sample_at_gaps"], [1 / (1 + 2e-4), 0.01 / 0.0102, 1e-5 / (1e-5 + 2e-4)]
    )
    assert d["two_sample_at_gaps"][2] == pytest.approx(1 / 21)


def test_group_advantage_invariances_and_where_eps_breaks_them():
    r = np.array([0.2, 0.8, 1.4, 0.6])
    base = xp.group_advantage_data(r)
    np.testing.assert_allclose(
        base["advantages_ddof0"],
        [-1.26987733, 0.11544339, 1.50076411, -0.34633018],
        atol=1e-8,
    )
    std0, std1 = math.sqrt(0.1875), math.sqrt(0.25)
    assert base["std_ddof0"] == pytest.approx(std0) and base[
        "std_ddof1"
    ] == pytest.approx(std1)
    np.testing.assert_allclose(base["advantages_ddof1"], (r - 0.75) / (std1 + 1e-4))
    # shift: unchanged (up to rounding of r + b)
    np.testing.assert_allclose(
        xp.group_advantage_data(r, shift=-100.0)["advantages_ddof0"],
        base["advantages_ddof0"],
        atol=1e-10,
    )
    # scale a > 0: (r - m) / (std + eps / a)
    for a in (10.0, 1e-2, 1e-4):
        got = xp.group_advantage_data(r, scale=a)["advantages_ddof0"]
        np.testing.assert_allclose(got, (r - 0.75) / (std0 + 1e-4 / a), rtol=1e-9)
    shrink = (
        xp.group_advantage_data(r, scale=1e-4)["advantages_ddof0"]
        / base["advantages_ddof0"]
    )
    # about 0.30
    np.testing.assert_allclose(shrink, (std0 + 1e-4) / (std0 + 1.0), rtol=1e-6)
    # negative scale flips the signs
    np.testing.assert_allclose(
        xp.group_advantage_data(r, scale=-1.0)["advantages_ddof0"],
        -base["advantages_ddof0"],
        atol=1e-12,
    )
    curve = base["best_advantage_vs_scale"][1e-4]
    assert base["scales"][-1] == 100.0 and base["scales"][0] == pytest.approx(1e-7)
    assert (
        curve[-1] == pytest.approx(0.65 / (std0 + 1e-4 / 100)) and abs(curve[0]) < 1e-2
    )
    with pytest.raises(ValueError):
        xp.group_advantage_data(np.arange(17.0))


def test_dpo_data_margin_loss_and_weight():
    d = xp.dpo_data(beta=0.1)
    assert d["margin"] == pytest.approx((-2.2 + 2.0) - (-2.8 + 2.4))
    assert d["margin"] == pytest.approx(0.2) and d["logit"] == pytest.approx(0.02)
    assert d["pair_loss"] == pytest.approx(math.log1p(math.exp(-0.02)))
    assert d["pair_weight"] == pytest.approx(1 / (1 + math.exp(0.02)))
    assert d["chosen_reward"] == pytest.approx(-0.02) and d[
        "rejected_reward"
    ] == pytest.approx(-0.04)
    mid = int(np.argmin(np.abs(d["margin_grid"])))
    assert d["loss"][mid] == pytest.approx(math.log(2)) and d["weight"][
        mid
    ] == pytest.approx(0.5)
    m = d["margin_grid"]
    np.testing.assert_allclose(d["loss_by_beta"][0.5], np.log1p(np.exp(-0.5 * m)))


def test_kl_estimators_and_the_off_policy_bias():
    d = xp.kl_estimator_data(delta=0.5, mix=1.0)
    assert d["at_delta"] == pytest.approx(
        {"k1": -0.5, "k2": 0.125, "k3": math.exp(0.5) - 1.5}
    )
    p, q, old = (
        np.array([0.7, 0.2, 0.1]),
        np.array([0.2, 0.3, 0.5]),
        np.array([0.3, 0.3, 0.4]),
    )
    exact = float(np.sum(p * np.log(p / q)))
    assert d["exact"] == pytest.approx(exact) and exact == pytest.approx(
        0.634897, abs=1e-6
    )
    k3 = q / p - np.log(q / p) - 1
    assert d["biased"] == pytest.approx(float(old @ k3))
    assert d["biased"] == pytest.approx(1.146128, abs=1e-6)
    assert d["corrected"] == pytest.approx(exact)
    np.testing.assert_allclose(d["corrected_vs_mix"], exact)
    assert d["biased_vs_mix"][0] == pytest.approx(exact)  # t = 0 samples from p itself
    np.testing.assert_allclose(
        xp.kl_estimator_data(mix=0.3)["sampling"], 0.7 * p + 0.3 * old
    )


def test_bandit_data_is_the_seeded_trajectory():
    d = xp.bandit_data(group_size=8, seed=3, steps=20)
    np.testing.assert_array_equal(
        d["probs"], bandit_trajectory(steps=20, group_size=8, seed=3)
    )
    assert d["probs"].shape == (21, 4) and d["best"] == 2
    np.testing.assert_allclose(d["probs"][0], 0.25)
    np.testing.assert_allclose(d["probs"].sum(axis=1), 1.0)


def test_bandit_data_extends_a_kept_run_instead_of_rerunning(monkeypatch):
    monkeypatch.setattr(xp, "_BANDIT_RUNS", type(xp._BANDIT_RUNS)())
    short = xp.bandit_data(group_size=8, seed=5, steps=10)
    run = next(iter(xp._BANDIT_RUNS.values()))
    assert run.steps_run == 10
    # runs steps 11..40 only, on the same run
    long = xp.bandit_data(group_size=8, seed=5, steps=40)
    assert len(xp._BANDIT_RUNS) == 1 and run.steps_run == 40
    back = xp.bandit_data(group_size=8, seed=5, steps=25)  # a prefix: nothing runs
    assert run.steps_run == 40
    full = bandit_trajectory(steps=40, group_size=8, seed=5)
    np.testing.assert_array_equal(long["probs"], full)
    np.testing.assert_array_equal(short["probs"], full[:11])
    np.testing.assert_array_equal(back["probs"], full[:26])
    long["probs"][:] = 0  # callers own their arrays: the kept run is untouched
    np.testing.assert_array_equal(
        xp.bandit_data(group_size=8, seed=5, steps=40)["probs"], full
    )
    xp.bandit_data(group_size=8, seed=6, steps=10)
    assert len(xp._BANDIT_RUNS) == 2  # another seed is another run


def test_bandit_data_keeps_a_bounded_number_of_runs(monkeypatch):
    monkeypatch.setattr(xp, "_BANDIT_RUNS", type(xp._BANDIT_RUNS)())
    monkeypatch.setattr(xp, "_BANDIT_RUNS_MAX", 3)
    for seed in range(5):
        xp.bandit_data(group_size=4, seed=seed, steps=2)
    assert [key[1] for key in xp._BANDIT_RUNS] == [2, 3, 4]  # least recently used out


@pytest.mark.parametrize(
    "bad, exc, match",
    [
        (dict(seed=True), TypeError, "seed"),
        (dict(beta=[1]), TypeError, "beta"),
        (dict(reward_table=[[1, 2], [3, 4]]), ValueError, "reward_table"),
        (dict(steps=0), ValueError, "steps"),
    ],
)
def test_bandit_data_validates_every_call(bad, exc, match):
    # a kept run with seed 1 must not let seed=True through
    xp.bandit_data(seed=1, steps=3)
    with pytest.raises(exc, match=match):
        xp.bandit_data(**{"seed": 1, "steps": 3, **bad})


def test_memory_ledger_totals():
    d = xp.memory_ledger_data()  # 7B, bf16 + fp32 master + AdamW
    assert d["policy_bytes"] == 112 * 10**9 and d["policy_bytes_per_param"] == 16
    # PPO: 2 x 112 + 14 + 14; GRPO: 112 + 14 + 14
    assert d["totals_gb"] == pytest.approx([252.0, 140.0, 126.0])
    assert d["totals_gib"][0] == pytest.approx(252e9 / 2**30)
    for k, alg in enumerate(d["algorithms"]):
        assert sum(c[k] for c in d["components"].values()) == d["totals_bytes"][k]
    assert d["components"]["critic (trainable state)"] == [112 * 10**9, 0, 0]
    assert xp.memory_ledger_data(precomputed_reference=True)["totals_gb"][
        2
    ] == pytest.approx(112.0)
    # rule-based
    assert xp.memory_ledger_data(grpo_reward_model=False)["totals_gb"][
        1
    ] == pytest.approx(126.0)
    assert xp.memory_ledger_data(reward_model=False)["totals_gb"][0] == pytest.approx(
        238.0
    )
    for name, per_param in (
        ("fp32 + AdamW", 16),
        ("bf16 + AdamW, no master", 12),
        ("bf16 + fp32 master + SGD-momentum", 12),
    ):
        got = xp.memory_ledger_data(10**9, **xp.MEMORY_RECIPES[name])
        assert got["policy_bytes_per_param"] == per_param, name


def test_import_dpo_grpo_pulls_in_neither_plotly_nor_ipywidgets():
    code = (
        "import sys, dpo_grpo, dpo_grpo.interactive.explorables; "
        "bad = [m for m in ('plotly', 'ipywidgets') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_gallery_claim_the_bandit_clip_binds_only_below_0_1():
    """book/explorables: with the chapter's learning rate, runs with eps >= 0.1 are
    identical; eps = 0.05 is not."""
    base = bandit_trajectory(steps=80, group_size=32, seed=7, epsilon=0.2)
    for eps in (0.1, 0.3, 0.4):
        np.testing.assert_array_equal(
            bandit_trajectory(steps=80, group_size=32, seed=7, epsilon=eps), base
        )
    assert (
        np.abs(
            bandit_trajectory(steps=80, group_size=32, seed=7, epsilon=0.05) - base
        ).max()
        > 0.05
    )
