"""The computed answers to TRL users' questions (chapter 6 and the page "Reading a TRL
run"): each against a hand value."""

import math

import numpy as np
import pytest

from dpo_grpo.chapters import costs
from dpo_grpo.chapters import trl_questions as q


def test_frac_reward_zero_std_counts_groups_only_under_group_and_none():
    r = np.array([[1, 1, 1, 1], [1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 0, 1]], float)
    rows = {row["setting"]: row for row in q.zero_std_logging(r)}
    assert rows["scale_rewards='group'"]["frac_reward_zero_std"] == 0.5
    assert rows["scale_rewards='none'"]["frac_reward_zero_std"] == 0.5
    assert rows["scale_rewards='batch'"]["frac_reward_zero_std"] == 0.0
    assert rows["normalize_then_sum"]["frac_reward_zero_std"] == 0.0
    assert all(row["degenerate"] == 0.5 for row in rows.values())
    # reward_std is the batch std (ddof 1) of the 16 rewards in every setting
    assert rows["scale_rewards='batch'"]["reward_std"] == pytest.approx(
        np.std(r, ddof=1)
    )
    assert all(row["max_abs_advantage_in_degenerate"] < 1e-12 for row in rows.values())


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
def test_zero_std_groups_shrink_the_informative_gradient(loss_type):
    rows = q.informative_gradient_share(n_prompts=8, group_size=4, loss_type=loss_type)
    np.testing.assert_allclose(
        [r["relative_to_filtered"] for r in rows],
        [1 - k / 8 for k in range(8)],
        rtol=1e-12,
    )
    assert rows[0]["grad_norm"] > rows[-1]["grad_norm"]


def test_two_sample_advantage_population_vs_sample_std():
    out = q.two_sample_advantages(1.0, eps=1e-4)
    assert out["population"] == pytest.approx(1 / (1 + 2e-4))
    assert out["sample"] == pytest.approx(0.5 / (1 / math.sqrt(2) + 1e-4))
    assert out["sample"] < out["sample_limit"] == pytest.approx(0.70710678)
    with pytest.raises(ValueError, match="gap"):
        q.two_sample_advantages(0.0)


def test_soft_overlong_punishment_matches_trl_docstring_example():
    np.testing.assert_allclose(
        q.soft_overlong_punishment([90, 80, 70, 100, 101], 100, 20),
        [-0.5, 0, 0, -1, -1],
    )
    with pytest.raises(ValueError, match="soft_punish_cache"):
        q.soft_overlong_punishment([1], 10, 11)


def test_every_completion_truncated_gives_zero_reward_loss_and_gradient():
    out = q.truncation_step(
        [300] * 8, [200] * 8, max_completion_length=256, num_generations=4
    )
    assert out["completions/clipped_ratio"] == 1.0
    assert out["reward"] == 0.0 and out["frac_reward_zero_std"] == 1.0
    assert (
        out["loss"] == 0.0
        and out["grad_norm"] == 0.0
        and out["clip_ratio/region_mean"] == 0.0
    )


def test_mask_truncated_completions_removes_their_tokens_but_not_their_advantage():
    lengths = [300, 120, 200, 400, 90, 260, 150, 500]
    needed = [200, 100, 150, 150, 100, 100, 200, 100]
    plain = q.truncation_step(
        lengths, needed, max_completion_length=256, num_generations=4
    )
    masked = q.truncation_step(
        lengths,
        needed,
        max_completion_length=256,
        num_generations=4,
        mask_truncated_completions=True,
    )
    assert (
        plain["completions/clipped_ratio"] == masked["completions/clipped_ratio"] == 0.5
    )
    assert plain["trained_tokens"] == 4 * 256 + 120 + 200 + 90 + 150
    assert masked["trained_tokens"] == 120 + 200 + 90 + 150
    assert masked["reward"] == plain["reward"] == 0.25
    shaped = q.truncation_step(
        lengths,
        needed,
        max_completion_length=256,
        num_generations=4,
        soft_punish_cache=64,
    )
    assert shaped["frac_reward_zero_std"] == 0.0 < plain["frac_reward_zero_std"]
    # four truncated answers at -1, the 200-token answer at (192 - 200) / 64 inside the
    # cache window
    assert shaped["reward"] == pytest.approx(0.25 + (-4 - 8 / 64) / 8)


def test_batch_plan_semantics_and_divisibility():
    p = q.batch_plan(8, 8, gradient_accumulation_steps=4)
    assert p["generation_batch_size"] == 32 and p["prompts_per_generation"] == 4
    assert p["optimizer_steps_per_generation"] == 1.0 and not p["old_logps_computed"]
    assert q.batch_plan(8, 8, gradient_accumulation_steps=4, num_iterations=2)[
        "old_logps_computed"
    ]
    assert q.batch_plan(8, 8, gradient_accumulation_steps=4, steps_per_generation=8)[
        "old_logps_computed"
    ]
    assert q.batch_plan(
        8, 8, gradient_accumulation_steps=4, vllm_importance_sampling_correction=True
    )["old_logps_computed"]
    assert q.batch_plan(2, 8, num_processes=4)["prompts_per_generation"] == 1
    with pytest.raises(ValueError, match="divisible by num_generations"):
        q.batch_plan(1, 8, num_processes=3)


