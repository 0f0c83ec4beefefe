"""The theme's words on the Chinese site are Chinese, in mainland wording (issue #45,
item 3; i18n/README.md, "The theme's words").

Every page of the built Chinese site (``_build/html/zh``) is read, and the test fails on
any English left by the theme or an extension:

- the ``placeholder``, ``aria-label``, ``title``, ``alt`` and ``data-bs-title``
  attributes of every element of the page body, except those that are the page's own
  content: the ``title`` of a cross-reference inside the article (a citation's title is
  its reference) and the ``alt`` of an image inside the article (the figure's text);
- the text of the header, both sidebars, the footer, the search dialog, the print-only
  table of contents, the toggles of hidden cells and the search and index pages, except
  what is content there: the entries of the tables of contents (page and section
  titles), the book's title and the titles of the previous and next pages.

A word counts as English unless it is a name that stays as it is (:data:`NAMES`: the
language switch's "English", Binder, Colab, the keys of the search shortcut, file
types). Each string is also held to the glossary's forbidden renderings (``列印``: the
mainland word is 打印).

The unit tests below check what builds these strings: the catalogs in
``i18n/zh/theme/``, the Chinese ``_config.yml`` that points Sphinx at them, the order in
which the book's catalog and the theme's are looked in, and the templates the book puts
in front of the theme's (:mod:`dpo_grpo_book.theme_i18n`).
"""

from __future__ import annotations

import collections
import re
import types
from pathlib import Path

import pytest
import zh_catalog
import zh_edition
import zh_glossary
from babel.messages.pofile import read_po
from bs4 import BeautifulSoup, Comment

ROOT = Path(__file__).resolve().parents[2]
THEME_CATALOGS = zh_edition.THEME_CATALOGS

#: Latin words that are names, not English text: the language switch's label (the
#: other edition's language, in its own words), the launch services, the keys of the
#: search shortcut (Ctrl + K), file types of the download menu, and the two methods the
#: book's title and author name.
NAMES = {"English", "Binder", "Colab", "Ctrl", "K", "ipynb", "md", "pdf", "PDF"}
NAMES |= {"DPO", "GRPO"}
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")

#: the attributes a reader's screen or screen reader shows
ATTRIBUTES = ("placeholder", "aria-label", "title", "alt", "data-bs-title")
#: the parts of a page made by the theme (their text is checked)
THEME_PARTS = (
    ".bd-header-article",
    ".bd-sidebar-primary",
    ".bd-sidebar-secondary",
    ".bd-footer-content",
    ".prev-next-footer",
    "#pst-search-dialog",
    "#pst-skip-link",
    "#pst-back-to-top",
    "#jb-print-docs-body",
    "details.hide > summary",
    "a.headerlink",
)
#: content inside those parts: tables of contents, the book's title, the previous and
#: next pages' titles, the page's title in the print-only header
CONTENT_IN_THEME_PARTS = (
    "nav a.reference",
    "nav .caption-text",
    ".navbar-brand",
    ".prev-next-title",
    "#jb-print-docs-body > h1",
)
#: pages the theme writes whole (their article is theme text)
THEME_PAGES = ("search.html", "genindex.html")


def english_words(text: str) -> list[str]:
    """The Latin words of ``text`` that are not :data:`NAMES`."""
    return [w for w in _WORD.findall(text) if w not in NAMES]


def _is_content_attribute(element, attribute: str) -> bool:
    in_article = element.find_parent("article", class_="bd-article") is not None
    if not in_article:
        return False
    if attribute == "alt" and element.name == "img":
        return True
    classes = element.get("class") or []
    return attribute == "title" and element.name == "a" and "reference" in classes


def theme_strings(html: str, page: str = "") -> list[str]:
    """Every theme string of one page: the attributes of :data:`ATTRIBUTES` (not the
    content's), and the text of :data:`THEME_PARTS` (not the content inside them)."""
    soup = BeautifulSoup(html, "html.parser")
    body = soup.body or soup
    found = []
    for element in body.find_all(True):
        for attribute in ATTRIBUTES:
            value = element.get(attribute)
            if (
                isinstance(value, str)
                and value.strip()
                and not _is_content_attribute(element, attribute)
            ):
                found.append(value.strip())
    parts = [el for sel in THEME_PARTS for el in body.select(sel)]
    if Path(page).name in THEME_PAGES and Path(page).parent.name != "book":
        parts += body.select("article.bd-article")
    skip = {id(el) for sel in CONTENT_IN_THEME_PARTS for el in body.select(sel)}
    for part in parts:
        for text in part.find_all(string=True):
            if isinstance(text, Comment) or text.parent.name in ("script", "style"):
                continue
            if any(id(p) in skip for p in text.parents):
                continue
            if text.strip():
                found.append(text.strip())
    return found


