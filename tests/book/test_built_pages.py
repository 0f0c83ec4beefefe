"""What readers are shown: the built site (``_build/html``) and the reader edition
(``make notebooks``).

The sources can build with ``-W`` and still show a reader raw MyST, a stray return value
or machinery. These tests read the artifacts themselves, from the one book build of the
test run (the ``built_book`` fixture):

- no page's prose (its text outside code blocks) and no reader notebook's Markdown holds
  raw MyST: a role followed by a backtick, a ``{glue`` without its closing brace, a
  ``:::`` fence or a ```` ```{ ```` fence;
- no visible code cell publishes (``glue(``), and none shows an ``execute_result`` a
  publishing call produced;
- no page shows stderr output or the set-up cell, and no visible code line is wider than
  88 characters;
- the reader edition keeps the set-up cell as its first code cell and drops the
  publishing cells.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup


ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(p.stem for p in (ROOT / "book").glob("*.ipynb")) + sorted(
    p.stem for p in (ROOT / "book").glob("*.md")
)
NOTEBOOKS = sorted(p.stem for p in (ROOT / "book").glob("*.ipynb"))
PUBLISHERS = {"glue"}
CODE_WIDTH = 88

#: Raw MyST as a reader would see it printed: each pattern with what it catches.
RAW_MYST = {
    "role": re.compile(r"\{[a-zA-Z][\w:\-]*\}`"),
    "role name": re.compile(
        r"(?<![\w^\\])\{(?:glue(?::\w+)?|cite(?::\w+)?|numref|ref|doc|eq|term|download)\}"
    ),
    "unclosed glue role": re.compile(r"\{glue(?![\w:\-]*\})"),
    "colon fence": re.compile(r":::"),
    "backtick directive": re.compile(r"```\{"),
}


def raw_myst(text: str) -> list[str]:
    """The raw MyST constructs in ``text``, each as ``kind: context``."""
    found = []
    for kind, pattern in RAW_MYST.items():
        for m in pattern.finditer(text):
            found.append(f"{kind}: {text[max(0, m.start() - 40) : m.end() + 40]!r}")
    return found


def prose_text(article) -> str:
    """The page's text outside code blocks (inline code included): where MyST would have
    been rendered."""
    article = BeautifulSoup(str(article), "html.parser")
    for pre in article.select("pre"):
        pre.decompose()
    return article.get_text()


def _soup(stem: str, html: Path) -> BeautifulSoup:
    soup = BeautifulSoup(
        (html / "book" / f"{stem}.html").read_text(encoding="utf-8"), "html.parser"
    )
    article = soup.select_one("article.bd-article") or soup.body
    for tag in article.select("script, style"):
        tag.decompose()
    return article


def visible_code_blocks(article) -> list[str]:
    """The code a reader sees: cell inputs, listings (``show_source``) and code blocks
    in the prose; not outputs."""
    blocks = []
    for div in article.select("div[class*='highlight-']"):
        classes = " ".join(div.get("class", []))
        if "output" in classes or "highlight-myst-ansi" in classes:
            continue
        pre = div.find("pre")
        if pre is not None:
            blocks.append(pre.get_text())
    return blocks


def _last_statement_publishes(source: str) -> bool:
    try:
        body = ast.parse(
            re.sub(r"^([ \t]*)[%!].*$", r"\1pass", source, flags=re.M)
        ).body
    except SyntaxError:
        return False
    last = body[-1] if body else None
    return (
        isinstance(last, ast.Expr)
        and isinstance(last.value, ast.Call)
        and isinstance(last.value.func, ast.Name)
        and last.value.func.id in PUBLISHERS
    )


def _hidden_on_site(cell) -> bool:
    return bool({"remove-cell", "remove-output"} & set(cell.metadata.get("tags", [])))


# --------------------------------------------------------------------------------------
# The checks themselves, tested on known defects (so that none of them can pass
# vacuously)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "numbers {glue:text`ch04_n_pairs`: one",
        "a {glue:text}`x:.2f` b",
        'loss_type="{glue:text}`ch05_x`"',
        ":::{exercise}",
        "```{note}",
        "{cite}`k`",
        'loss_type="{glue:text}ch05_x"',
    ],
)
def test_raw_myst_is_found(text):
    assert raw_myst(text)


@pytest.mark.parametrize(
    "text",
    [
        "f(x) = {a: 1}",
        "a[::2]",
        "`code`",
        "{x}",
        "set() or {}`",
        r"\pi_{ref}",
        r"\mathrm{ref}",
    ],
)
def test_plain_text_is_not_raw_myst(text):
    assert raw_myst(text) == []


def test_a_cell_ending_in_a_publishing_call_is_detected():
    assert _last_statement_publishes('x = 1\nglue("k", x)')
    assert not _last_statement_publishes('glue("k", 1)\nx')


# --------------------------------------------------------------------------------------
# The built site
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("stem", PAGES)
def test_page_text_has_no_raw_myst(built_book, stem):
    article = _soup(stem, built_book / "html")
    assert raw_myst(prose_text(article)) == [], stem


@pytest.mark.parametrize("stem", PAGES)
def test_page_shows_no_stderr_and_no_machinery(built_book, stem):
    article = _soup(stem, built_book / "html")
    stderr = [d.get_text()[:300] for d in article.select(".stderr")]
    assert stderr == [], f"{stem}: stderr on the page: {stderr}"
    code = visible_code_blocks(article)
    publishing = [
        line
        for block in code
        for line in block.splitlines()
        if re.search(r"\bglue\(", line)
    ]
    assert publishing == [], f"{stem}: publishing code shown: {publishing[:5]}"
    assert not any("REPO_URL =" in block for block in code), (
        f"{stem}: the set-up cell is shown"
    )


@pytest.mark.parametrize("stem", PAGES)
def test_visible_code_fits_the_page(built_book, stem):
    article = _soup(stem, built_book / "html")
    wide = [
        line
        for block in visible_code_blocks(article)
        for line in block.splitlines()
        if len(line) > CODE_WIDTH
    ]
    assert wide == [], (
        f"{stem}: {len(wide)} code lines over {CODE_WIDTH} characters, e.g. {wide[:3]}"
    )


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_no_visible_cell_shows_a_published_value(built_book, stem):
    nb = nbformat.read(
        built_book / "jupyter_execute" / "book" / f"{stem}.ipynb", as_version=4
    )
    stray = [
        cell.source[-200:]
        for cell in nb.cells
        if cell.cell_type == "code"
        and not _hidden_on_site(cell)
        and any(o.output_type == "execute_result" for o in cell.outputs)
        and _last_statement_publishes(cell.source)
    ]
    assert stray == [], (
        f"{stem}: a visible cell shows the value of a publishing call: {stray}"
    )


# --------------------------------------------------------------------------------------
# The reader edition
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_reader_edition_has_no_raw_myst_and_no_publishing(reader_notebooks, stem):
    nb = json.loads((reader_notebooks / f"{stem}.ipynb").read_text(encoding="utf-8"))
    markdown = "\n".join(
        "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"
    )
    assert raw_myst(markdown) == [], stem
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert "colab-setup" in code[0]["metadata"].get("tags", []), (
        f"{stem}: the set-up cell must come first"
    )
    publishing = [
        c["source"] for c in code if re.search(r"\bglue\(", "".join(c["source"]))
    ]
    assert publishing == [], f"{stem}: publishing cells left in the reader edition"