def test_per_function_std_can_be_nonzero_while_every_group_is_constant():
    # two groups of 4; function 0 is constant within each group but differs across
    # groups
    rpf = np.array([[1.0, 2.0]] * 4 + [[3.0, 2.0]] * 4)
    out = q.per_function_stds(rpf, 4)
    assert out["rewards/0/std"] > 1.0 and out["frac_reward_zero_std"] == 1.0
    assert not out["advantages"].any()
    # two functions that trade off exactly: each varies, their sum does not
    trade = np.array([[a, 1.0 - a] for a in (0.0, 1.0, 0.5, 0.2)])
    out = q.per_function_stds(trade, 4)
    assert (
        out["rewards/0/std"] > 0
        and out["rewards/1/std"] > 0
        and out["reward_std"] == pytest.approx(0.0)
    )


def test_dpo_displacement_and_its_control():
    d = q.dpo_displacement(beta=0.1, similarity=0.9)
    assert d["chosen"][0] == d["rejected"][0] == 0.0 and d["loss"][0] == pytest.approx(
        math.log(2)
    )
    assert d["chosen"][-1] < 0 and d["margins"][-1] > 0 and d["accuracy"][-1] == 1.0
    assert np.all(np.diff(d["margins"]) > 0)
    control = q.dpo_displacement(beta=0.1, similarity=0.9, other_alignment=0.0)
    assert control["chosen"][-1] > 0
    far = q.dpo_displacement(beta=0.1, similarity=-0.5, steps=400)
    assert far["loss"][-1] < 0.05 and far["accuracy"][-1] == 1.0


def test_dpo_ln2_cases():
    rows = {r["case"].split(":")[0].split(" (")[0]: r for r in q.dpo_stuck_at_ln2()}
    assert rows["step 0"]["ln2_gap"] == 0.0 and rows["step 0"]["grad_norm"] > 0
    assert rows["no gradient reaches the policy"]["grad_norm"] == 0.0
    assert (
        rows["beta = 1e-8"]["ln2_gap"] < 1e-8
        and rows["beta = 1e-8"]["grad_norm"] < 1e-8
    )


def test_cost_sensitivity_gives_ranges_that_contain_the_default():
    w = costs.Workload(n_params=7_000_000_000)
    s = costs.sensitivity(w)
    same = w.with_(ppo_samples=w.group_size)
    times = {
        a: sum(costs.step_time(c).values()) for a, c in costs.compare(same).items()
    }
    lo, hi = s["time_ratio"]
    assert lo < times["ppo"] / times["grpo"] < hi
    assert s["n_assumptions"] == 45 and len(s["crossovers"]) >= 2
    with pytest.raises(ValueError, match="unknown"):
        costs.sensitivity(w, grid={"speed": (1,)})


def test_dpo_displacement_loss_and_rewards_are_trls_sigmoid_loss():
    from dpo_grpo.trl_exact.dpo import dpo_loss

    d = q.dpo_displacement(beta=0.2, similarity=0.5, steps=20)
    ref = -math.log(8)
    for k in (0, 7, 20):
        out = dpo_loss(
            [d["logp_chosen"][k]], [d["logp_rejected"][k]], [ref], [ref], beta=0.2
        )
        assert d["loss"][k] == pytest.approx(out.loss, rel=1e-12)
        assert d["chosen"][k] == pytest.approx(out.metrics["rewards/chosen"], abs=1e-12)
        assert d["margins"][k] == pytest.approx(
            out.metrics["rewards/margins"], abs=1e-12
        )


def test_every_trl_issue_the_book_links_is_registered():
    import re
    from pathlib import Path

    book = Path(__file__).resolve().parents[2] / "book"
    linked = set()
    for path in book.glob("*.ipynb"):
        linked |= {
            int(n)
            for n in re.findall(
                r"github\.com/huggingface/trl/(?:issues|pull)/(\d+)", path.read_text()
            )
        }
    assert linked, "the book links no TRL issue"
    assert linked <= set(q.TRL_ISSUES), sorted(linked - set(q.TRL_ISSUES))


def test_meanings_and_ln2_cases_in_english_and_chinese(monkeypatch):
    """The run page's tables: English as written, Chinese under DPO_GRPO_LANG=zh (code
    names stay)."""
    import html
    import re

    from dpo_grpo import tables
    from dpo_grpo.chapters.trl_log_line import LOG_LINE_MEANINGS

    def cells(rows):
        return re.findall(r"<td[^>]*>(.*?)</td>", tables.html_table(rows, ["x"]))

    han = re.compile(r"[\u4e00-\u9fff]")
    meanings = [[m] for m in LOG_LINE_MEANINGS.values()]
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    assert cells(meanings) == [html.escape(m) for [m] in meanings]
    assert [r["case"] for r in q.dpo_stuck_at_ln2(0.1)] == [
        "step 0: policy = reference",
        "no gradient reaches the policy (grad_norm 0)",
        "beta = 1e-8 (beta -> 0)",
        "trained pairs, beta = 0.1",
    ]
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    shown = cells(meanings)
    assert all(han.search(c) for c in shown), [c for c in shown if not han.search(c)]
    assert "max_grad_norm" in shown[1]
    cases = [r["case"] for r in q.dpo_stuck_at_ln2(0.25)]
    assert all(han.search(c) for c in cases) and "0.25" in cases[3]