def theme_problems(strings, glossary) -> list[str]:
    problems = []
    for s in strings:
        english = english_words(s)
        if english:
            problems.append(f"{s!r}: English {english}")
        problems += [
            f"{s!r}: {p}" for p in zh_glossary.forbidden_renderings(s, glossary)
        ]
    return problems


def test_theme_strings_are_found_and_content_is_left_out():
    html = """<html><body>
    <div class="bd-header-article"><button title="Toggle primary sidebar"></button>
      <a class="btn-language-switch" title="English">English</a></div>
    <div class="bd-sidebar-primary"><a class="navbar-brand"><p>From DPO</p></a>
      <nav aria-label="Main"><p class="caption"><span class="caption-text">Front</span>
      </p><a class="reference" href="x.html">A TRL run</a></nav></div>
    <article class="bd-article"><h2>A section<a class="headerlink"
      title="Link to this heading">#</a></h2>
      <p><a class="reference internal" title="Shao et al. DeepSeekMath">Shao</a></p>
      <img alt="a plot of the loss"/>
      <details class="hide"><summary aria-label="Toggle hidden content">
      <p class="collapsed">Show code cell output</p></summary></details></article>
    <footer class="bd-footer-content"><p>作者： The book contributors</p>
      <p>© Copyright 2026.</p></footer>
    <div id="pst-search-dialog"><input placeholder="Search this book..."/>
      <kbd>Ctrl</kbd>+<kbd>K</kbd></div></body></html>"""
    strings = theme_strings(html)
    problems = theme_problems(strings, zh_glossary.Glossary((), (), ()))
    flagged = {p.split(": English")[0] for p in problems}
    assert flagged == {
        repr(s)
        for s in (
            "Toggle primary sidebar",
            "Main",
            "Link to this heading",
            "Toggle hidden content",
            "Show code cell output",
            "作者： The book contributors",
            "© Copyright 2026.",
            "Search this book...",
        )
    }, problems
    # content: the book's title, the tables of contents, the citation, the figure
    for content in ("From DPO", "Front", "A TRL run", "Shao", "a plot of the loss"):
        assert not any(content in s for s in strings), content
    glossary = zh_glossary.load()
    assert theme_problems(["列印成 PDF"], glossary)
    assert (
        theme_problems(["打印为 PDF", "Binder 徽标", "Ctrl", "English"], glossary) == []
    )


def _chinese_pages(site: Path) -> list[Path]:
    skip = {"_static", "_sources", "_notebooks", "_images", "reports"}
    return sorted(
        p
        for p in site.rglob("*.html")
        if not skip & set(p.relative_to(site).parts[:-1])
    )


def test_the_chinese_site_shows_no_english_theme_string(built_book):
    site = built_book / "html" / "zh"
    pages = _chinese_pages(site)
    assert pages, f"{site}: no pages"
    glossary = zh_glossary.load()
    where = collections.defaultdict(list)
    for page in pages:
        name = str(page.relative_to(site))
        strings = theme_strings(page.read_text(encoding="utf-8"), name)
        for problem in theme_problems(strings, glossary):
            where[problem].append(name)
    assert not where, f"{len(where)} theme strings on the Chinese site:\n" + "\n".join(
        f"  {problem}  ({len(names)} pages, e.g. {names[0]})"
        for problem, names in sorted(where.items())
    )


# --------------------------------------------------------------------------------------
# What builds them
# --------------------------------------------------------------------------------------


def _catalog(path: Path):
    with open(path, "rb") as f:
        return read_po(f, locale=zh_catalog.LOCALE)


