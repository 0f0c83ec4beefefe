"""The Chinese edition's source: the English book with every Markdown block replaced by
its translation.

    # merge the English into i18n/zh/*.po (msgmerge), print status
    python scripts/zh_edition.py update [STEM ...]
    # per page: translated, missing, fuzzy, stale
    python scripts/zh_edition.py status [--strict]
    # translations that drop markup or depart from the glossary
    python scripts/zh_edition.py check [STEM ...]
    python scripts/zh_edition.py generate [--out _build/zh_src]

``generate`` (run by ``scripts/build_book.py --zh``, i.e. ``make book``) writes a
Jupyter Book project into ``_build/zh_src/`` (generated, never committed): every page of
``_toc.yml`` with each Markdown block replaced by its current translation from
``i18n/zh/<stem>.po`` (``zh_catalog``), code cells unchanged except the set-up cell (tag
``colab-setup``), which first sets ``DPO_GRPO_LANG=zh`` so that figures, widgets and
``check`` speak Chinese in the build and in the Chinese reader edition, and which
installs the package with its ``zh`` extra too (mplfonts: the CJK font of the matplotlib
figures), and the label of a solution's toggle on the site (the cell metadata
``mystnb``, ``scripts/sync_colab_cells.py``), which is translated. A block with no
current translation (missing or fuzzy) stays English, and the page then opens with a
note saying how many blocks are still English. Its
``_config.yml`` is the English one with the Chinese title, ``language: zh_CN``, the
language switch pointing back to the English site and the launch buttons pointing at the
Chinese reader edition, and ``locale_dirs`` pointing at its copy of the theme's
catalogs (``i18n/zh/theme/``); its ``_toc.yml`` has the captions translated.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

import md_blocks
import nbformat
import yaml
import zh_catalog
import zh_glossary

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "_build" / "zh_src"
#: Where the Chinese site sits inside the English one (``_build/html/zh/``); the
#: language switches use it.
SITE_PREFIX = "zh/"
SETUP_TAG = "colab-setup"
LANG_LINES = (
    "import os\n\n"
    'os.environ["DPO_GRPO_LANG"] = "zh"  # 中文版：图、控件和 check 的反馈用中文\n'
)
#: The end of the English set-up cell (scripts/sync_colab_cells.py), and what the
#: Chinese one adds there: matplotlib figures drawn by a page's own cells get the CJK
#: font (the package's figures set it themselves), so no English page says so.
RUNTIME_LINE = re.compile(r"^    print\(runtime_summary\(.*\)\)$", re.MULTILINE)
FONT_LINES = (
    "\n\n    from dpo_grpo.i18n import use_cjk_matplotlib_font\n\n"
    "    use_cjk_matplotlib_font()  # 中文版：matplotlib 的图用含中文字形的字体"
)
#: What the English set-up cell installs (scripts/sync_colab_cells.py), and the Chinese
#: one: also the ``zh`` extra (pyproject.toml).
EXTRAS_LINES = (
    'extras = "notebooks,torch" if wants_torch else "notebooks"',
    'extras = "notebooks,zh,torch" if wants_torch else "notebooks,zh"',
)
#: jieba's dictionary for the Chinese site's search index, beside its ``_config.yml``
SEARCH_WORDS = "search_words.txt"
HAN = re.compile(r"[\u4e00-\u9fff]")
#: The site's labels of a cell's toggle (myst-nb's ``code_prompt_show``/``_hide`` in the
#: cell metadata ``mystnb``, set by scripts/sync_colab_cells.py), in Chinese
PROMPTS_ZH = {"Show the solution": "显示解答", "Hide the solution": "隐藏解答"}
#: The theme's words in Chinese (Sphinx's, the themes', myst-nb's: i18n/zh/theme/*.po),
#: copied into the source's Sphinx ``locale_dirs`` (Sphinx and book/_ext compile them)
THEME_CATALOGS = zh_catalog.CATALOGS / "theme"
LOCALE_DIR = "_locale"
FALLBACK_NOTE = ":::{{note}}\n本页尚未全部译成中文：{n} 段仍是英文原文。\n:::"


def setup_cell_zh(source: str) -> str:
    """The set-up cell of the Chinese edition: the English one with ``DPO_GRPO_LANG=zh``
    set before any code, installing the ``zh`` extra too, and giving matplotlib the CJK
    font at its end."""
    en, zh = EXTRAS_LINES
    if source.count(en) != 1:
        raise ValueError(
            f"the set-up cell must have the line {en!r} once (run "
            "scripts/sync_colab_cells.py)"
        )
    if len(RUNTIME_LINE.findall(source)) != 1:
        raise ValueError(
            "the set-up cell must end its install with one "
            "'    print(runtime_summary(...))' line (run scripts/sync_colab_cells.py)"
        )
    source = RUNTIME_LINE.sub(lambda m: m.group(0) + FONT_LINES, source)
    lines = source.replace(en, zh).split("\n")
    k = 0
    while k < len(lines) and lines[k].startswith("#"):
        k += 1
    head = "\n".join(lines[:k])
    return (head + "\n" if head else "") + LANG_LINES + "\n".join(lines[k:])


def prompts_zh(mystnb: dict) -> dict:
    """A cell's myst-nb settings with the labels of its toggle in Chinese."""
    out = dict(mystnb)
    for key in ("code_prompt_show", "code_prompt_hide"):
        if key in out:
            if out[key] not in PROMPTS_ZH:
                raise ValueError(
                    f"{key}: no Chinese for {out[key]!r} (add it to PROMPTS_ZH)"
                )
            out[key] = PROMPTS_ZH[out[key]]
    return out


