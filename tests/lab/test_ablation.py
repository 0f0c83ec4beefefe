"""Tests of dpo_grpo.lab.ablation on hand-made results: the Holm-corrected verdict
family (ties kept apart), the budget to reach a pass rate, the per-class breakdown."""

import re

import pytest

pytest.importorskip("scipy")
from dpo_grpo.lab import ablation, report, sweep
from dpo_grpo.stats import holm


def _rec(seed, curve, carry, nocarry, completions=(0, 100, 200)):
    return {
        "seed": seed,
        "heldout_pass_rate": curve,
        "heldout_pass_rate_sampled": curve,
        "heldout_pass_rate_carry": carry,
        "heldout_pass_rate_nocarry": nocarry,
        "heldout_pass_rate_sampled_carry": carry,
        "heldout_pass_rate_sampled_nocarry": nocarry,
        "eval_completions_sampled": list(completions),
        "eval_forward_tokens": [0, 10, 30],
        "eval_backward_tokens": [0, 5, 15],
        **{
            f"{k}_{kind}": v
            for kind in ("greedy", "sampled")
            for k, v in (
                ("start", curve[0]),
                ("final", curve[-1]),
                ("best", max(curve)),
                ("gain", curve[-1] - curve[0]),
            )
        },
    }


def _results():
    runs = {
        "rft": [
            _rec(0, [0.2, 0.3, 0.4], [0.1, 0.2, 0.3], [0.4, 0.5, 0.6]),
            _rec(1, [0.2, 0.35, 0.5], [0.1, 0.3, 0.4], [0.4, 0.5, 0.7]),
            _rec(2, [0.2, 0.3, 0.45], [0.1, 0.2, 0.3], [0.4, 0.5, 0.7]),
        ],
        "online_rft": [
            _rec(0, [0.2, 0.25, 0.4], [0.1, 0.2, 0.3], [0.4, 0.3, 0.3]),
            _rec(1, [0.2, 0.3, 0.3], [0.1, 0.2, 0.3], [0.4, 0.45, 0.45]),
            _rec(2, [0.2, 0.2, 0.3], [0.1, 0.2, 0.3], [0.4, 0.45, 0.3]),
        ],
    }
    return {"format": 3, "seeds": [0, 1, 2], "methods": list(runs), "runs": runs}


def test_verdict_family_holm_and_ties_by_hand():
    res = _results()
    rows = ablation.verdict_family(res, metrics=("final_sampled",))
    # two gains and one pair (online RFT - RFT)
    assert [(r["a"], r["b"]) for r in rows] == [
        ("rft", None),
        ("online_rft", None),
        ("online_rft", "rft"),
    ]
    pair = ablation.find(rows, "online_rft", "rft", "final_sampled")
    # differences 0.0, -0.2, -0.15: one tie, two behind
    assert (pair["ahead"], pair["behind"], pair["ties"]) == (0, 2, 1)
    assert pair["sign_p"] == 0.5  # two untied seeds, both behind: 2 * 1/4
    assert [r["holm_p"] for r in rows] == pytest.approx(holm([r["t_p"] for r in rows]))
    for r in rows:
        want = "not separated" if r["holm_p"] >= 0.05 else "ahead"
        assert r["direction"] == want
    # RFT's gains 0.2, 0.3, 0.25: t = 0.25 / (0.05 / sqrt 3) = 8.66, 2 df
    rft = ablation.find(rows, "rft", None, "final_sampled")
    assert rft["t_p"] == pytest.approx(0.01307, abs=1e-4)
    assert rft["holm_p"] == pytest.approx(3 * rft["t_p"])
    text = report.verdict_table(rows, sweep.NAMES)
    assert "online RFT - RFT" in text and " 0/2/1" in text


def test_budget_to_reach_by_hand():
    res = _results()
    out = ablation.budget_to_reach(res, "rft", 0.35)
    # seed 0 reaches 0.35 at its third evaluation, seeds 1 at its second, 2 third
    assert out["per_seed"] == [200.0, 100.0, 200.0] and out["reached"] == 3
    assert out["mean"] == pytest.approx(500 / 3)
    tok = ablation.budget_to_reach(res, "online_rft", 0.35, axis="token_passes")
    assert tok["per_seed"] == [45.0, None, None] and tok["reached"] == 1
    assert ablation.budget_spent(res, "rft", "token_passes") == 45.0
    with pytest.raises(ValueError, match="axis"):
        ablation.budget_to_reach(res, "rft", 0.3, axis="flops")
    with pytest.raises(ValueError, match="method"):
        ablation.budget_to_reach(res, "ppo", 0.3)


def test_class_breakdown_counts_forgetting():
    b = ablation.class_breakdown(_results(), methods=("rft", "online_rft"))
    assert b["rft"]["forgot"] == 0
    # online RFT: no-carry 0.4 -> 0.3, 0.45, 0.3: two of three seeds fell
    assert b["online_rft"]["forgot"] == 2
    assert b["online_rft"]["nocarry"]["final"] == pytest.approx(0.35)
    assert b["rft"]["carry"]["gain"] == pytest.approx(1 / 3 - 0.1)
    assert "2/3" in report.class_table(b, sweep.NAMES)


def test_reach_table_lists_seeds_reached_and_budgets():
    res = _results()
    reach = {
        (m, axis): ablation.budget_to_reach(res, m, 0.35, axis=axis)
        for m in ("rft", "online_rft")
        for axis in ablation.AXES
    }
    text = report.reach_table(reach, sweep.NAMES)
    lines = text.splitlines()
    assert "completions" in lines[0] and "token_passes" in lines[0]
    assert lines[1].split()[:2] == ["RFT", "3/3"] and "167" in lines[1]
    assert "1/3" in lines[2] and "45" in lines[2]


def test_tables_name_methods_and_columns_in_chinese(monkeypatch):
    """The lab page's tables in Chinese: "online RFT" and the column words translated,
    the numbers and code names (``forgot``, ``dpo_lr``) as in English."""
    res = _results()
    reach = {
        (m, axis): ablation.budget_to_reach(res, m, 0.35, axis=axis)
        for m in ("rft", "online_rft")
        for axis in ablation.AXES
    }
    b = ablation.class_breakdown(res, methods=("rft", "online_rft"))
    rows = ablation.verdict_family(res)

    def shown():
        return {
            "reach": report.reach_table(reach, sweep.NAMES),
            "class": report.class_table(b, sweep.NAMES),
            "verdict": report.verdict_table(rows, sweep.NAMES),
            "grid": report.grid_lines(["rft", "online_rft"], sweep.NAMES),
        }

    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    en = shown()
    assert en["grid"].splitlines()[1].startswith("online RFT   grpo_lr in {")
    assert "carry" in en["class"].splitlines()[0]
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    zh = shown()
    for key, text in zh.items():
        assert "online" not in text, key
        assert "在线 RFT" in text, key
        assert re.findall(r"\d+", text) == re.findall(r"\d+", en[key]), key
    assert zh["class"].splitlines()[0].split() == ["进位", "不进位", "forgot"]
    assert zh["reach"].splitlines()[0].split() == ["补全数", "token", "计算次数"]
    assert "grpo_lr 取 {" in zh["grid"] and "符号 p" in zh["verdict"]
