"""Chapter figures in the Chinese edition (DPO_GRPO_LANG=zh): the matplotlib figures of
chapters 5 and 7 draw their titles, axis titles, legends and labels in Chinese with a
CJK font; in English they are unchanged."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib import rcParams  # noqa: E402

from dpo_grpo.chapters import papers as pp  # noqa: E402
from dpo_grpo.chapters import pipeline  # noqa: E402

from testing_support import drawn_as_boxes  # noqa: E402

HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(autouse=True)
def _restore_fonts():
    saved = list(rcParams["font.sans-serif"])
    yield
    rcParams["font.sans-serif"] = saved
    plt.close("all")


def _texts(fig):
    ax = fig.axes[0]
    legend = ax.get_legend()
    return {
        "title": ax.get_title(),
        "ylabel": ax.get_ylabel(),
        "texts": [t.get_text() for t in ax.texts],
        "legend": [t.get_text() for t in legend.get_texts()] if legend else [],
    }


def test_paper_figures_in_english_are_unchanged(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    t = _texts(pp.timeline_figure())
    assert t["title"] == (
        "The lineage in four papers (date = arXiv month; arcs: what was inherited)"
    )
    assert "ratio + clip" in t["texts"]
    assert not any(HAN.search(s) for s in t["texts"])
    r = _texts(pp.results_figure())
    assert r["title"] == "DeepSeekMath, as quoted: Table 5 and the abstract"
    assert r["ylabel"] == "accuracy (%)"
    assert r["legend"][0] == (
        "DeepSeekMath-Instruct 7B (chain-of-thought, one answer per problem)"
    )


def test_paper_figures_in_chinese(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    t = _texts(pp.timeline_figure())
    assert HAN.search(t["title"]) and "arXiv" in t["title"]
    assert "概率比 + 裁剪" in t["texts"]
    labels = [s for s in t["texts"] if s.startswith("DPO\n")]
    assert (
        labels and "arXiv:2305.18290 (2023-05)" in labels[0] and HAN.search(labels[0])
    )
    r = _texts(pp.results_figure())
    assert r["title"] == "DeepSeekMath 的引用结果：表 5 与摘要"
    assert r["ylabel"] == "准确率（%）"
    assert r["legend"][0].startswith("DeepSeekMath-Instruct 7B (思维链") and HAN.search(
        r["legend"][0]
    )
    assert "不可比" in r["legend"][-1]
    # the numbers on the bars are the same
    assert {f"{x.value:.1f}" for x in pp.RESULTS} <= set(r["texts"])


def test_data_flow_in_english_and_chinese(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    _, ax = plt.subplots(figsize=(12, 5))
    en = [t.get_text() for t in pipeline.plot_data_flow(ax).texts]
    assert en[0] == "1. pick prompts" and not any(HAN.search(s) for s in en)
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    _, ax = plt.subplots(figsize=(12, 5))
    zh = [t.get_text() for t in pipeline.plot_data_flow(ax).texts]
    assert zh[0] == "1. 选取 prompt"
    assert all(HAN.search(s) for s in zh[:14])
    assert len(zh) == len(en)


def test_chinese_figures_draw_every_glyph(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    _, ax = plt.subplots(figsize=(12, 5))
    for fig in (
        pp.timeline_figure(),
        pp.results_figure(),
        pipeline.plot_data_flow(ax).figure,
    ):
        assert drawn_as_boxes(fig) == []
    assert rcParams["font.sans-serif"][0] == "Noto Sans CJK SC"
