"""The lab sweep's sentences (:func:`dpo_grpo.lab.sweep.verdict`,
:func:`~dpo_grpo.lab.sweep.gain_verdict`), which the lab page prints and glues into its
prose, in the Chinese edition (DPO_GRPO_LANG=zh): Chinese words, the same numbers; in
English they are unchanged."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("torch")
from dpo_grpo.lab import sweep

HAN = re.compile(r"[\u4e00-\u9fff]")
NUMBER = re.compile(r"[+-]?\d+\.\d+")


def results(finals: dict, start=0.2) -> dict:
    """A results dict with these final greedy pass rates per method, one per seed."""
    runs = {
        m: [
            {
                "seed": s,
                "final_greedy": x,
                "final_sampled": x / 2,
                "gain_greedy": x - start,
                "gain_sampled": (x - start) / 2,
            }
            for s, x in enumerate(values)
        ]
        for m, values in finals.items()
    }
    return {
        "format": sweep.RESULTS_FORMAT,
        "seeds": list(range(5)),
        "methods": list(finals),
        "runs": runs,
    }


RES = results(
    {
        "grpo": [0.5, 0.6, 0.7, 0.6, 0.5],
        "dpo": [0.1, 0.3, 0.2, 0.25, 0.15],
        "rft": [0.4, 0.5, 0.6, 0.5, 0.4],
    }
)


def test_sentences_in_english_are_unchanged(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    lines = sweep.gain_verdict(RES) + sweep.verdict(RES)
    assert lines[0].startswith("GRPO ends above its SFT start on the final greedy")
    assert "DPO is not separated from its SFT start" in lines[1]
    assert any(line.startswith("GRPO is ahead of RFT") for line in lines)
    assert not any(HAN.search(line) for line in lines)


def test_sentences_in_chinese(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    en = sweep.gain_verdict(RES, "final_sampled") + sweep.verdict(RES, "final_sampled")
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    zh = sweep.gain_verdict(RES, "final_sampled") + sweep.verdict(RES, "final_sampled")
    assert len(zh) == len(en)
    for cn, english in zip(zh, en):
        assert HAN.search(cn), cn
        assert NUMBER.findall(cn) == NUMBER.findall(english)
    assert zh[0].startswith("GRPO 的最终采样 pass@1 值高于其 SFT 起点（平均增益 ")
    assert "95% t 区间" in zh[0]
    assert any(line.startswith("GRPO 的最终采样 pass@1 值领先于 RFT") for line in zh)