def translate_markdown(text: str, cat) -> tuple[str, int]:
    """``text`` with each translatable block replaced by its current translation; also
    how many stayed English."""
    blocks = md_blocks.split_blocks(text)
    out, english = [], 0
    for b in blocks:
        zh = zh_catalog.translation(cat, b.text) if b.translatable else None
        if b.translatable and zh is None:
            english += 1
        out.append(b.text if zh is None else zh)
    return md_blocks.join_blocks(
        blocks, out, md_blocks.trailing_text(text, blocks)
    ), english


def _with_note(text: str, n: int) -> str:
    """``text`` with the fallback note after its first heading."""
    blocks = md_blocks.split_blocks(text)
    texts = [b.text for b in blocks]
    at = next((i for i, b in enumerate(blocks) if md_blocks.HEADING.match(b.text)), -1)
    note = FALLBACK_NOTE.format(n=n)
    if at < 0:
        return note + "\n\n" + text
    texts[at] = texts[at] + "\n\n" + note
    return md_blocks.join_blocks(blocks, texts, md_blocks.trailing_text(text, blocks))


def translate_page(page: Path, cat) -> tuple[str | nbformat.NotebookNode, int]:
    """The Chinese page (notebook or Markdown text) and how many of its blocks stayed
    English."""
    if page.suffix == ".md":
        text, english = translate_markdown(page.read_text(encoding="utf-8"), cat)
        return (_with_note(text, english) if english else text), english
    nb = nbformat.read(page, as_version=4)
    english, first_md = 0, None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source, n = translate_markdown(cell.source, cat)
            english += n
            first_md = first_md or cell
        elif cell.cell_type == "code" and SETUP_TAG in cell.metadata.get("tags", []):
            cell.source = setup_cell_zh(cell.source)
        if cell.cell_type == "code" and "mystnb" in cell.metadata:
            cell.metadata["mystnb"] = prompts_zh(cell.metadata["mystnb"])
    if english and first_md is not None:
        first_md.source = _with_note(first_md.source, english)
    return nb, english


def search_words(glossary: zh_glossary.Glossary | None = None) -> str:
    """jieba's user dictionary for the Chinese site's search: the glossary's Chinese
    terms (with a Han character, without a space), one a line. Sphinx indexes Chinese
    words as jieba cuts them (价值网络 into 价值 and 网络, without this), and the
    search page does not cut a query: with these words a term typed whole is found."""
    glossary = glossary or zh_glossary.load()
    words = {w for t in glossary.terms for w in t.zh if HAN.search(w) and " " not in w}
    return "".join(f"{w}\n" for w in sorted(words))


def config_zh(config: dict, title: str, search_dict: Path | None = None) -> dict:
    """The Chinese ``_config.yml`` from the English one; ``search_dict``: the file of
    :func:`search_words`."""
    cfg = yaml.safe_load(yaml.safe_dump(config))
    cfg["title"] = title
    sphinx_config = cfg.setdefault("sphinx", {}).setdefault("config", {})
    sphinx_config["language"] = zh_catalog.LOCALE
    # the theme's words (write_theme_catalogs; book/_ext/dpo_grpo_book/theme_i18n.py)
    sphinx_config["locale_dirs"] = [LOCALE_DIR]
    sphinx_config["book_assets_node_modules"] = str(ROOT / "node_modules")
    sphinx_config["book_language_switch"] = {"label": "English", "root": "../"}
    sphinx_config["book_reader_prefix"] = SITE_PREFIX
    # the Chinese site serves its CJK web font, Noto Sans SC (book/_ext/dpo_grpo_book)
    sphinx_config["book_cjk_web_font"] = True
    if search_dict is not None:  # sphinx.search.zh loads it into jieba
        sphinx_config["html_search_options"] = {"dict": str(search_dict.resolve())}
    return cfg


