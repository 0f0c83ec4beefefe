"""Every paragraph that announces a cell is followed by that cell, in the same section
(issue #43, item 3).

A paragraph announces a cell when it says so ("the cell below", "the next cell",
"below:"; in Chinese 下面的单元, 下一个单元, 这个单元) or when it ends
with a colon (":" or "："). Such a paragraph must reach a code cell the reader sees
before any heading: a heading between the announcing paragraph and its cell is a
splice (a section inserted between a lead-in and the cell it introduces). A paragraph
that ends with a colon and is the last block of its Markdown cell must be followed
directly by a visible code cell (a cell tagged ``remove-cell`` is skipped, the reader
never sees it); one followed by another block of its own cell introduces that block (a
list, a table, an equation).

Both editions are checked on every notebook page of ``_toc.yml``, with no build: the
executed English pages carry the Markdown cells of ``book/`` unchanged, and the Chinese
pages are made here by the function the build uses (``zh_edition.translate_page``, from
``i18n/zh/<stem>.po``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import md_blocks  # scripts/ (tests/conftest.py puts it on sys.path)
import nbformat
import pytest
import zh_catalog
import zh_edition

NOTEBOOKS = [p for p in zh_catalog.toc_pages() if p.suffix == ".ipynb"]
#: Words that announce the next code cell
ANNOUNCES = re.compile(
    r"the cell below|the next cell|below:|(?:下面的|下一个|这个|下方的)单元",
    re.IGNORECASE,
)
COLON = (":", "：")
HIDDEN = "remove-cell"
#: Pages that still have a splice, each with who fixes it; the list only shrinks
#: (test_known_splices_are_still_there).
KNOWN: dict[str, str] = {}


@dataclass(frozen=True)
class Item:
    """One block of a Markdown cell, or one code cell, in page order."""

    kind: str  # "heading", "target", "text", "code", "hidden code"
    text: str = ""
    cell: int = 0
    last_in_cell: bool = False


def items(nb) -> list[Item]:
    """The page as the reader meets it: Markdown blocks and code cells, in order."""
    out = []
    for k, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            hidden = HIDDEN in cell.metadata.get("tags", [])
            out.append(Item("hidden code" if hidden else "code", cell=k))
        elif cell.cell_type == "markdown":
            blocks = md_blocks.split_blocks(cell.source)
            for j, b in enumerate(blocks):
                first = b.text.lstrip("\n").split("\n", 1)[0]
                kind = (
                    "heading"
                    if md_blocks.HEADING.match(first)
                    else "target"
                    if md_blocks.TARGET.match(first)
                    else "text"
                )
                out.append(Item(kind, b.text, k, j == len(blocks) - 1))
    return out


def _announces(item: Item) -> bool:
    if item.kind != "text":
        return False
    text = item.text.strip()
    fenced = md_blocks.FENCE_OPEN.match(text) or md_blocks.MATH_OPEN.match(text)
    return not fenced and (text.endswith(COLON) or bool(ANNOUNCES.search(text)))


def splices(nb) -> list[str]:
    """The announcing paragraphs of ``nb`` whose cell does not follow them in their
    section, each with what stands in between."""
    seq = items(nb)
    found = []
    for i, item in enumerate(seq):
        if not _announces(item):
            continue
        rest = [x for x in seq[i + 1 :] if x.kind not in ("target", "hidden code")]
        what = item.text.strip().replace("\n", " ")
        what = "…" + what[-90:] if len(what) > 90 else what
        nxt = rest[0] if rest else None
        shown = "the end of the page" if nxt is None else nxt.text.strip()[:60]
        if item.text.strip().endswith(COLON):
            # the last block of its cell introduces the next cell; any other introduces
            # the block after it (a list, a table, an equation), never a heading
            if (nxt is None or nxt.kind != "code") and (
                item.last_in_cell or nxt is None or nxt.kind == "heading"
            ):
                found.append(f"cell {item.cell}: {what!r} is followed by {shown!r}")
                continue
            if item.last_in_cell or not ANNOUNCES.search(item.text):
                continue
        for x in rest:
            if x.kind == "code":
                break
            if x.kind == "heading":
                found.append(
                    f"cell {item.cell}: {what!r} is followed by the heading "
                    f"{x.text.strip()!r} before any code cell"
                )
                break
        else:
            found.append(f"cell {item.cell}: {what!r}: no code cell after it")
    return found


def _md(text: str):
    return nbformat.v4.new_markdown_cell(text)


def _code(tags=()):
    return nbformat.v4.new_code_cell("x = 1", metadata={"tags": list(tags)})


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def test_a_heading_between_a_lead_in_and_its_cell_is_a_splice():
    spliced = _nb(
        _md("## 5.3 A\n\nThe cell compares the two gradients:\n\n## 5.4 B\n\nText."),
        _code(),
    )
    assert len(splices(spliced)) == 1
    assert "5.4 B" in splices(spliced)[0]
    whole = _nb(_md("## 5.3 A\n\nThe cell compares the two gradients:"), _code())
    assert splices(whole) == []


def test_a_colon_needs_the_cell_itself_a_hidden_cell_does_not_count():
    assert splices(_nb(_md("In code:"), _code(["remove-cell"]), _md("More."))) != []
    assert splices(_nb(_md("In code:"), _code(["remove-cell"]), _code())) == []
    assert splices(_nb(_md("下面的单元计算它："), _md("然后。"), _code())) != []
    assert splices(_nb(_md("The sum is\n\n$$a+b$$\n\nThe list:\n\n- one"))) == []


def test_words_that_announce_a_cell_need_one_before_the_next_heading():
    late = _nb(_md("The next cell prints it. Then\n\n## Next"), _code())
    assert splices(late) != []
    near = _nb(_md("The next cell prints it."), _md("A remark."), _code())
    assert splices(near) == []
    assert splices(_nb(_md("这个单元格画出它。\n\n## 下一节"), _code())) != []


def _pages(edition: str) -> dict[str, object]:
    """stem -> the notebook of ``edition`` ("en" or "zh")."""
    out = {}
    for page in NOTEBOOKS:
        if edition == "en":
            out[page.stem] = nbformat.read(page, as_version=4)
        else:
            catalog = zh_catalog.load(zh_catalog.catalog_path(page.stem))
            out[page.stem] = zh_edition.translate_page(page, catalog)[0]
    return out


@pytest.fixture(scope="module", params=["en", "zh"])
def edition(request):
    return request.param, _pages(request.param)


@pytest.mark.parametrize("stem", [p.stem for p in NOTEBOOKS if p.stem not in KNOWN])
def test_page_has_no_splice(edition, stem):
    name, pages = edition
    assert splices(pages[stem]) == [], f"{name} edition"


@pytest.mark.parametrize("stem", sorted(KNOWN))
def test_known_splices_are_still_there(edition, stem):
    name, pages = edition
    assert splices(pages[stem]), (
        f"{stem} ({name} edition) has no splice any more: remove it from KNOWN"
    )
