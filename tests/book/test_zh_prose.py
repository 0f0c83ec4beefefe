"""The Chinese site reads in Chinese: no English sentence left in a page's prose.

A translated catalog can still leave English on a Chinese page: a glued value that is a
whole sentence built in a code cell, a package string shown in the prose, a block that
fell back to English. This test reads the built Chinese pages (the one build of the test
run, ``built_book``) and fails on any run of ``MIN_WORDS`` or more English words in the
prose. Not prose, and skipped: code (inline and blocks), math, cell outputs,
bibliographies, and paper titles (italic text, and any run inside a title of
``book/references.bib``: titles stay in their language, as the English pages cite them).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import zh_catalog  # noqa: E402

STEMS = [p.stem for p in zh_catalog.toc_pages()]
MIN_WORDS = 6
WORD = r"[A-Za-z][A-Za-z'’\-]*"
ENGLISH_RUN = re.compile(rf"(?:\b{WORD}\b[ ,;:]+){{{MIN_WORDS - 1},}}{WORD}")
NOT_PROSE = (
    "script, style, pre, code, .math, mjx-container, .bibliography, div.citation, "
    "dl.citation, nav, div.cell_output, em"
)


def _words(text: str) -> str:
    return " ".join(re.findall(WORD, text)).lower()


#: the cited papers' titles, as lower-case word sequences
TITLES = [
    _words(t)
    for t in re.findall(
        r"^\s*title\s*=\s*[{\"](.+?)[}\"],?\s*$",
        (ROOT / "book" / "references.bib").read_text(encoding="utf-8"),
        flags=re.M,
    )
]


def english_runs(html: str) -> list[str]:
    """The runs of ``MIN_WORDS``+ English words in the prose of a built page that are
    not part of a cited paper's title."""
    soup = BeautifulSoup(html, "html.parser")
    article = soup.select_one("article.bd-article") or soup.body
    for tag in article.select(NOT_PROSE):
        tag.decompose()
    runs = [m.group(0) for m in ENGLISH_RUN.finditer(article.get_text(" "))]
    return [r for r in runs if not any(_words(r) in t for t in TITLES)]


def test_english_runs_finds_a_sentence_and_skips_code_math_and_titles():
    page = (
        '<article class="bd-article"><p>这是中文，{}。</p>'
        "<p><code>loss is not the loss of the last micro batch</code></p>"
        '<p><span class="math">a b c d e f g</span></p>'
        "<p><em>Your Language Model is Secretly a Reward Model</em></p>"
        "<p>(c) Back to Basics: Revisiting REINFORCE Style Optimization（2024）</p>"
        "</article>"
    )
    assert english_runs(page.format("清楚")) == []
    found = english_runs(page.format("the held out start is the probe target"))
    assert found == ["the held out start is the probe target"]


@pytest.mark.parametrize("stem", STEMS)
def test_chinese_page_prose_has_no_english_sentence(built_book, stem):
    page = built_book / "html" / "zh" / "book" / f"{stem}.html"
    if stem == "intro":
        page = built_book / "html" / "zh" / "book" / "intro.html"
    runs = english_runs(page.read_text(encoding="utf-8"))
    assert runs == [], f"{stem}: English left in the Chinese prose: {runs[:5]}"
