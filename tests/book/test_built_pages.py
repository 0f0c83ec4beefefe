"""What readers are shown: the built site, both editions (English ``_build/html``,
Chinese ``_build/html/zh``), and the reader edition (``make notebooks``).

The sources can build with ``-W`` and still show a reader raw MyST, a stray return
value, markup printed as text or machinery. These tests read the artifacts themselves,
from the one book build of the test run (the ``built_book`` fixture); each check of the
built site runs on every page of both editions:

- no page's prose (its text outside code blocks) and no reader notebook's Markdown holds
  raw MyST: a role followed by a backtick, a ``{glue`` without its closing brace, a
  ``:::`` fence or a ```` ```{ ```` fence;
- no page shows HTML as text: outside its code blocks (cell outputs included), no tag
  such as ``<table>`` or ``<td style="...">`` is printed where a table should be drawn;
- no page shows a warning of the build (matplotlib's "Glyph ... missing from font") or a
  path of the building machine (``/work/``, ``/home/``, ``site-packages``);
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
#: edition -> its site and its executed notebooks, below the build folder
EDITIONS = {"en": Path("html"), "zh": Path("html") / "zh"}
EXECUTED = {
    "en": Path("jupyter_execute"),
    "zh": Path("zh") / "_build" / "jupyter_execute",
}
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


_TAGS = (
    "table|thead|tbody|tfoot|tr|td|th|caption|div|span|p|br|hr|img|a|b|i|em|strong"
    "|code|pre|ul|ol|li|h[1-6]|sub|sup|style|script|iframe|svg"
)
#: HTML as a reader would see it printed: a whole tag (its attributes written
#: ``name=value``, so that math such as ``\(0<p<1\)`` or ``$x<a \text{ and } y>0$`` is
#: no tag) or a ``style=`` attribute.
RAW_HTML = {
    "tag": re.compile(
        rf"</?(?:{_TAGS})(?:\s+[\w:-]+=(?:\"[^\"]*\"|'[^']*'|[^\s<>]+))*\s*/?>",
        re.IGNORECASE,
    ),
    "style attribute": re.compile(r"\bstyle=[\"']"),
}

#: The building machine, as a reader would see it: matplotlib's warning for a character
#: its font lacks, and the paths of the machine's files and installed packages.
BUILD_LEAKS = {
    "missing glyph warning": re.compile(r"Glyph \d+\b[^\n]*?missing from"),
    "machine path": re.compile(r"(?<![\w.~])/(?:work|home|root|Users|tmp)/"),
    "installed packages": re.compile(r"\b(?:site|dist)-packages\b"),
    "virtual environment's files": re.compile(r"\.venv[\w-]*/lib/"),
}


def _found(patterns: dict[str, re.Pattern], text: str) -> list[str]:
    found = []
    for kind, pattern in patterns.items():
        for m in pattern.finditer(text):
            found.append(f"{kind}: {text[max(0, m.start() - 40) : m.end() + 40]!r}")
    return found


def raw_myst(text: str) -> list[str]:
    """The raw MyST constructs in ``text``, each as ``kind: context``."""
    return _found(RAW_MYST, text)


def raw_html(text: str) -> list[str]:
    """The HTML markup written out in ``text``, each as ``kind: context``."""
    return _found(RAW_HTML, text)


def build_leaks(text: str) -> list[str]:
    """The build's warnings and the building machine's paths in ``text``, each as
    ``kind: context``."""
    return _found(BUILD_LEAKS, text)


def prose_text(article) -> str:
    """The page's text outside code blocks (inline code included): where MyST would have
    been rendered."""
    article = BeautifulSoup(str(article), "html.parser")
    for pre in article.select("pre"):
        pre.decompose()
    return article.get_text()


def shown_text(article) -> str:
    """The page's text outside its code blocks, cell outputs included (text outputs are
    ``<pre>`` blocks too): everything a reader reads as rendered rather than as code."""
    article = BeautifulSoup(str(article), "html.parser")
    for div in _code_block_divs(article):
        div.decompose()
    return article.get_text()


def _soup(stem: str, html: Path) -> BeautifulSoup:
    soup = BeautifulSoup(
        (html / "book" / f"{stem}.html").read_text(encoding="utf-8"), "html.parser"
    )
    article = soup.select_one("article.bd-article") or soup.body
    for tag in article.select("script, style"):
        tag.decompose()
    return article


def _page(built_book: Path, edition: str, stem: str):
    """The article of ``book/<stem>.html`` in ``edition``'s site."""
    html = built_book / EDITIONS[edition]
    assert (html / "book" / f"{stem}.html").is_file(), (
        f"the {edition} build has no page {stem}: {html / 'book'}"
    )
    return _soup(stem, html)


