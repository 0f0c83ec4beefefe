"""dpo_grpo.chapters.checks: the verification suite passes, each check fails when the thing it checks is broken, and the
chapter-8 counter-examples show what the book says they show."""

import json

import numpy as np
import pytest
from hypothesis import given, strategies as st

import dpo_grpo as dg
from dpo_grpo.chapters import checks
from dpo_grpo.reference import examples as ex


@pytest.fixture(scope="module")
def results():
    return checks.run_all_checks(bandit=False)


def test_every_check_passes(results):
    failed = [name for name, r in results.items() if not r.passed]
    assert not failed, checks.report(results)
    assert "bandit_table" not in results
    for r in results.values():
        assert isinstance(r, checks.CheckResult) and bool(r) is True
        if r.threshold is not None:
            assert r.value < r.threshold


def test_bandit_table_matches_the_article():
    res = checks.check_bandit_table()
    assert res.passed and res.value <= 5e-7
    table = res.details["table"]
    for name, (mean, lo, hi) in checks.ARTICLE_REPORTED["bandit"].items():
        assert (
            round(table[name]["mean"], 6),
            round(table[name]["min"], 6),
            round(table[name]["max"], 6),
        ) == (mean, lo, hi)


def test_bandit_table_other_seeds_only_checks_the_constant_row():
    res = checks.check_bandit_table(seeds=[0, 1])
    assert res.passed and res.details["table"]["all rewards 1"]["values"] == [
        0.25,
        0.25,
    ]


def test_article_numbers_are_reproduced(results):
    assert results["objective_identity"].value <= 4.45e-16 * 2
    assert results["dpo_swap"].value == pytest.approx(0.731428, abs=5e-7)
    np.testing.assert_allclose(
        results["dpo_swap"].details["logits"], [-0.10, -0.05], atol=1e-12
    )
    drop = results["dpo_chosen_probability_drop"].details
    assert (round(drop["loss_before"], 6), round(drop["loss_after"], 6)) == (
        0.673079,
        0.639724,
    )
    enum = results["group_enumeration"].details
    np.testing.assert_allclose(enum["exact"], [-0.372, -0.198, 0.570], atol=1e-12)
    np.testing.assert_allclose(enum["centred"], [-0.248, -0.132, 0.380], atol=1e-12)
    np.testing.assert_array_equal(
        np.round(enum["standardised"], 6), [-0.209534, -0.136999, 0.346534]
    )
    assert enum["n_groups"] == 27
    assert [
        round(r["advantage"], 6) for r in results["two_sample_gaps"].details["rows"]
    ] == [0.999800, 0.980392, 0.047619]
    kl = results["kl_value_and_gradient"].details["values"]
    assert (round(kl["exact_kl"], 6), round(kl["old_sample_expectation"], 6)) == (
        0.634897,
        1.146128,
    )


def test_swap_counter_pair_keeps_a_positive_logit(results):
    d = results["dpo_swap"].details
    assert d["counter_pair_logit"] > 0 and d["counter_pair_swapped_logit"] > 0
    np.testing.assert_allclose(
        d["swap_reference_too_logits"], -d["original_logits"], atol=1e-15
    )


# --- each check can fail -----------------------------------------------------------------------------------------------


def test_dpo_gradient_check_detects_a_wrong_gradient(monkeypatch):
    real = checks.dpo_loss

    def wrong(*args, **kwargs):
        out = real(*args, **kwargs)
        return out._replace(grad_policy_chosen=out.grad_policy_chosen * 1.01)

    monkeypatch.setattr(checks, "dpo_loss", wrong)
    res = checks.check_dpo_gradient()
    assert not res.passed and res.value > checks.FD_TOL


def test_surrogate_check_detects_a_wrong_gradient(monkeypatch):
    real = checks.grpo_loss

    def wrong(*args, **kwargs):
        out = real(*args, **kwargs)
        return out._replace(grad=out.grad * 1.001)

    monkeypatch.setattr(checks, "grpo_loss", wrong)
    res = checks.check_surrogate_gradient()
    assert not res.passed and res.value > checks.FD_TOL


