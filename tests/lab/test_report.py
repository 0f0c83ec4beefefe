"""The sentences of the lab page (:mod:`dpo_grpo.lab.report`) that its prose pastes in
(glue) or its cells print: in English each is the text the page's cells used to build,
byte for byte; under DPO_GRPO_LANG=zh the same numbers in Chinese words (the Chinese
edition runs the same cells), so no English clause lands in a Chinese sentence."""

from __future__ import annotations

import re

import pytest
from dpo_grpo import i18n
from dpo_grpo.lab import report, sweep

HAN = re.compile(r"[\u4e00-\u9fff]")
NUMBER = re.compile(r"\d+(?:\.\d+)?%?")
#: a run of three English words: what a Chinese sentence must not hold
ENGLISH = re.compile(r"[A-Za-z]+(?:[ ,:]+[a-z]+){2,}")
ENV = {"environment": {"torch": "2.5.1+cpu", "cpu": "AMD EPYC 7B13"}}


@pytest.fixture(autouse=True)
def _english(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)


def check(exact, within, diff):
    return {"exact": exact, "within_tolerance": within, "max_abs_diff": diff}


def old_notes():
    """The SFT listing's notes as the page wrote them, for every (correct, no-carry)."""
    return {
        (correct, no_carry): (
            "correct"
            if correct
            else ("wrong: the no-carry answer" if no_carry else "wrong")
        )
        for correct in (True, False)
        for no_carry in (True, False)
    }


def rob_table() -> dict:
    results = sweep.load("cpu")
    return {
        m: sweep.robustness_table(results, "grpo", "rft", m)
        for m in ("final_greedy", "final_sampled")
    }


def old_rob_says(rob) -> str:
    behind = {m: [r["direction"] == "behind" for r in rows] for m, rows in rob.items()}
    elsewhere = [
        f"{r['label']} ({metric.split('_')[1]}: {r['direction']})"
        for metric, rows in rob.items()
        for r in rows
        if r["direction"] != "behind"
    ]
    return (
        f"GRPO ends behind RFT in {sum(behind['final_greedy'])} of "
        f"{len(behind['final_greedy'])} settings on the greedy pass rate and in "
        f"{sum(behind['final_sampled'])} on the sampled pass@1"
        + (f"; the others: {'; '.join(elsewhere)}" if elsewhere else "")
    )


def sentences() -> dict:
    """Every new function's text, on inputs that reach each branch."""
    rob = rob_table()
    mixed = {k: [dict(r) for r in rows] for k, rows in rob.items()}
    mixed["final_greedy"][1]["direction"] = "not separated"
    mixed["final_sampled"][2]["direction"] = "ahead"
    out = {f"note {k}": report.answer_note(*k) for k in old_notes()} | {
        "sft line": report.sft_summary_line(120, 3.25, 0.61, 0.293, 0.12, "10", 0.18),
        "flaw": report.sft_error_sentence(0.6, "10", 0.18),
        "no flaw": report.sft_error_sentence(0.12, "10", 0.18),
        "live exact": report.live_check_sentence({"GRPO": check(True, True, 0)}, ENV),
        "live within": report.live_check_sentence(
            {"GRPO": check(False, True, 0.004), "DPO": check(True, True, 0.0)}, ENV
        ),
        "live differ": report.live_check_sentence(
            {"GRPO": check(False, False, 0.0125), "DPO": check(False, True, 0.004)},
            ENV,
        ),
        "live line": report.live_check_line(
            3, report.live_check_sentence({"GRPO": check(True, True, 0)}, ENV)
        ),
        "rob": report.robustness_sentence(rob),
        "rob mixed": report.robustness_sentence(mixed),
        "rise every": report.margin_rise_phrase([0.1, 0.2, 0.3]),
        "rise overall": report.margin_rise_phrase([0.1, 0.3, 0.2]),
        "ratio every": report.ratio_trend_phrase([1.0, 2.0, 3.5]),
        "ratio overall": report.ratio_trend_phrase([1.0, 0.9, 3.5]),
    }
    for which in report.COMPARISONS:
        for direction in report.DIRECTIONS:
            out[which, direction] = report.comparison_sentence(which, direction)
    return out