def write_theme_catalogs(out: Path, catalogs: Path = THEME_CATALOGS) -> list[Path]:
    """Copy the theme's catalogs into ``out``'s Sphinx locale folder, where Sphinx finds
    them by their gettext domain (``sphinx.po``, ``booktheme.po``)."""
    target = out / LOCALE_DIR / zh_catalog.LOCALE / "LC_MESSAGES"
    target.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy2(po, target)) for po in sorted(catalogs.glob("*.po"))]


def toc_zh(toc: dict, cat) -> dict:
    toc = yaml.safe_load(yaml.safe_dump(toc))
    for part in toc.get("parts", []):
        if part.get("caption"):
            part["caption"] = (
                zh_catalog.translation(cat, part["caption"]) or part["caption"]
            )
    return toc


def _has_bibliography(page: Path) -> bool:
    return page.suffix == ".md" and "{bibliography}" in page.read_text(encoding="utf-8")


def only_pages(toc: dict, stems: set[str]) -> dict:
    """``toc`` with only the pages whose stem is in ``stems`` (and the root)."""

    def keep(entries):
        kept = []
        for entry in entries or []:
            sections = keep(entry.get("sections"))
            if Path(entry.get("file", "")).stem in stems or sections:
                entry = (
                    dict(entry, sections=sections)
                    if sections
                    else {k: v for k, v in entry.items() if k != "sections"}
                )
                kept.append(entry)
        return kept

    toc = dict(toc)
    parts = [dict(p, chapters=keep(p.get("chapters"))) for p in toc.get("parts", [])]
    toc["parts"] = [p for p in parts if p["chapters"]]
    return toc


def generate(
    out: Path = OUT,
    catalogs: Path = zh_catalog.CATALOGS,
    root: Path = ROOT,
    only: list[str] | None = None,
) -> dict[str, int]:
    """Write the Chinese edition's source into ``out``; return, per page stem, how many
    blocks stayed English. ``only``: these page stems (and the root page) alone, for a
    quick look at a page."""
    if out.exists():
        shutil.rmtree(out)
    (out / "book").mkdir(parents=True)
    english = {}
    pages = zh_catalog.toc_pages(root)
    if only:
        # the root, those pages, and the page with the bibliography (or every citation
        # is unresolved)
        only = list(only) + [p.stem for p in pages if _has_bibliography(p)]
        pages = pages[:1] + [p for p in pages[1:] if p.stem in only]
    for page in pages:
        cat = zh_catalog.load(zh_catalog.catalog_path(page.stem, catalogs))
        translated, english[page.stem] = translate_page(page, cat)
        target = out / page.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(translated, str):
            target.write_text(translated, encoding="utf-8")
        else:
            nbformat.write(translated, target)
    for extra in (root / "book").glob("*.bib"):
        shutil.copy2(extra, out / "book" / extra.name)
    book_cat = zh_catalog.load(
        zh_catalog.catalog_path(zh_catalog.BOOK_CATALOG, catalogs)
    )
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    title = zh_catalog.translation(book_cat, config["title"]) or config["title"]
    (out / SEARCH_WORDS).write_text(search_words(), encoding="utf-8")
    write_theme_catalogs(out, catalogs / "theme")
    (out / "_config.yml").write_text(
        yaml.safe_dump(
            config_zh(config, title, out / SEARCH_WORDS),
            allow_unicode=True,
            sort_keys=False,
        ),
        encoding="utf-8",
    )
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    if only:
        toc = only_pages(toc, set(only))
    (out / "_toc.yml").write_text(
        yaml.safe_dump(toc_zh(toc, book_cat), allow_unicode=True, sort_keys=False),
        encoding="utf-8",
    )
    return english


