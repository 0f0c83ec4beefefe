"""Every page of the book can be read in one sitting: at most 5,000 words of prose
(issues #28, #29).

Prose is the text of the markdown cells with fenced code blocks left out; code cells do
not count."""

import re
from pathlib import Path

import nbformat
import pytest
import yaml
from testing_support import toc_files

ROOT = Path(__file__).resolve().parents[2]
MAX_WORDS = 5000
FENCE = re.compile(r"^(`{3,}|~{3,}).*?^\1", re.MULTILINE | re.DOTALL)


def _chapter_pages():
    """Every notebook page of the table of contents (the Markdown pages are short)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = [ROOT / f"{f}.ipynb" for f in toc_files(toc)]
    return [p for p in pages if p.exists()]


def prose_words(path: Path) -> int:
    nb = nbformat.read(path, as_version=4)
    return sum(
        len(FENCE.sub(" ", cell.source).split())
        for cell in nb.cells
        if cell.cell_type == "markdown"
    )


def test_every_notebook_page_is_measured():
    stems = {p.stem for p in _chapter_pages()}
    assert {"01_why", "03b_grpo_derivations", "05b_silent_pitfalls"} <= stems
    assert {p.stem for p in (ROOT / "book").glob("*.ipynb")} == stems


def test_fenced_code_is_not_prose(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("one two\n```python\nx = 1 + 2\n```\nthree"),
        nbformat.v4.new_code_cell("not prose at all"),
    ]
    path = tmp_path / "page.ipynb"
    nbformat.write(nb, path)
    assert prose_words(path) == 3


@pytest.mark.parametrize("path", _chapter_pages(), ids=lambda p: p.name)
def test_page_has_at_most_5000_words_of_prose(path):
    words = prose_words(path)
    assert words <= MAX_WORDS, (
        f"{path.name} has {words:,} words of prose (> {MAX_WORDS:,}): cut it or "
        "split it into two pages under the chapter in _toc.yml"
    )
