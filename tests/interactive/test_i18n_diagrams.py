"""Figure 1 (:mod:`dpo_grpo.interactive.diagrams`) in the Chinese edition: its title,
method columns' role labels, box labels, legend and notes are drawn in Chinese under
DPO_GRPO_LANG=zh; in English they are unchanged, and the grid data stays English either
way (tests and notebooks read it)."""

from __future__ import annotations

import re

from dpo_grpo.interactive import diagrams
from testing_support import figure_texts
from testing_support import drawn_as_boxes

HAN = re.compile(r"[\u4e00-\u9fff]")


def _by_gid(fig) -> dict:
    return {t.get_gid(): t.get_text() for ax in fig.axes for t in ax.texts}


def test_figure_one_in_english_is_unchanged(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    fig = diagrams.draw_pipelines()
    texts = figure_texts(fig)
    assert texts[0] == "What each method keeps and drops"
    assert not any(HAN.search(t) for t in texts)
    g = _by_gid(fig)
    assert g["role/data"] == "training\ndata"
    assert g["label/GRPO/baseline"] == "group mean and std\n(no critic)"
    assert g["note/0"].startswith("Note 1. Policy and reference can share")
    assert "dropped" in texts


def test_figure_one_in_chinese(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    fig = diagrams.draw_pipelines()
    assert drawn_as_boxes(fig) == []
    texts = figure_texts(fig)
    g = _by_gid(fig)
    assert texts[0] == "每种方法保留什么、去掉什么"
    assert g["title/GRPO"] == "GRPO"  # method names stay
    assert g["role/baseline"] == "优势\n基线"
    assert g["label/GRPO/baseline"] == "组内均值和标准差\n（无价值网络）"
    assert g["label/PPO-RLHF/baseline"].startswith("价值网络 $V_\\phi(s_t)$")
    assert g["note/0"].startswith("注 1. ")
    assert all(
        HAN.search(t) for gid, t in g.items() if gid and not gid.startswith("title/")
    )
    legend = texts[-len(diagrams.STATUS_STYLE) :]
    assert all(HAN.search(t) for t in legend)
    # the data the tests and notebooks read is unchanged
    grid = diagrams.pipeline_components()
    assert grid["GRPO"]["baseline"]["label"] == "group mean and std\n(no critic)"


def test_an_edited_label_without_translation_is_drawn_as_given(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    grid = diagrams.pipeline_components()
    grid["GRPO"]["reward"] = {"label": "a unit-test runner", "status": "computed"}
    g = _by_gid(diagrams.draw_pipelines(grid))
    assert g["label/GRPO/reward"] == "a unit-test runner"