def update_all(
    stems=None, catalogs: Path = zh_catalog.CATALOGS, root: Path = ROOT
) -> list[zh_catalog.Status]:
    """``msgmerge`` every page's catalog (or those of ``stems``) and the book catalog;
    return their status."""
    statuses = []
    for page in zh_catalog.toc_pages(root):
        if stems and page.stem not in stems:
            continue
        english = zh_catalog.page_template(page)
        cat = zh_catalog.update(page.stem, english, catalogs)
        statuses.append(
            zh_catalog.status(page.stem, [m.id for m in english if m.id], cat)
        )
    if not stems or zh_catalog.BOOK_CATALOG in stems:
        english = zh_catalog.book_template(root)
        cat = zh_catalog.update(zh_catalog.BOOK_CATALOG, english, catalogs)
        statuses.append(
            zh_catalog.status(
                zh_catalog.BOOK_CATALOG, [m.id for m in english if m.id], cat
            )
        )
    return statuses


def status_all(
    catalogs: Path = zh_catalog.CATALOGS, root: Path = ROOT
) -> list[zh_catalog.Status]:
    statuses = []
    for page in zh_catalog.toc_pages(root):
        blocks = [b for _, b in zh_catalog.english_blocks(page)]
        cat = zh_catalog.load(zh_catalog.catalog_path(page.stem, catalogs))
        statuses.append(zh_catalog.status(page.stem, blocks, cat))
    cat = zh_catalog.load(zh_catalog.catalog_path(zh_catalog.BOOK_CATALOG, catalogs))
    statuses.append(
        zh_catalog.status(zh_catalog.BOOK_CATALOG, zh_catalog.toc_texts(root), cat)
    )
    return statuses


def problems(stem: str, catalogs: Path = zh_catalog.CATALOGS) -> list[str]:
    """What is wrong with the current translations of page ``stem``: markup that is not
    kept verbatim (``md_blocks.markup``: roles, labels, code, math, link targets; added
    inline math or code is allowed), departures from the glossary, and English prose
    copied as its own translation."""
    glossary, found = zh_glossary.load(), []
    for m in zh_catalog.load(zh_catalog.catalog_path(stem, catalogs)):
        if not m.id or not m.string or m.fuzzy:
            continue
        english, chinese = md_blocks.markup(m.id), md_blocks.markup(m.string)
        where = f"{stem}: {m.id[:60]!r}"
        words = re.findall(r"[A-Za-z]{2,}", zh_glossary.prose(m.id))
        if m.string.strip() == m.id.strip() and len(words) >= 3:
            found.append(f"{where}: the English is copied, not translated")
        dropped = sorted((english - chinese).elements())
        # a translation may add inline math or code to say the same thing; never a role,
        # label or link
        added = [
            x
            for x in (chinese - english).elements()
            if x.split(":")[0] not in ("math", "code")
        ]
        if dropped or added:
            found.append(f"{where}: markup dropped {dropped}, added {sorted(added)}")
        found += [
            f"{where}: {v}" for v in zh_glossary.violations(m.id, m.string, glossary)
        ]
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    up = sub.add_parser("update", help="merge the English into the catalogs (msgmerge)")
    up.add_argument(
        "stems", nargs="*", help="page stems (default: every page, and _book)"
    )
    st = sub.add_parser("status", help="translated / missing / fuzzy / stale per page")
    st.add_argument(
        "--strict", action="store_true", help="exit 1 unless every page is complete"
    )
    ck = sub.add_parser("check", help="markup kept and glossary followed")
    ck.add_argument("stems", nargs="*", help="page stems (default: every page)")
    gen = sub.add_parser("generate", help="write the Chinese edition's source")
    gen.add_argument("--out", type=Path, default=OUT)
    gen.add_argument(
        "--pages", help="comma-separated page stems: only these (and the root)"
    )
    a = ap.parse_args(argv)
    if a.command == "generate":
        english = generate(a.out, only=a.pages.split(",") if a.pages else None)
        for stem, n in english.items():
            if n:
                print(f"{stem}: {n} blocks still in English")
        print("wrote", a.out)
        return 0
    if a.command == "check":
        stems = a.stems or [p.stem for p in zh_catalog.toc_pages()] + [
            zh_catalog.BOOK_CATALOG
        ]
        found = [line for stem in stems for line in problems(stem)]
        print("\n".join(found) or "no problems")
        return 1 if found else 0
    statuses = update_all(a.stems or None) if a.command == "update" else status_all()
    for s in statuses:
        print(s.summary())
    if a.command == "status" and a.strict and not all(s.complete for s in statuses):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
