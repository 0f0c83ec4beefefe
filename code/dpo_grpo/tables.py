"""The one table renderer of the package: Markdown and HTML tables from rows (no pandas
needed).

Rows are dicts (``columns`` defaults to the first row's keys) or sequences (``columns``
then names the header). Cells: ``None`` -> "—", a bool -> "yes"/"no" in the reader's
language (:func:`dpo_grpo.i18n.tr`; a False stands out, so a failed check is seen), a
float with a format spec in ``formats[column]`` (or ``float_format``) -> that format,
anything else -> ``str``. Headers are the caller's English, shown in the reader's
language (:func:`header_text`): a notebook's header literals come out in Chinese under
``DPO_GRPO_LANG=zh`` with no change to its code. A text cell that is a catalog entry (a
fixed row label) is shown translated too; other cells are data and stay as given. Base
layer: imports only the argument checks and the language layer, so every layer may use
it.
"""

from __future__ import annotations

import html
import numbers
import re

import numpy as np

from . import _validation as v
from .i18n import catalog, language, tr

#: header words kept in English in Chinese tables: TRL's option names and the terms the
#: Chinese edition keeps (i18n/zh/glossary.yml ``kept`` and ``untranslated``)
KEPT_HEADERS = frozenset(
    {"beta", "epsilon", "token", "prompt", "rollout", "actor", "dtype", "check"}
    | {"trl", "numpy"}  # the implementations the benchmark tables compare
)
_CODE_NAME = re.compile(r"\S*[_/.()\[\]=|]\S*")
_WORD = re.compile(r"[a-z]{3,}")
_HAN = re.compile(r"[\u4e00-\u9fff]")


def translatable_header(text) -> bool:
    """Whether :func:`header_text` translates ``text``: English words (a lowercase word
    of three letters or more), not a code name (one token holding ``_ / . ( ) [ ] = |``:
    ``loss_type``, ``P(a0)``), not a kept term (:data:`KEPT_HEADERS`), not already
    Chinese. Symbols (``d``, ``G``, ``k3``) and acronyms (``PPO``) stay."""
    return (
        isinstance(text, str)
        and bool(_WORD.search(text))
        and not _CODE_NAME.fullmatch(text)
        and text not in KEPT_HEADERS
        and not _HAN.search(text)
    )


def header_text(text) -> str:
    """A header cell in the reader's language: :func:`dpo_grpo.i18n.tr` of ``text`` when
    it is :func:`translatable_header`, else ``str(text)`` unchanged."""
    return tr(text) if translatable_header(text) else str(text)


def label_text(text: str) -> str:
    """A text cell in the reader's language when the catalog has it (a fixed row label
    such as "centred"), else unchanged: cells are data (names, code, numbers), so a cell
    without an entry is no miss."""
    lang = language()
    return tr(text) if lang != "en" and text in catalog(lang) else text


def code_span(text) -> str:
    """``text`` as a Markdown code span, which a preview shows literally (no link,
    image, emphasis or HTML; backslashes and entities as written): line breaks joined
    by spaces, fenced by a run of backticks longer than any inside, padded with a space
    where CommonMark strips one (a backtick at either end, or a space at both). Returns
    ``""`` for empty text."""
    text = " ".join(str(text).splitlines())
    if not text:
        return ""
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = bool(text.strip(" ")) and (
        "`" in (text[0], text[-1]) or text[0] == text[-1] == " "
    )
    return f"{fence} {text} {fence}" if pad else f"{fence}{text}{fence}"


def markdown_cell(value, *, untrusted: bool = False) -> str:
    """One Markdown table cell: line breaks joined and ``|`` escaped as ``\\|`` (GFM
    splits a row before it reads code spans, so even there). ``untrusted`` text (file
    names, notes from a student's notebook) is set as a :func:`code_span`, so it cannot
    forge markup; its control characters are the caller's to escape."""
    text = str(value)
    text = code_span(text) if untrusted else " ".join(text.splitlines())
    return text.replace("|", "\\|")


def markdown_row(cells, *, untrusted=False) -> str:
    """``| a | b |`` for already formatted cells; ``untrusted`` is True (every cell) or
    the indices of the cells that hold untrusted text (:func:`markdown_cell`)."""
    cells = v.sequence(cells, "cells")
    shown = _untrusted_indices(untrusted, len(cells))
    return (
        "| "
        + " | ".join(
            markdown_cell(c, untrusted=i in shown) for i, c in enumerate(cells)
        )
        + " |"
    )


def _untrusted_indices(untrusted, n: int) -> set:
    if isinstance(untrusted, bool):
        return set(range(n)) if untrusted else set()
    indices = v.sequence(untrusted, "untrusted")
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in indices):
        raise TypeError(
            f"untrusted must be a bool or cell indices (ints), got {untrusted!r}"
        )
    if not all(-n <= i < n for i in indices):
        raise ValueError(f"untrusted must index the {n} cells, got {untrusted!r}")
    return {i % n for i in indices}


