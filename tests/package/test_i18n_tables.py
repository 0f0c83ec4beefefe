"""Tables in the Chinese edition (DPO_GRPO_LANG=zh): the words the package writes into a
table (a bool's yes/no, the budget table of chapter 6) come out in Chinese; in English
they are unchanged. Headers a notebook passes are translated where they are rendered
(code names and symbols stay), and so are text cells that are catalog entries."""

from __future__ import annotations

import re

from dpo_grpo.chapters import costs
from dpo_grpo.tables import html_table, markdown_table

HAN = re.compile(r"[\u4e00-\u9fff]")
ROWS = [{"check": "a", "passed": True}, {"check": "b", "passed": False}]


def test_bool_cells_in_english_are_unchanged(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    assert markdown_table(ROWS).splitlines()[2:] == [
        "| a | yes |",
        "| b | **no** |",
    ]
    html = html_table(ROWS)
    assert ">yes</td>" in html and "<strong>no</strong>" in html


def test_bool_cells_in_chinese(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    assert markdown_table(ROWS).splitlines()[2:] == ["| a | 是 |", "| b | **否** |"]
    html = html_table(ROWS)
    # a failed check still stands out
    assert ">是</td>" in html and "<strong>否</strong>" in html
    assert "**" not in html


def test_budget_table_in_english_is_unchanged(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    html = costs.format_rows(costs.budget_rows(costs.Workload(n_params=7_000_000_000)))
    assert ">item</th>" in html and ">unit</th>" in html and ">PPO</th>" in html
    assert ">trainable state per GPU</td>" in html and ">time: total</td>" in html
    assert not HAN.search(html)


def test_budget_table_in_chinese(monkeypatch):
    w = costs.Workload(n_params=7_000_000_000)
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    en = costs.format_rows(costs.budget_rows(w))
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    zh = costs.format_rows(costs.budget_rows(w))
    assert ">项目</th>" in zh and ">单位</th>" in zh and ">PPO</th>" in zh
    assert ">每张 GPU 的可训练状态</td>" in zh and ">时间：合计</td>" in zh
    assert ">秒</td>" in zh
    # the same numbers
    number = re.compile(r">([0-9][0-9.,e+-]*)</td>")
    assert number.findall(zh) == number.findall(en) and len(number.findall(en)) > 30
    # the rows themselves stay data (English keys for code that reads them)
    assert costs.budget_rows(w)[0][0] == "trainable state per GPU"


def test_headers_and_label_cells_in_chinese(monkeypatch):
    rows = [["ahead", "GRPOConfig(beta=0.0)", 0.5], ["behind", "ahead", 1.0]]
    cols = ["estimator", "loss_type", "mean"]
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    en = html_table(rows, cols, code_columns=(1,))
    assert ">estimator</th>" in en and ">ahead</td>" in en and not HAN.search(en)
    assert (
        markdown_table(rows, cols).splitlines()[0] == "| estimator | loss_type | mean |"
    )
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    zh = html_table(rows, cols, code_columns=(1,))
    assert ">估计量</th>" in zh and ">loss_type</th>" in zh and ">均值</th>" in zh
    assert ">领先</td>" in zh and ">落后</td>" in zh
    # a code column is code: its cells stay as written
    assert "<code>ahead</code>" in zh and "<code>GRPOConfig(beta=0.0)</code>" in zh
    assert markdown_table(rows, cols).splitlines()[0] == "| 估计量 | loss_type | 均值 |"
    assert markdown_table(rows, cols, code_columns=(0,)).splitlines()[2:] == [
        "| `ahead` | GRPOConfig(beta=0.0) | 0.5 |",
        "| `behind` | 领先 | 1.0 |",
    ]
    # a header already in Chinese (costs.format_rows) is left alone
    assert ">项目</th>" in html_table([[1]], ["项目"])
