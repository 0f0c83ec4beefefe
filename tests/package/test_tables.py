"""dpo_grpo.tables: the package's one table renderer (Markdown and HTML)."""

from __future__ import annotations

import numpy as np
import pytest

from dpo_grpo import tables


def test_markdown_from_dicts_formats_escapes_and_flags_failures():
    rows = [
        {"loss_type": "grpo", "cases": 3, "diff": 1.23e-14, "ok": True},
        {"loss_type": "a|b", "cases": 1, "diff": None, "ok": False},
    ]
    md = tables.markdown_table(
        rows,
        ["loss_type", "cases", "diff", "ok"],
        {"diff": ".1e"},
        headers={"diff": "|Δ|"},
    )
    assert md.splitlines() == [
        "| loss_type | cases | \\|Δ\\| | ok |",
        "|---|---|---|---|",
        "| grpo | 3 | 1.2e-14 | yes |",
        "| a\\|b | 1 | — | **no** |",
    ]
    # default columns
    assert (
        tables.markdown_table(rows[:1]).splitlines()[0]
        == "| loss_type | cases | diff | ok |"
    )


def test_markdown_from_sequences_with_a_float_format():
    md = tables.markdown_table(
        [[1, 0.5], ["x", np.float64(2.0)]], ["a", "b"], float_format="{:.2f}"
    )
    assert md.splitlines() == ["| a | b |", "|---|---|", "| 1 | 0.50 |", "| x | 2.00 |"]
    assert tables.markdown_table(
        [[1.0]], ["a"], float_format=lambda x: f"<{x:g}>"
    ).endswith("| <1> |")


def test_untrusted_cells_cannot_forge_rows_or_markup():
    """Untrusted text is a code span (shown as written); ``|`` is escaped even there,
    since GFM splits a row first."""
    assert (
        tables.markdown_cell("a | b\n| 04.9 | correct |", untrusted=True)
        == "`a \\| b \\| 04.9 \\| correct \\|`"
    )
    assert (
        tables.markdown_cell("<img src=x> \\|", untrusted=True) == "`<img src=x> \\\\|`"
    )
    assert tables.markdown_cell("", untrusted=True) == ""
    # backticks: a longer fence, padded where they touch it
    assert tables.code_span("a `b` c") == "``a `b` c``"
    assert tables.code_span("`x``") == "``` `x`` ```"
    assert tables.code_span(" x ") == "`  x  `" and tables.code_span("  ") == "`  `"
    row = tables.markdown_row(["**x**", "**x**"], untrusted=[1])
    assert row == "| **x** | `**x**` |"
    with pytest.raises(ValueError, match="untrusted"):
        tables.markdown_row(["a"], untrusted=[1])
    with pytest.raises(TypeError, match="untrusted"):
        tables.markdown_row(["a"], untrusted="0")
    assert tables.markdown_table([{"a": "*x*", "b": "*y*"}], untrusted=["b"]).endswith(
        "| *x* | `*y*` |"
    )
    # trusted cells keep their LaTeX
    assert tables.markdown_cell("$\\beta$") == "$\\beta$"


def test_html_escapes_aligns_and_marks_code_columns():
    html = tables.html_table(
        [["<x>", 0.5, False]], ["a", "b", "c"], float_format="{:.1f}", code_columns=(0,)
    )
    assert html.startswith("<table") and "<code>&lt;x&gt;</code></td>" in html
    assert 'right">0.5</td>' in html and "<strong>no</strong>" in html
    assert "<code>" in tables.html_table([{"a": "x"}], code_columns=("a",))


def test_markdown_marks_code_columns():
    md = tables.markdown_table(
        [{"a": "x|y", "b": 0.5, "c": None}, {"a": "z", "b": 1.5, "c": "w"}],
        code_columns=("a", 2),
        float_format=".1f",
    )
    assert md.splitlines()[2:] == ["| `x\\|y` | 0.5 | — |", "| `z` | 1.5 | `w` |"]
    with pytest.raises(IndexError):
        tables.markdown_table([{"a": "x"}], code_columns=(3,))


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: tables.markdown_table([], ["a"]),
            ValueError,
            "rows must not be empty",
        ),
        (lambda: tables.markdown_table([[1, 2]], ["a"]), ValueError, "cells"),
        (lambda: tables.markdown_table([[1]]), ValueError, "columns"),
        (lambda: tables.markdown_table([{"a": 1}], []), ValueError, "columns"),
        (
            lambda: tables.markdown_table([{"a": 1.0}], formats="x"),
            TypeError,
            "formats",
        ),
        (
            lambda: tables.markdown_table([{"a": 1.0}], formats={"a": "q"}),
            ValueError,
            "column 'a'",
        ),
        (lambda: tables.html_table(None), TypeError, "rows"),
    ],
)
def test_bad_input_names_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_human_number():
    assert [
        tables.human_number(x) for x in (12_345, 2.0e10, 0, 250.4, 3.14159, 0.00123)
    ] == ["12,345", "20,000,000,000", "0", "250", "3.14", "1.23e-03"]
