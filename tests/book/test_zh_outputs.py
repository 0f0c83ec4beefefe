"""Issue #45: what the package draws or prints on a Chinese page is Chinese.

The two editions run the same code cells. Each executed Chinese notebook
(``_executed/zh/book/``) is read beside its English one (``_executed/en/book/``), cell
by cell, and a test fails on

- a figure (PNG or plotly) identical to the English one: its title, axes and legend are
  still English;
- a line of output the English cell printed too, with an English word that is neither
  in the cell's own source (a code cell's string literals stay English,
  i18n/README.md) nor code: names (``loss_type``, ``clip_ratio/low_mean``,
  ``Qwen2ForCausalLM``), quoted or back-quoted values and HTML ``<code>``,
  ``True``/``False``/``None``, a command line, a printed program or config, an
  exception's own message (``ValueError: ...``, the API's words, as TRL's are), a source
  listing;
- a glued value with such a word: it would be pasted into a Chinese sentence.

The words the glossary keeps in English (``token``, ``prompt``, ...) are Chinese text.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup
import zh_glossary  # scripts/

ROOT = Path(__file__).resolve().parents[2]
EXECUTED = ROOT / "_executed"
WORD = re.compile(r"[A-Za-z][a-z]{2,}")
HAN = re.compile(r"[\u4e00-\u9fff]")
#: what is code, not English text (removed from a line before its words are read)
CODE = re.compile(
    r"`[^`]*`|'[^'\n]*'|\"[^\"\n]*\"|https?://\S+"
    r"|\S*[_/\\.=<>|@$][^\s,;:()\[\]{}]*"  # names, paths, metrics, key=value, tokens
    r"|\b[A-Za-z]*[a-z][A-Z]\w*"  # CamelCase and mixed-case names
    r"|\b(?:True|False|None|nan|inf|tensor|dtype|grad_fn)\b"
)
#: a line that is code, not prose: a command, a line of a printed program or config
#: (a comment, an import, an assignment, a YAML ``key: value``), an exception's own
#: message (``ValueError: ...``; the package's and TRL's "x must be y, got z")
CODE_LINE = re.compile(
    r"^\s*(?:\$ |python3? |\.venv/|accelerate |torchrun |pip |make |git "
    r"|# |\"\"\"|from \w|import \w)"
    r"|^\s*[\w.\[\]'\"]+\s*=[^=]|^\s*[\w.-]+:\s*\S+\s*$|[(,\\]\s*$"
    r"|\b\w*(?:Error|Exception|Warning)\b:|\bmust (?:be|have|contain)\b.*\bgot\b"
)
FIGURES = ("image/png", "application/vnd.plotly.v1+json")
SHOWN = ("image/png", "application/vnd.plotly.v1+json", "text/markdown", "text/html")


@dataclass(frozen=True)
class Finding:
    page: str
    cell: int
    kind: str
    text: str

    def __str__(self) -> str:
        return f"{self.page} cell {self.cell} ({self.kind}): {self.text[:200]}"


def kept_words() -> set[str]:
    glossary = zh_glossary.load()
    return {
        word.lower()
        for term in glossary.terms
        if term.case_sensitive
        for form in term.en
        for word in WORD.findall(form)
    }


def english_words(line: str, allowed: set[str]) -> list[str]:
    """The English words of an output line that are not code and not ``allowed`` (the
    cell's own source words, the glossary's kept words)."""
    if CODE_LINE.search(line):
        return []
    text = CODE.sub(" ", line)
    return [w for w in WORD.findall(text) if w.lower() not in allowed]


def _outputs(cell) -> list[tuple[str, str, bool]]:
    """(mimetype, text, glued) of each output of ``cell``: a figure's data, else its
    richest text."""
    found = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            found.append(("stream", out.text, False))
            continue
        glue = out.get("metadata", {}).get("scrapbook")
        glued = glue is not None
        prefix = (glue or {}).get("mime_prefix", "")
        # a glued value's mimetypes carry glue's prefix
        # ("application/papermill.record/text/plain")
        data = {k.removeprefix(prefix): v for k, v in out.get("data", {}).items()}
        for kind in (*FIGURES, "text/html", "text/markdown", "text/plain"):
            if kind in data:
                value = data[kind]
                text = value if isinstance(value, str) else json.dumps(value)
                if glued and kind == "text/plain" and re.fullmatch(r"'.*'", text):
                    text = text[1:-1]  # glue:text pastes a string without its quotes
                found.append((kind, text, glued))
                break
    return found


def _lines(kind: str, text: str) -> list[str]:
    if kind == "text/html":
        text = re.sub(r"<code>.*?</code>", " ", text, flags=re.DOTALL)  # code
        text = html.unescape(re.sub(r"<[^>]+>", "\n", text))
    return [line.strip() for line in text.splitlines() if line.strip()]


def untranslated(page: str, english, chinese, kept: set[str]) -> list[Finding]:
    """What the Chinese notebook ``chinese`` shows in English, cell by cell against the
    English notebook ``english`` (the same code cells)."""
    en_cells, zh_cells = (
        [
            c
            for c in nb.cells
            if c.cell_type == "code" and "colab-setup" not in c.metadata.get("tags", [])
        ]
        for nb in (english, chinese)
    )
    if [c.source for c in en_cells] != [c.source for c in zh_cells]:
        raise ValueError(f"{page}: the two editions' code cells differ")
    found = []
    for k, (en_cell, zh_cell) in enumerate(zip(en_cells, zh_cells)):
        removed = "remove-cell" in zh_cell.metadata.get("tags", [])
        allowed = kept | {w.lower() for w in WORD.findall(zh_cell.source)}
        for (kind, en_text, _), (zh_kind, zh_text, glued) in zip(
            _outputs(en_cell), _outputs(zh_cell)
        ):
            if kind != zh_kind or (removed and not glued and kind not in FIGURES):
                continue  # a hidden cell's output is seen only where it is glued
            if kind in FIGURES:
                if en_text == zh_text:
                    found.append(Finding(page, k, "figure", "identical to English"))
                continue
            if kind == "text/markdown" and zh_text.startswith("`dpo_grpo."):
                continue  # show_source: a listing is code
            en_lines = set(_lines(kind, en_text))
            for line in _lines(zh_kind, zh_text):
                # a glued value is pasted into a Chinese sentence: the cell's own
                # English words are English there too
                words = (
                    english_words(line, kept if glued else allowed)
                    if line in en_lines
                    else []
                )
                if words:
                    what = "glued" if glued else kind
                    found.append(Finding(page, k, what, f"{words}: {line}"))
    return found


# --------------------------------------------------------------------------------------
# The check itself
# --------------------------------------------------------------------------------------


def _nb(cells) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    return nb


def _code(source, *outputs, tags=()):
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = list(outputs)
    cell.metadata["tags"] = list(tags)
    return cell


def _stream(text):
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def _display(kind, value, glued=False):
    prefix = "application/papermill.record/"
    if not glued:
        return nbformat.v4.new_output("display_data", data={kind: value})
    meta = {"scrapbook": {"name": "k", "mime_prefix": prefix}}
    return nbformat.v4.new_output(
        "display_data", data={prefix + kind: value}, metadata=meta
    )


def _check(en_outputs, zh_outputs, source="show()", tags=()):
    en = _nb([_code(source, *en_outputs, tags=tags)])
    zh = _nb([_code(source, *zh_outputs, tags=tags)])
    return untranslated("p", en, zh, kept_words())


def test_an_identical_figure_is_untranslated():
    png = _display("image/png", "iVBORw0KGgo=")
    assert _check([png], [png])
    assert not _check([png], [_display("image/png", "iVBORw0KGgp=")])
    fig = _display("application/vnd.plotly.v1+json", {"layout": {"title": "rewards"}})
    assert _check([fig], [fig], tags=["remove-cell"])  # a glued figure


def test_a_package_table_printed_in_english_is_untranslated():
    table = _stream("policy (trainable)   112.0 GB\ncritic (trainable)   112.0 GB\n")
    found = _check([table], [table], source="print(dg.chapters.ledger())")
    assert [f.text.split(":")[0] for f in found] == [
        "['policy', 'trainable']",
        "['critic', 'trainable']",
    ]
    zh = _stream("策略（训练）   112.0 GB\n价值网络（训练）   112.0 GB\n")
    assert not _check([table], [zh], source="print(dg.chapters.ledger())")


def test_a_cells_own_words_and_code_are_not_untranslated():
    cases = [
        ('print(f"every row mean is 0: {ok}")', "every row mean is 0: True"),
        ("print(metrics)", "{'loss': 0.1353, 'clip_ratio/low_mean': 0.0}"),
        ("print(x)", "['platform' 'wrong_direction']"),
        ("print(cmd)", ".venv/bin/python bench/bench_logprobs.py --threads 1"),
        ("print(cmd)", "python3 -m verl.trainer.main_ppo \\"),
        ("print(e)", "ValueError: mask has rows with no valid token (rows [2])"),
        ("print(m)", "Qwen2ForCausalLM: 21,920 parameters"),  # "parameters" is in...
    ]
    for source, line in cases[:-1]:
        out = _stream(line + "\n")
        assert not _check([out], [out], source=source), line
    # ... no source here: a package's sentence
    source, line = cases[-1]
    out = _stream(line + "\n")
    assert _check([out], [out], source=source)
    # a token kept in English by the glossary
    out = _stream("64 prompt x 8 token\n")
    assert not _check([out], [out])


def test_a_glued_english_word_is_untranslated_and_a_hidden_output_is_not():
    glued = _display("text/plain", "'all'", glued=True)  # pasted without quotes
    hidden = _stream("every check passed\n")
    assert _check([glued], [glued], tags=["remove-cell"])
    word = _display("text/plain", "cpu with 2 CPUs", glued=True)
    assert _check([word], [word], tags=["remove-cell"])
    # the cell's own literal, glued: English in a Chinese sentence all the same
    source = 'glue("ok", "all" if ok else "NOT all")'
    assert _check([glued], [glued], source=source, tags=["remove-cell"])
    assert not _check([hidden], [hidden], tags=["remove-cell"])
    markdown = _display("text/markdown", '`loss_type="dapo"`', glued=True)
    assert not _check([markdown], [markdown], tags=["remove-cell"])


def italic_chinese(page_html: str) -> list[str]:
    """The Chinese text a page sets in italics (``<em>``, ``<i>``): a fake slant, since
    Chinese fonts have no italic; emphasis in Chinese is bold."""
    soup = BeautifulSoup(page_html, "html.parser")
    return [
        em.get_text() for em in soup.find_all(["em", "i"]) if HAN.search(em.get_text())
    ]


def test_italic_chinese_is_found_and_bold_or_english_italics_are_not():
    assert italic_chinese("<p>这是<em>重点</em>。</p>") == ["重点"]
    assert italic_chinese("<p>这是<strong>重点</strong>，<em>padded</em>。</p>") == []


# --------------------------------------------------------------------------------------
# Every Chinese page of the build
# --------------------------------------------------------------------------------------


def test_no_chinese_page_sets_chinese_in_italics(built_book):
    pages = sorted((built_book / "html" / "zh").rglob("*.html"))
    found = {
        str(p.relative_to(built_book)): words
        for p in pages
        if "_static" not in p.parts
        and (words := italic_chinese(p.read_text(encoding="utf-8")))
    }
    assert pages and not found


def _pages() -> list[str]:
    return sorted(p.stem for p in (ROOT / "book").glob("*.ipynb"))


@pytest.mark.parametrize("stem", _pages())
def test_chinese_page_shows_no_untranslated_package_output(built_book, stem):
    english = nbformat.read(EXECUTED / "en" / "book" / f"{stem}.ipynb", as_version=4)
    chinese = nbformat.read(EXECUTED / "zh" / "book" / f"{stem}.ipynb", as_version=4)
    found = untranslated(stem, english, chinese, kept_words())
    assert not found, "\n".join(map(str, found))