def markdown_table(
    rows,
    columns=None,
    formats=None,
    headers=None,
    *,
    float_format=None,
    untrusted=False,
    code_columns=(),
) -> str:
    """A Markdown table (for ``IPython.display.Markdown``); see the module docstring for
    rows and cells. ``untrusted``: True (every column) or the columns (names or
    indices) whose cells hold untrusted text, set as code spans (:func:`markdown_cell`);
    the header is the caller's. ``code_columns`` (names or indices): columns whose text
    cells are code (option values, dtype and variant names), set as code spans and
    never translated."""
    columns = _columns(rows, columns)
    code = {
        columns[c] if isinstance(c, int) else c
        for c in v.sequence(code_columns, "code_columns")
    }
    columns, values, body = _cells(rows, columns, formats, float_format, code)
    body = [
        [
            code_span(text) if c in code and isinstance(value, str) else text
            for c, value, text in zip(columns, row_values, texts)
        ]
        for row_values, texts in zip(values, body)
    ]
    if not isinstance(untrusted, bool):
        untrusted = [
            columns.index(c) if c in columns else c
            for c in v.sequence(untrusted, "untrusted")
        ]
    head = [header_text((headers or {}).get(c, c)) for c in columns]
    lines = [markdown_row(head), "|" + "---|" * len(columns)]
    lines += [markdown_row(r, untrusted=untrusted) for r in body]
    return "\n".join(lines)


def html_table(
    rows,
    columns=None,
    formats=None,
    headers=None,
    *,
    float_format=None,
    code_columns=(),
) -> str:
    """The same table as HTML (for ``IPython.display.HTML``): renders in Jupyter, Colab
    and the built book alike. Cells are escaped; numbers are right-aligned;
    ``code_columns`` (names or indices) are set in ``<code>``."""
    columns = _columns(rows, columns)
    code_columns = {
        columns[c] if isinstance(c, int) else c
        for c in v.sequence(code_columns, "code_columns")
    }
    columns, values, body = _cells(rows, columns, formats, float_format, code_columns)
    pad = "padding:0.25em 0.75em;"
    out = [
        '<table style="border-collapse:collapse;margin:0.5em 0">',
        "<thead><tr>"
        + "".join(
            f'<th style="{pad}text-align:left;border-bottom:1px solid #999">'
            f"{html.escape(header_text((headers or {}).get(c, c)))}</th>"
            for c in columns
        )
        + "</tr></thead>",
        "<tbody>",
    ]
    for row_values, texts in zip(values, body):
        tds = []
        for c, value, text in zip(columns, row_values, texts):
            numeric = isinstance(value, numbers.Number) and not isinstance(
                value, (bool, np.bool_)
            )
            shown = html.escape(text)
            if text == _no():
                shown = f"<strong>{html.escape(tr('no'))}</strong>"
            shown = f"<code>{shown}</code>" if c in code_columns else shown
            tds.append(
                "<td "
                f'style="{pad}text-align:{"right" if numeric else "left"}">{shown}</td>'
            )
        out.append("<tr>" + "".join(tds) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def human_number(x) -> str:
    """A number for a budget table: thousands separators for large values, 2 decimals,
    or 2 significant digits in e-notation below 0.01."""
    if isinstance(x, (int, np.integer)) or (
        isinstance(x, float) and x.is_integer() and abs(x) >= 1000
    ):
        return f"{int(x):,}"
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 0.01:
        return f"{x:.2f}"
    return f"{x:.2e}"


# --- helpers --------------------------------------------------------------------------


def _rows(rows) -> list:
    rows = v.sequence(rows, "rows")
    if not rows:
        raise ValueError("rows must not be empty")
    return rows


def _values(rows, columns) -> list:
    out = []
    for row in rows:
        if isinstance(row, dict):
            out.append([row.get(c) for c in columns])
        else:
            row = v.sequence(row, "rows[i]")
            if len(row) != len(columns):
                raise ValueError(
                    f"every row needs {len(columns)} cells, got {len(row)}"
                )
            out.append(row)
    return out


def _columns(rows, columns) -> list:
    rows = _rows(rows)
    if columns is None:
        if not isinstance(rows[0], dict):
            raise ValueError("columns must name the header when rows are sequences")
        columns = list(rows[0])
    columns = v.sequence(columns, "columns")
    if not columns:
        raise ValueError("columns must name at least one column")
    return columns


def _cells(rows, columns, formats, float_format, code_columns=()):
    """``(columns, raw values per row, formatted cells per row)``; text cells outside
    ``code_columns`` pass through :func:`label_text`."""
    columns = _columns(rows, columns)
    rows = _rows(rows)
    formats = {} if formats is None else formats
    if not isinstance(formats, dict):
        raise TypeError(
            f"formats must be a dict {{column: format}} or None, got "
            f"{type(formats).__name__}"
        )
    values = _values(rows, columns)
    body = [
        [
            value
            if c in code_columns and isinstance(value, str)
            else _cell(value, formats.get(c, float_format), c)
            for c, value in zip(columns, row)
        ]
        for row in values
    ]
    return columns, values, body


def _no() -> str:
    """A False cell: "no" in bold Markdown."""
    return f"**{tr('no')}**"


def _cell(value, spec, column) -> str:
    if isinstance(value, (bool, np.bool_)):
        return tr("yes") if value else _no()
    if value is None:
        return "—"
    if spec is not None and isinstance(value, (float, np.floating)):
        try:
            if callable(spec):
                return str(spec(value))
            return spec.format(value) if "{" in spec else format(value, spec)
        except (ValueError, TypeError, IndexError, KeyError) as exc:
            raise ValueError(
                f"the format of column {column!r} cannot format {value!r}: {exc}"
            ) from None
    return label_text(value) if isinstance(value, str) else str(value)
