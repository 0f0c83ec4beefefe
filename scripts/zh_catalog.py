"""The translation catalogs of the Chinese edition: one gettext PO file per page,
``i18n/zh/<page stem>.po``.

Each message's ``msgid`` is one English Markdown block of the page
(``md_blocks.split_blocks``) and its ``msgstr`` the Chinese translation;
``i18n/zh/_book.po`` holds the book's title and the table of contents' captions. The
files are read and written with Babel (``babel.messages.pofile``).

- :func:`update` is ``msgmerge``: blocks new in the English get an empty entry, an entry
  whose English changed is matched to its closest new block and marked ``fuzzy`` (the
  old translation kept as a starting point, the old English as ``#| msgid``), entries
  whose English is gone become obsolete (``#~``).
- :func:`status` says, for one page, which English blocks have a current translation and
  which are missing (no entry, or an empty one), fuzzy (the English changed since it was
  translated) or stale (an entry whose English is no longer on the page: the catalog was
  not updated).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import md_blocks
import nbformat
import yaml
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parents[1]
CATALOGS = ROOT / "i18n" / "zh"
BOOK_CATALOG = "_book"
LOCALE = "zh_CN"
PROJECT = "From DPO to GRPO, Chinese edition"
HEADER = (
    "# Chinese translation of one page of the book 'From DPO to GRPO'.\n# Each msgid "
    "is one English Markdown block; write its translation in msgstr (see "
    "i18n/README.md).\n# Update from the English with: python scripts/zh_edition.py "
    "update"
)


def toc_pages(root: Path = ROOT) -> list[Path]:
    """Every page of ``_toc.yml`` (root first), as source paths."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    names = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                names.append(entry["file"])
            walk(entry.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    pages = []
    for name in names:
        found = [root / f"{name}{s}" for s in (".ipynb", ".md")]
        found = [p for p in found if p.exists()]
        if (
            not found
        ):  # the book build reports it; the catalogs follow the pages that exist
            warnings.warn(f"_toc.yml: no page {name}.ipynb or {name}.md", stacklevel=2)
            continue
        pages.append(found[0])
    return pages


def toc_texts(root: Path = ROOT) -> list[str]:
    """The book-level strings: the title of ``_config.yml`` and the captions of
    ``_toc.yml``."""
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    return [config["title"]] + [
        p["caption"] for p in toc.get("parts", []) if p.get("caption")
    ]


def markdown_sources(page: Path) -> list[tuple[str, str]]:
    """``(where, markdown)`` for each Markdown cell of a notebook (where: its cell id)
    or for a whole ``.md`` page."""
    if page.suffix == ".ipynb":
        nb = nbformat.read(page, as_version=4)
        return [
            (c.get("id", str(i)), c.source)
            for i, c in enumerate(nb.cells)
            if c.cell_type == "markdown"
        ]
    return [("page", page.read_text(encoding="utf-8"))]


def english_blocks(page: Path) -> list[tuple[str, str]]:
    """``(where, block)`` for every translatable block of ``page``, in order (repeats
    included)."""
    return [
        (where, b.text)
        for where, src in markdown_sources(page)
        for b in md_blocks.split_blocks(src)
        if b.translatable
    ]


def catalog_path(stem: str, catalogs: Path = CATALOGS) -> Path:
    return catalogs / f"{stem}.po"


def template(stem: str, messages: list[tuple[str, str]]) -> Catalog:
    """A catalog of the English ``messages`` (``(where, msgid)``), all untranslated."""
    cat = Catalog(
        locale=LOCALE, project=PROJECT, version="1", header_comment=HEADER, fuzzy=False
    )
    for where, msgid in messages:
        if msgid in cat:
            cat[msgid].locations.append((f"{stem}#{where}", None))
        else:
            cat.add(msgid, "", locations=[(f"{stem}#{where}", None)])
    return cat


def page_template(page: Path) -> Catalog:
    return template(page.stem, english_blocks(page))


def book_template(root: Path = ROOT) -> Catalog:
    return template(BOOK_CATALOG, [("toc", t) for t in toc_texts(root)])


def load(path: Path) -> Catalog:
    if not path.exists():
        return Catalog(locale=LOCALE, fuzzy=False)
    with path.open("rb") as f:
        return read_po(f, locale=LOCALE)


def save(cat: Catalog, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(
            f, cat, width=0, include_previous=True, sort_output=False, omit_header=False
        )


def update(stem: str, english: Catalog, catalogs: Path = CATALOGS) -> Catalog:
    """Merge the English blocks into ``i18n/zh/<stem>.po`` (``msgmerge``: see the module
    docstring); write it."""
    path = catalog_path(stem, catalogs)
    cat = load(path)
    cat.update(english, update_header_comment=True, update_creation_date=False)
    cat.project, cat.version = PROJECT, "1"
    # Babel keeps the catalog's order; put the messages in the page's order, the way a
    # translator reads them
    order = {msgid: i for i, msgid in enumerate(m.id for m in english if m.id)}
    messages = sorted(
        (m for m in cat if m.id), key=lambda m: order.get(m.id, len(order))
    )
    for m in messages:
        del cat[m.id]
    for m in messages:
        cat[m.id] = m
    cat.fuzzy = False
    save(cat, path)
    return cat


@dataclass
class Status:
    stem: str
    current: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    fuzzy: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not (self.missing or self.fuzzy or self.stale)

    def summary(self) -> str:
        return (
            f"{self.stem}: {len(self.current)} translated, {len(self.missing)} "
            f"missing, {len(self.fuzzy)} fuzzy, {len(self.stale)} stale"
        )


def status(stem: str, english: list[str], cat: Catalog) -> Status:
    """How the catalog ``cat`` covers the English blocks ``english`` of page ``stem``
    (see the module docstring)."""
    st, wanted = Status(stem), set(english)
    for msgid in dict.fromkeys(english):
        msg = cat.get(msgid)
        if msg is None or not msg.string:
            st.missing.append(msgid)
        elif msg.fuzzy:
            st.fuzzy.append(msgid)
        else:
            st.current.append(msgid)
    st.stale = [m.id for m in cat if m.id and m.id not in wanted and m.string]
    return st


def translation(cat: Catalog, msgid: str) -> str | None:
    """The current translation of ``msgid``, or None (missing, empty or fuzzy)."""
    msg = cat.get(msgid)
    if msg is None or not msg.string or msg.fuzzy:
        return None
    return msg.string