@pytest.mark.parametrize("name", ["sphinx.po", "booktheme.po"])
def test_theme_catalog_is_complete_and_in_mainland_wording(name):
    cat = _catalog(THEME_CATALOGS / name)
    glossary = zh_glossary.load()
    entries = [m for m in cat if m.id]
    assert entries
    for m in entries:
        assert m.string and not m.fuzzy, f"{name}: {m.id!r} has no current translation"
        # the placeholders the template fills in are kept
        assert re.findall(r"%\(\w+\)s", m.id) == re.findall(r"%\(\w+\)s", m.string)
        assert not english_words(re.sub(r"%\(\w+\)s", "", m.string)), (name, m.string)
        assert not zh_glossary.forbidden_renderings(m.string, glossary), m.string


def test_chinese_config_points_sphinx_at_the_theme_catalogs(tmp_path):
    written = zh_edition.write_theme_catalogs(tmp_path, THEME_CATALOGS)
    folder = tmp_path / zh_edition.LOCALE_DIR / zh_catalog.LOCALE / "LC_MESSAGES"
    assert {p.name for p in written} == {"sphinx.po", "booktheme.po"}
    assert all(p.parent == folder for p in written)
    cfg = zh_edition.config_zh({"title": "From DPO to GRPO"}, "从 DPO 到 GRPO")
    assert cfg["sphinx"]["config"]["locale_dirs"] == [zh_edition.LOCALE_DIR]
    assert cfg["sphinx"]["config"]["language"] == zh_catalog.LOCALE


def test_the_books_catalog_comes_before_the_themes(tmp_path, monkeypatch):
    """sphinx-book-theme registers its own catalog first (its zh_CN says 列印成 PDF);
    the book's, registered after it, is looked in first, and the theme's still answers
    what the book's lacks."""
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po
    from dpo_grpo_book import theme_i18n
    from sphinx import locale

    monkeypatch.setattr(
        locale, "translators", collections.defaultdict(locale.NullTranslations)
    )
    import sphinx_book_theme

    theirs = Path(sphinx_book_theme.__file__).parent / "theme" / "sphinx_book_theme"
    locale.init([str(theirs / "static" / "locales")], "zh_CN", "booktheme")
    ours = tmp_path / "_locale"
    (ours / "zh_CN" / "LC_MESSAGES").mkdir(parents=True)
    cat = Catalog(locale="zh_CN")
    cat.add("Print to PDF", "打印为 PDF")
    cat.add("Search this book...", "搜索本书…")
    cat.add("The book's authors", "本书作者")
    with open(ours / "zh_CN" / "LC_MESSAGES" / "booktheme.po", "wb") as f:
        write_po(f, cat)
    assert theme_i18n.compile_catalogs(tmp_path, ["_locale"], "zh_CN") == [
        str(ours / "zh_CN" / "LC_MESSAGES" / "booktheme.mo")
    ]
    assert theme_i18n.put_first([str(ours)], "zh_CN")
    _ = locale.get_translation(theme_i18n.DOMAIN)
    assert _("Print to PDF") == "打印为 PDF"
    assert _("Fullscreen mode") == "全屏模式"  # the theme's own
    assert _("No such message") == "No such message"

    config = types.SimpleNamespace(
        author="The book's authors",
        html_theme_options={"search_bar_text": "Search this book..."},
    )
    theme_i18n.translate_config(config)
    assert config.author == "本书作者"
    assert config.html_theme_options["search_bar_text"] == "搜索本书…"


def test_the_template_overrides_differ_from_the_themes_only_in_translated_labels():
    """The book's copies of sphinx-book-theme's templates (whose labels the theme does
    not translate) are the theme's, word for word, once each ``translate('…')`` is put
    back to its English: an update of the theme that changes one fails here."""
    import sphinx_book_theme
    from dpo_grpo_book import theme_i18n

    theirs = Path(sphinx_book_theme.__file__).parent / "theme" / "sphinx_book_theme"
    copies = sorted(p for p in theme_i18n.TEMPLATES.rglob("*.html"))
    assert copies
    for copy in copies:
        rel = copy.relative_to(theme_i18n.TEMPLATES)
        text = copy.read_text(encoding="utf-8")
        head, _, text = text.partition("\n")
        assert head.startswith("{#-") and head.endswith("-#}"), rel  # what it is
        assert "translate(" in text, rel
        english = re.sub(r"\{\{ translate\('([^']+)'\) \}\}", r"\1", text)
        assert english == (theirs / rel).read_text(encoding="utf-8"), rel
