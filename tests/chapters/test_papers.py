"""dpo_grpo.chapters.papers: the four papers and their quoted results as data; derived
numbers computed from them."""

import re
from pathlib import Path

import pytest

from dpo_grpo.chapters import papers as pp

BIB = Path(__file__).resolve().parents[2] / "book" / "references.bib"


def test_the_four_papers_and_their_ids():
    assert [(p.short, p.arxiv, p.year) for p in pp.PAPERS] == [
        ("PPO", "1707.06347", 2017),
        ("DPO", "2305.18290", 2023),
        ("DeepSeekMath", "2402.03300", 2024),
        ("DeepSeek-R1", "2501.12948", 2025),
    ]
    bib = BIB.read_text(encoding="utf-8")
    for p in pp.PAPERS:
        entry = bib[bib.index("{" + p.key + ",") :]
        entry = entry[: entry.index("\n}")]
        assert p.arxiv in entry and f"year = {{{p.year}}}" in entry


def test_arxiv_month_agrees_with_the_year():
    for p in pp.PAPERS:
        year, month = pp.arxiv_month(p.arxiv)
        assert year == p.year and 1 <= month <= 12
    assert pp.arxiv_month("2501.12948v2") == (2025, 1)
    dates = [pp.arxiv_month(p.arxiv) for p in pp.PAPERS]
    assert dates == sorted(dates)
    with pytest.raises(ValueError, match="arxiv_id"):
        pp.arxiv_month("math/0211159")
    with pytest.raises(ValueError, match="month"):
        pp.arxiv_month("2313.00001")
    with pytest.raises(TypeError, match="arxiv_id"):
        pp.arxiv_month(1707.06347)


def test_quoted_values_are_the_papers_numbers():
    quoted = {(r.model, r.benchmark, r.protocol): r.value for r in pp.RESULTS}
    assert quoted[("DeepSeekMath-Instruct 7B", "GSM8K", pp.CHAIN_OF_THOUGHT)] == 82.9
    assert quoted[("DeepSeekMath-RL 7B", "GSM8K", pp.CHAIN_OF_THOUGHT)] == 88.2
    assert quoted[("DeepSeekMath-Instruct 7B", "MATH", pp.CHAIN_OF_THOUGHT)] == 46.8
    assert quoted[("DeepSeekMath-RL 7B", "MATH", pp.CHAIN_OF_THOUGHT)] == 51.7
    assert quoted[("DeepSeekMath 7B", "MATH", pp.MAJORITY_64)] == 60.9
    assert pp.DEEPSEEKMATH_RL_SETTINGS == {
        "samples_per_question": 64,
        "max_length": 1024,
        "updates_per_exploration": 1,
    }


def test_gains_are_computed():
    g = pp.rl_gains()
    assert g["MATH"]["points"] == pytest.approx(4.9) and g["GSM8K"][
        "points"
    ] == pytest.approx(5.3)
    assert g["MATH"]["relative"] == pytest.approx(4.9 / 46.8)
    assert g["GSM8K"]["error_reduction"] == pytest.approx(5.3 / 17.1)


def test_comparability():
    rl = pp.result("DeepSeekMath-RL 7B", "MATH")
    vote = pp.result("DeepSeekMath 7B", "MATH", pp.MAJORITY_64)
    ok, reason = pp.comparable(rl, vote)
    assert not ok and "protocol" in reason
    with pytest.raises(ValueError, match="not comparable"):
        pp.gain(pp.result("DeepSeekMath-Instruct 7B", "MATH"), vote)
    ok, reason = pp.comparable(pp.result("DeepSeekMath-RL 7B", "GSM8K"), rl)
    assert not ok and "benchmark" in reason
    other = rl._replace(paper="deepseek2025r1")
    assert pp.comparable(rl, other) == (
        False,
        "different papers, hence different models, data and settings",
    )
    with pytest.raises(TypeError, match="a must be a Result"):
        pp.comparable((1, 2), rl)
    with pytest.raises(ValueError, match="no quoted result"):
        pp.result("DeepSeekMath-RL 7B", "AIME")


def test_lineage_and_lookup():
    keys = {p.key for p in pp.PAPERS}
    for src, dst, label in pp.LINEAGE:
        assert src in keys and dst in keys and label
        assert pp.arxiv_month(pp.paper(src).arxiv) < pp.arxiv_month(pp.paper(dst).arxiv)
    assert pp.paper("DPO").key == "rafailov2023dpo"
    with pytest.raises(ValueError, match="unknown paper"):
        pp.paper("TRPO")


def test_figures_draw_the_data():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    fig = pp.timeline_figure()
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    for p in pp.PAPERS:
        assert p.arxiv in texts and p.short in texts
    fig2 = pp.results_figure()
    labels = {t.get_text() for t in fig2.axes[0].texts}
    for r in pp.RESULTS:
        assert f"{r.value:.1f}" in labels
    assert re.search(
        "not comparable",
        " ".join(t.get_text() for t in fig2.axes[0].get_legend().get_texts()),
    )


def test_out_of_domain_gains_are_quoted_and_computed():
    quoted = {
        (r.model, r.benchmark): r.value
        for r in pp.RESULTS
        if r.protocol == pp.CHAIN_OF_THOUGHT
    }
    assert (
        quoted[("DeepSeekMath-Instruct 7B", "MGSM-zh")] == 73.2
        and quoted[("DeepSeekMath-RL 7B", "MGSM-zh")] == 79.6
    )
    assert (
        quoted[("DeepSeekMath-Instruct 7B", "CMATH")] == 84.6
        and quoted[("DeepSeekMath-RL 7B", "CMATH")] == 88.8
    )
    g = pp.rl_gains(pp.BENCHMARK_ORDER)
    assert g["MGSM-zh"]["points"] == pytest.approx(6.4) and g["CMATH"][
        "points"
    ] == pytest.approx(4.2)
    assert set(pp.rl_gains()) == set(pp.RL_IN_DOMAIN) == {"GSM8K", "MATH"}


def test_r1_beta_is_the_value_trls_documentation_cites():
    trl = pytest.importorskip("trl")
    import dataclasses

    (beta,) = [f for f in dataclasses.fields(trl.GRPOConfig) if f.name == "beta"]
    text = beta.metadata["help"]
    assert "DeepSeek-R1" in text and f"`{pp.R1_KL_BETA}`" in text


def test_what_each_paper_introduced_in_english_and_chinese(monkeypatch):
    """Chapter 7 prints p.introduced_text(): English as written, Chinese under
    DPO_GRPO_LANG=zh."""
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    assert [p.introduced_text() for p in pp.PAPERS] == [p.introduced for p in pp.PAPERS]
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    for p in pp.PAPERS:
        assert re.search(r"[\u4e00-\u9fff]", p.introduced_text()), p.short