def test_in_english_the_sentences_are_what_the_page_built():
    s = sentences()
    for k, note in old_notes().items():
        assert s[f"note {k}"] == note
    assert s["sft line"] == (
        "SFT: 120 steps in 3.2 s; probe pass rate 0.610; held-out pass rate 0.293; "
        "12% of the wrong answers are the no-carry answer; the most common wrong "
        "answer is '10' (18% of them)"
    )
    assert s["flaw"] == "in most of its errors it reproduces the demonstrator's flaw"
    assert s["no flaw"] == (
        "most of its errors are not the flaw: the most common wrong answer, `10`, "
        "accounts for 18% of them on its own. SFT stopped early, by design, before "
        "the model had learned the sums: the start is undertrained, and its errors "
        "collapse onto frequent answers rather than onto the demonstrator's"
    )
    assert s["live exact"] == "reproduce the file bit for bit"
    assert s["live within"] == (
        "reproduce the file's greedy curves exactly and its sampled pass@1 to within "
        "one sample"
    )
    assert s["live differ"] == (
        "differ from the file by at most 0.013 in a pass rate (the file was written "
        "with torch 2.5.1+cpu on AMD EPYC 7B13; floating-point sums differ between "
        "CPU types, and a run diverges from the first differing sample)"
    )
    assert s["live line"] == "seed 3, live vs file: reproduce the file bit for bit"
    rob = rob_table()
    assert s["rob"] == old_rob_says(rob)
    mixed = {k: [dict(r) for r in rows] for k, rows in rob.items()}
    mixed["final_greedy"][1]["direction"] = "not separated"
    mixed["final_sampled"][2]["direction"] = "ahead"
    assert s["rob mixed"] == old_rob_says(mixed) and "; the others: " in s["rob mixed"]
    assert s["rise every"] == "at every evaluation" and s["rise overall"] == "overall"
    assert s["ratio every"] == "rises with every doubling of the length"
    assert s["ratio overall"] == "rises overall, though not at every doubling"
    assert s["ppo_vs_grpo", "not separated"] == (
        "the seeds do not separate PPO, with its critic, from GRPO"
    )
    assert s["grpo_vs_rft", "ahead"] == (
        "At this budget, on this task, GRPO's fresh samples paid off: it ended ahead "
        "of RFT"
    )
    assert s["dpo_vs_start", "behind"] == (
        "its final greedy pass rate is below its start"
    )
    for text in s.values():
        assert not HAN.search(text)


def test_in_chinese_the_sentences_have_chinese_words_and_the_same_numbers(
    monkeypatch,
):
    en = sentences()
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    zh = sentences()
    for key, text in zh.items():
        assert HAN.search(text), (key, text)
        # the numbers, the method names and the code stay; no English clause is left
        assert sorted(NUMBER.findall(text)) == sorted(NUMBER.findall(en[key])), key
        assert not ENGLISH.search(text.replace("torch 2.5.1+cpu", "")), (key, text)
    assert "'10'" in zh["sft line"] and "`10`" in zh["no flaw"]
    assert "AMD EPYC 7B13" in zh["live differ"]
    assert zh["rob mixed"].count("；") == en["rob mixed"].count("; ")
    assert "预设配置（未调参）" in zh["rob mixed"]


def test_the_sentences_name_bad_arguments():
    with pytest.raises(TypeError, match="correct"):
        report.answer_note(1, False)
    with pytest.raises(ValueError, match="nocarry"):
        report.sft_error_sentence(1.5, "10", 0.2)
    with pytest.raises(ValueError, match="top_share"):
        report.sft_summary_line(1, 1.0, 0.5, 0.5, 0.1, "10", -0.1)
    with pytest.raises(TypeError, match="checks"):
        report.live_check_sentence([], ENV)
    with pytest.raises(ValueError, match="checks"):
        report.live_check_sentence({}, ENV)
    with pytest.raises(ValueError, match="which"):
        report.comparison_sentence("grpo_vs_ppo", "ahead")
    with pytest.raises(ValueError, match="direction"):
        report.comparison_sentence("grpo_vs_rft", "level")
    with pytest.raises(ValueError, match="final_sampled"):
        report.robustness_sentence({"final_greedy": []})
    with pytest.raises(ValueError, match="margins"):
        report.margin_rise_phrase([0.1])
    with pytest.raises(TypeError, match="ratios"):
        report.ratio_trend_phrase(None)


def test_chinese_headers_sit_over_their_columns(monkeypatch):
    """The text tables pad by columns of a monospaced font: a Chinese header takes two
    columns a character, and its line ends where the number rows end."""
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    lines = report.error_profile_table({"SFT": (0.5, 0.25), "GRPO": (0.75, 0.5)})
    lines = lines.splitlines()
    assert HAN.search(lines[0])
    assert [i18n.display_width(line) for line in lines] == [len(lines[1])] * 3