def _code_block_divs(article) -> list:
    """The blocks of code a reader sees: cell inputs, listings (``show_source``) and
    code blocks in the prose; not outputs."""
    divs = []
    for div in article.select("div[class*='highlight-']"):
        classes = " ".join(div.get("class", []))
        if "output" in classes or "highlight-myst-ansi" in classes:
            continue
        divs.append(div)
    return divs


def visible_code_blocks(article) -> list[str]:
    """The code a reader sees (:func:`_code_block_divs`), block by block."""
    return [
        pre.get_text()
        for div in _code_block_divs(article)
        if (pre := div.find("pre")) is not None
    ]


def _last_statement_publishes(source: str) -> bool:
    try:
        body = ast.parse(
            re.sub(r"^([ \t]*)[%!].*$", r"\1pass", source, flags=re.MULTILINE)
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


@pytest.mark.parametrize(
    "text",
    [
        '<table style="border-collapse:collapse;margin:0.5em 0">',
        "<thead><tr><th>item</th></tr></thead>",
        '<td style="padding:0.25em 0.75em;text-align:right">1.2e+09</td>',
        "</td>",
        '<div class="x">',
        "<br/>",
        "<TR>",
        "style='color:red'",
    ],
)
def test_raw_html_is_found(text):
    assert raw_html(text)


@pytest.mark.parametrize(
    "text",
    [
        r"\(0<p<1\)",
        r"$x<a \text{ and } y>0$",
        "a < b and c > d",
        "<2 s per step",
        "ratio <= 0.2",
        "<Figure size 640x480 with 1 Axes>",
        "dict[str, list[int]] -> None",
        "the table's style",
    ],
)
def test_plain_text_is_not_raw_html(text):
    assert raw_html(text) == []


def test_outputs_are_read_and_code_is_not():
    """A printed table (a text output) is shown text; a cell input or a code block in
    the prose that builds one is code."""
    page = BeautifulSoup(
        '<article><div class="cell_input"><div class="highlight-ipython3"><div '
        'class="highlight"><pre>s = "&lt;table&gt;"</pre></div></div></div><div '
        'class="highlight-html"><pre>&lt;td&gt;1&lt;/td&gt;</pre></div><div '
        'class="cell_output"><div class="output stream highlight-myst-ansi"><div '
        'class="highlight"><pre>&lt;tr&gt;&lt;th&gt;item&lt;/th&gt;</pre></div></div>'
        "</div><p>prose</p></article>",
        "html.parser",
    )
    text = shown_text(page)
    assert "prose" in text and "<table>" not in text and "<td>" not in text
    assert [f.split(":")[0] for f in raw_html(text)] == ["tag", "tag", "tag"]
    assert visible_code_blocks(page) == ['s = "<table>"', "<td>1</td>"]


@pytest.mark.parametrize(
    "text",
    [
        "/work/main/.venv/lib/python3.11/site-packages/IPython/core/pylabtools.py:158",
        "Glyph 36873 (\\N{CJK UNIFIED IDEOGRAPH-9009}) missing from font(s) DejaVu",
        "Glyph 20013 missing from current font.",
        'File "/home/reader/x.py", line 3',
        "/root/.cache/x",
        "/tmp/pytest-of-root/pytest-3/x.ipynb",
        "/usr/lib/python3/dist-packages/numpy/core.py",
        "env/.venv/lib/python3.11/x.py",
    ],
)
def test_build_leaks_are_found(text):
    assert build_leaks(text)


@pytest.mark.parametrize(
    "text",
    [
        ".venv/bin/python -m pytest tests/book/test_built_pages.py",
        "creates the virtual environment .venv/ on first use",
        "DPO_GRPO_TRL_PYTHON=.venv-trl/bin/python",
        "the build writes _build/html/zh/book/01_why.html",
        "https://example.org/work/home/",
        "a glyph is missing from the figure",
        "work/ and home/",
    ],
)
def test_plain_text_is_not_a_build_leak(text):
    assert build_leaks(text) == []


def test_a_cell_ending_in_a_publishing_call_is_detected():
    assert _last_statement_publishes('x = 1\nglue("k", x)')
    assert not _last_statement_publishes('glue("k", 1)\nx')


# --------------------------------------------------------------------------------------
# The built site, both editions
# --------------------------------------------------------------------------------------

on_every_page = pytest.mark.parametrize(
    ("edition", "stem"), [(e, s) for e in EDITIONS for s in PAGES]
)


@on_every_page
def test_page_text_has_no_raw_myst(built_book, edition, stem):
    article = _page(built_book, edition, stem)
    assert raw_myst(prose_text(article)) == [], f"{edition}: {stem}"


@on_every_page
def test_page_shows_no_html_as_text(built_book, edition, stem):
    found = raw_html(shown_text(_page(built_book, edition, stem)))
    assert found == [], (
        f"{edition}: {stem}: {len(found)} pieces of HTML shown as text (print a table "
        f"with display(HTML(...)), not print), e.g. {found[:3]}"
    )


@on_every_page
def test_page_shows_no_build_warning_and_no_machine_path(built_book, edition, stem):
    found = build_leaks(_page(built_book, edition, stem).get_text())
    assert found == [], (
        f"{edition}: {stem}: {len(found)} warnings of the build or paths of its "
        f"machine on the page, e.g. {found[:3]}"
    )


@on_every_page
def test_page_shows_no_stderr_and_no_machinery(built_book, edition, stem):
    article = _page(built_book, edition, stem)
    stderr = [d.get_text()[:300] for d in article.select(".stderr")]
    assert stderr == [], f"{edition}: {stem}: stderr on the page: {stderr[:3]}"
    code = visible_code_blocks(article)
    publishing = [
        line
        for block in code
        for line in block.splitlines()
        if re.search(r"\bglue\(", line)
    ]
    assert publishing == [], (
        f"{edition}: {stem}: publishing code shown: {publishing[:5]}"
    )
    assert not any("REPO_URL =" in block for block in code), (
        f"{edition}: {stem}: the set-up cell is shown"
    )


@on_every_page
def test_visible_code_fits_the_page(built_book, edition, stem):
    wide = [
        line
        for block in visible_code_blocks(_page(built_book, edition, stem))
        for line in block.splitlines()
        if len(line) > CODE_WIDTH
    ]
    assert wide == [], (
        f"{edition}: {stem}: {len(wide)} code lines over {CODE_WIDTH} characters, "
        f"e.g. {wide[:3]}"
    )


@pytest.mark.parametrize(
    ("edition", "stem"), [(e, s) for e in EDITIONS for s in NOTEBOOKS]
)
def test_no_visible_cell_shows_a_published_value(built_book, edition, stem):
    nb = nbformat.read(
        built_book / EXECUTED[edition] / "book" / f"{stem}.ipynb", as_version=4
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
        f"{edition}: {stem}: a visible cell shows the value of a publishing call: "
        f"{stray}"
    )


#: What the toggle of a solution cell says, collapsed and expanded, per edition (the
#: cells' ``mystnb`` metadata: scripts/sync_colab_cells.py, scripts/zh_edition.py).
SOLUTION_TOGGLE = {
    "en": ("Show the solution", "Hide the solution"),
    "zh": ("显示解答", "隐藏解答"),
}


@pytest.mark.parametrize(
    ("edition", "stem"), [(e, s) for e in EDITIONS for s in NOTEBOOKS]
)
def test_a_solution_toggle_says_it_is_a_solution(built_book, edition, stem):
    book = nbformat.read(ROOT / "book" / f"{stem}.ipynb", as_version=4)
    n = sum("solution" in c.metadata.get("tags", []) for c in book.cells)
    toggles = [
        tuple(
            summary.select_one(f".{state}").get_text(strip=True)
            for state in ("collapsed", "expanded")
        )
        for cell in _page(built_book, edition, stem).select("div.cell.tag_solution")
        if (summary := cell.select_one("details > summary")) is not None
    ]
    assert toggles == [SOLUTION_TOGGLE[edition]] * n, f"{edition}: {stem}"


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