def test_surrogate_check_requires_all_four_regions(monkeypatch):
    only_article = dict(checks.FOUR_REGION_EXAMPLE)
    # the article's example twice: one wrong direction missing
    only_article.update(ex.surrogate_gradient_example())
    monkeypatch.setattr(checks, "FOUR_REGION_EXAMPLE", only_article)
    res = checks.check_surrogate_gradient()
    assert res.value < checks.FD_TOL and not res.passed
    assert "wrong_direction/low" not in res.details["covered"]


def test_four_region_example_covers_each_off_centre_region():
    run = checks.surrogate_gradient_error(checks.FOUR_REGION_EXAMPLE)
    assert run["regions"] == [
        "platform",
        "wrong_direction",
        "platform",
        "wrong_direction",
    ]
    np.testing.assert_allclose(run["ratio"], [2.0, 2.5, 0.75, 0.625])


def test_masks_check_fails_when_an_invalid_input_is_accepted(monkeypatch):
    real = checks.invalid_input_cases
    monkeypatch.setattr(
        checks, "invalid_input_cases", lambda: real() + [("accepted", lambda: 1.0)]
    )
    res = checks.check_masks()
    assert not res.passed and res.details["messages"]["accepted"] == "NOT REJECTED"


@pytest.mark.parametrize(
    "desc, fn",
    checks.invalid_input_cases(),
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_each_invalid_input_raises_value_error(desc, fn):
    with pytest.raises(ValueError):
        fn()


def test_enumeration_check_fails_for_a_biased_package(monkeypatch):
    real = checks.enumerate_group_gradients

    def biased(*args, **kwargs):
        out = real(*args, **kwargs)
        return out._replace(leave_one_out=out.leave_one_out * (2 / 3))

    monkeypatch.setattr(checks, "enumerate_group_gradients", biased)
    assert not checks.check_group_enumeration().passed


def test_kl_check_fails_if_the_true_gradient_is_wrong(monkeypatch):
    monkeypatch.setattr(checks, "kl_grad_logits", lambda z, q: np.zeros(len(z)))
    assert not checks.check_kl().passed


# --- helpers ----------------------------------------------------------------------------------------------------------


@given(st.floats(1e-6, 1e3), st.floats(1e-8, 1e-1))
def test_two_sample_formula(d, eps):
    row = checks.two_sample_gap_table([d], eps=eps)[0]
    assert row["advantage"] == pytest.approx(d / (d + 2 * eps), rel=1e-12)
    assert row["advantage_ddof1"] == pytest.approx(
        (d / 2) / (d / np.sqrt(2) + eps), rel=1e-12
    )


def test_clip_kl_toy_shared_parameters_move_unsampled_tokens():
    shared, separate = checks.clip_kl_toy(shared=True), checks.clip_kl_toy(shared=False)
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
    act = checks.bandit_clip_activity()
    assert act["max_error"] == 0.0  # the same run as dg.bandit_trajectory, bit for bit
    assert act["n_token_updates"] == 80 * 2 * 32
    # at the book's learning rate the clip never engages (chapter 8, section 8.6; explorables, section 6)
    assert act["n_platform"] == 0 and act["n_outside"] == 0
    assert 0.8 < act["ratio_min"] < 1.0 < act["ratio_max"] < 1.2
    fast = checks.bandit_clip_activity(steps=20, lr=1.5)
    assert (
        fast["max_error"] == 0.0
        and fast["n_platform"] > 0
        and fast["n_outside"] >= fast["n_platform"]
    )


def test_group_mean_spread_tracks_the_sampling_distribution():
    rows = checks.group_mean_spread(
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
    eff = checks.scale_effects()
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
    log = checks.trl_step_log(steps=8, beta=0.04)
    assert (
        abs(log[0]["loss"]) < 1e-15 and log[0]["kl"] == 0.0 and log[0]["grad_norm"] > 0
    )
    for r in log:
        assert r["clip_ratio"] == 0.0
        assert r["loss"] == pytest.approx(0.04 * r["kl"], abs=1e-12)
    zero = checks.trl_step_log(steps=8, beta=0.0)
    assert max(abs(r["loss"]) for r in zero) < 1e-12
    two = checks.trl_step_log(steps=8, beta=0.0, num_iterations=2, lr=0.5, group_size=8)
    assert all(r["clip_ratio"] == 0.0 for r in two if r["iteration"] == 0)
    assert any(r["clip_ratio"] > 0 for r in two if r["iteration"] == 1)


def test_length_weights():
    w = checks.length_weights(lengths=(2, 8), advantages=(1.0, 1.0))
    assert w["grpo"]["per_answer"][0] == pytest.approx(w["grpo"]["per_answer"][1])
    assert w["dapo"]["per_token"][0] == pytest.approx(w["dapo"]["per_token"][1])
    assert w["bnpo"]["per_answer"][1] == pytest.approx(4 * w["bnpo"]["per_answer"][0])
    assert w["dr_grpo"]["per_token"][0] == pytest.approx(1 / (2 * 8))
    with pytest.raises(ValueError, match="advantages"):
        checks.length_weights(lengths=(2, 8), advantages=(1.0,))


def test_prompt_weight_matches_the_std_formula():
    g, eps = 8, 1e-4
    for r in checks.prompt_weight_by_pass_count(g):
        k = r["k"]
        if k in (0, g):
            assert r["group"] == 0.0 and r["none"] == 0.0
            continue
        std = np.sqrt(k * (g - k) / (g * (g - 1)))
        assert r["ratio"] == pytest.approx(1 / (std + eps), rel=1e-12)


def test_kl_pull_back_moves_towards_the_reference():
    h = checks.kl_pull_back(steps=40)
    uniform = np.full(4, 0.25)
    kls = [dg.exact_kl(p, uniform) for p in h]
    assert kls[-1] < 0.2 * kls[0]
    still = checks.kl_pull_back(start_logits=(0.0, 0.0, 0.0, 0.0), steps=5)
    np.testing.assert_array_equal(still, np.full((6, 4), 0.25))


def test_sampled_group_gradient_is_unbiased_for_the_enumerated_expectation():
    z, r = np.zeros(4), np.array([-0.2, 0.3, 1.0, 0.0])
    grads = np.array(
        [checks.sampled_group_gradient(z, r, 4, s)[0] for s in range(3000)]
    )
    exact = -dg.enumerate_group_gradients(dg.softmax(z), r, 4).standardised
    se = grads.std(axis=0) / np.sqrt(len(grads))
    assert np.all(np.abs(grads.mean(axis=0) - exact) < 5 * se)
    assert not np.allclose(grads[0], grads[1])


def test_report(results):
    text = checks.report(results)
    assert (
        text.count("PASS") == len(results)
        and f"{len(results)}/{len(results)} checks passed" in text
    )
    with pytest.raises(TypeError, match="results"):
        checks.report({"x": 1})


def test_command_line(capsys):
    assert checks.main(["--fast"]) == 0
    assert "checks passed" in capsys.readouterr().out
    assert checks.main(["--fast", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["masks"]["passed"] is True and data["masks"]["details"]["rejected"] == 9


def test_command_line_exit_status_reflects_a_failure(monkeypatch, capsys):
    monkeypatch.setattr(checks, "kl_grad_logits", lambda z, q: np.zeros(len(z)))
    assert checks.main(["--fast"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_invalid_arguments():
    with pytest.raises(ValueError, match="n_policies"):
        checks.check_objective_identity(n_policies=0)
    with pytest.raises(ValueError, match="gap"):
        checks.two_sample_gap_table([0.0])
    with pytest.raises(ValueError, match="eps"):
        checks.two_sample_gap_table([1.0], eps=0)
    with pytest.raises(ValueError, match="rare_prob"):
        checks.clip_kl_toy(rare_prob=1.5)
    with pytest.raises(ValueError, match="group_size"):
        checks.sampled_group_gradient(np.zeros(3), np.zeros(3), 1, 0)
    with pytest.raises(ValueError, match="reward_table"):
        checks.sampled_group_gradient(np.zeros(3), np.zeros(4), 4, 0)
    with pytest.raises(ValueError, match="temperature"):
        checks.group_mean_spread([0.0, 1.0], [0.0, 1.0], temperatures=(0.0,))
    with pytest.raises(ValueError, match="num_iterations"):
        checks.trl_step_log(num_iterations=0)
    with pytest.raises(TypeError, match="steps"):
        checks.kl_pull_back(steps=2.5)
