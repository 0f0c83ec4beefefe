"""The Chinese edition (issue #32; i18n/README.md): catalogs, generator, built site and
reader edition.

- every English Markdown block of every page has a current translation in
  ``i18n/zh/<stem>.po`` (none missing, fuzzy or stale), except on the pages listed in
  ``UNTRANSLATED``, a list that must shrink to empty;
- every translation keeps the English block's markup verbatim (roles with their glue
  keys, labels and citation keys, directives and their options, inline code, math, link
  targets) and follows the glossary;
- the generated Chinese notebooks keep the English code cells, except that the set-up
  cell sets ``DPO_GRPO_LANG=zh`` before any other code and installs the ``zh`` extra;
- the built Chinese site (``_build/html/zh``, from the one ``make book`` of the test
  run): the same glued numbers as the English page; a language switch to the English
  page and back; Colab buttons that open the Chinese reader edition, which has no MyST
  left. What a reader must never see on a page (raw MyST, HTML printed as text, stderr,
  the build's warnings) is checked on both editions in tests/book/test_built_pages.py.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from collections import Counter
from pathlib import Path

import md_blocks  # scripts/ (tests/conftest.py puts it on sys.path)
import nbformat
import pytest
import reader_edition
import zh_catalog
import zh_edition
import zh_glossary
from babel.messages.catalog import Catalog
from bs4 import BeautifulSoup
from dpo_grpo.i18n import needs_translation

ROOT = Path(__file__).resolve().parents[2]
PAGES = zh_catalog.toc_pages()
STEMS = [p.stem for p in PAGES]
NOTEBOOK_STEMS = [p.stem for p in PAGES if p.suffix == ".ipynb"]

#: Pages not translated yet: their English blocks stay English on the Chinese site (with
#: a note saying so). Translate a page (i18n/README.md), then remove it here; the list
#: must end empty.
UNTRANSLATED: list[str] = []
TRANSLATED = [s for s in STEMS if s not in UNTRANSLATED]


def _built_pages_checks():
    """The raw-MyST check of tests/book/test_built_pages.py (one definition of raw MyST
    for both reader editions)."""
    spec = importlib.util.spec_from_file_location(
        "built_pages_checks", Path(__file__).with_name("test_built_pages.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHECKS = _built_pages_checks()


# --------------------------------------------------------------------------------------
# Blocks and catalogs
# --------------------------------------------------------------------------------------


def test_blocks_split_and_join_every_page_exactly():
    for page in PAGES:
        for _, src in zh_catalog.markdown_sources(page):
            blocks = md_blocks.split_blocks(src)
            texts = [b.text for b in blocks]
            assert (
                md_blocks.join_blocks(
                    blocks, texts, md_blocks.trailing_text(src, blocks)
                )
                == src
            ), page


def test_blocks_are_paragraphs_headings_and_whole_directives():
    src = (
        "(lab)=\n## 1.1 Title\nA paragraph\non two lines.\n\n"
        ":::{exercise} T\n:label: ex\n\nBody.\n\nMore body.\n:::\n\n$$\nx = 1\n$$\n\n"
        "```{tableofcontents}\n```\n"
    )
    blocks = md_blocks.split_blocks(src)
    assert [b.text for b in blocks] == [
        "(lab)=",
        "## 1.1 Title",
        "A paragraph\non two lines.",
        ":::{exercise} T\n:label: ex\n\nBody.\n\nMore body.\n:::",
        "$$\nx = 1\n$$",
        "```{tableofcontents}\n```",
    ]
    assert [b.translatable for b in blocks] == [False, True, True, True, False, False]


def test_markup_catches_a_dropped_or_changed_role_label_code_or_math():
    english = (
        "Loss {glue:text}`ch01_x:.4f` for {ref}`the ratio <ch03-ratio>` {cite}`k`, "
        "`loss_type`, $\\beta$ and [ch. 2](02_minimal_understanding.ipynb)."
    )
    good = (
        "损失 {glue:text}`ch01_x:.4f`，见{ref}`概率比 <ch03-ratio>` {cite}`k`、"
        "`loss_type`、$\\beta$ 和[第 2 章](02_minimal_understanding.ipynb)。"
    )
    assert md_blocks.markup(english) == md_blocks.markup(good)
    # inline math wrapped over two lines in English, on one line in the translation
    assert md_blocks.markup("with $a +\nb$ and $c$") == md_blocks.markup(
        "有 $a + b$ 和 $c$"
    )
    for broken in (
        good.replace(":.4f", ":.2f"),
        good.replace("<ch03-ratio>", "<ch03-other>"),
        good.replace("{cite}`k`", ""),
        good.replace("`loss_type`", "损失类型"),
        good.replace("$\\beta$", "β"),
        good.replace("02_minimal_understanding.ipynb", "02.ipynb"),
    ):
        assert md_blocks.markup(english) != md_blocks.markup(broken), broken


def _catalog(entries: dict[str, str], fuzzy: set[str] = frozenset()) -> Catalog:
    cat = Catalog(locale="zh_CN")
    for msgid, msgstr in entries.items():
        cat.add(msgid, msgstr, flags=["fuzzy"] if msgid in fuzzy else [])
    return cat


def test_status_reports_missing_fuzzy_and_stale_blocks():
    cat = _catalog(
        {"A.": "甲。", "B.": "", "C.": "丙。", "Old D.": "丁。"}, fuzzy={"C."}
    )
    st = zh_catalog.status("p", ["A.", "B.", "C.", "E."], cat)
    assert st.current == ["A."]
    assert st.missing == ["B.", "E."]
    assert st.fuzzy == ["C."]
    assert st.stale == ["Old D."]
    assert not st.complete
    assert zh_catalog.status("p", ["A."], _catalog({"A.": "甲。"})).complete


NEW = "Sampling eight answers per prompt costs generation time."


def test_update_keeps_a_changed_blocks_translation_as_fuzzy(tmp_path):
    zh_catalog.save(
        _catalog({"The critic is large.": "价值网络很大。", "Gone.": "没了。"}),
        tmp_path / "p.po",
    )
    english = zh_catalog.template(
        "p", [("c1", "The critic is very large."), ("c2", NEW)]
    )
    cat = zh_catalog.update("p", english, tmp_path)
    changed = cat.get("The critic is very large.")
    assert changed.fuzzy and changed.string == "价值网络很大。"
    assert changed.previous_id == ["The critic is large."]
    assert cat.get(NEW).string == ""
    assert "Gone." in cat.obsolete
    st = zh_catalog.status("p", ["The critic is very large.", NEW], cat)
    assert st.fuzzy == ["The critic is very large."] and st.missing == [NEW]
    # and the generator leaves the changed block in English instead of printing the old
    # translation
    text, english_blocks = zh_edition.translate_markdown(
        f"The critic is very large.\n\n{NEW}\n", cat
    )
    assert text == f"The critic is very large.\n\n{NEW}\n" and english_blocks == 2


def test_every_catalog_belongs_to_a_page():
    names = {p.stem for p in zh_catalog.CATALOGS.glob("*.po")}
    orphans = names - set(STEMS) - {zh_catalog.BOOK_CATALOG}
    assert not orphans, (
        f"catalogs of pages no longer in _toc.yml: {sorted(orphans)} (renamed? move "
        "the .po and run `python scripts/zh_edition.py update`)"
    )


def test_untranslated_lists_only_pages_of_the_book():
    pages = set(STEMS) | {p.stem for p in (ROOT / "book").glob("*.*")}
    assert set(UNTRANSLATED) <= pages, sorted(set(UNTRANSLATED) - pages)


def _status(stem: str) -> zh_catalog.Status:
    if stem == zh_catalog.BOOK_CATALOG:
        english = zh_catalog.toc_texts()
    else:
        english = [b for _, b in zh_catalog.english_blocks(PAGES[STEMS.index(stem)])]
    return zh_catalog.status(
        stem, english, zh_catalog.load(zh_catalog.catalog_path(stem))
    )


@pytest.mark.parametrize("stem", STEMS + [zh_catalog.BOOK_CATALOG])
def test_every_block_has_a_current_translation(stem):
    st = _status(stem)
    if stem in UNTRANSLATED:
        assert not st.complete, (
            f"{stem} is fully translated: remove it from UNTRANSLATED"
        )
        return
    assert st.complete, (
        st.summary()
        + "; run `python scripts/zh_edition.py update` and translate: "
        + repr((st.missing + st.fuzzy + st.stale)[:3])
    )


@pytest.mark.parametrize("stem", STEMS + [zh_catalog.BOOK_CATALOG])
def test_translations_keep_markup_and_follow_the_glossary(stem):
    assert zh_edition.problems(stem) == []


def test_added_math_is_allowed_but_not_an_added_or_dropped_role(tmp_path):
    english = "The estimator is unbiased {cite}`k`."
    cat = _catalog({english: "估计量 $k_3$ 是无偏的 {cite}`k`。"})
    zh_catalog.save(cat, tmp_path / "p.po")
    assert zh_edition.problems("p", tmp_path) == []
    for broken in ("估计量是无偏的。", "估计量是无偏的 {cite}`k` {cite}`j`。"):
        zh_catalog.save(_catalog({english: broken}), tmp_path / "p.po")
        assert zh_edition.problems("p", tmp_path), broken


def test_a_copied_english_block_is_a_problem(tmp_path):
    cat = _catalog(
        {
            "The critic is as large as the policy.": (
                "The critic is as large as the policy."
            ),
            "`GRPOTrainer`": "`GRPOTrainer`",
        }
    )
    zh_catalog.save(cat, tmp_path / "p.po")
    found = zh_edition.problems("p", tmp_path)
    copied = [f for f in found if "copied, not translated" in f]
    assert (
        len(copied) == 1 and "The critic" in copied[0]
    )  # a code-only block may stay as it is


def test_glossary_check_catches_a_wrong_term_and_a_translated_trl_name():
    glossary = zh_glossary.load()
    english = "The critic is gone; set `loss_type` and call `check`."
    assert (
        zh_glossary.violations(
            english, "价值网络没有了；设置 `loss_type` 并调用 `check`。", glossary
        )
        == []
    )
    assert zh_glossary.violations(
        english, "评论家没有了；设置 `loss_type` 并调用 `check`。", glossary
    )
    assert zh_glossary.violations(
        english, "价值网络没有了；设置损失类型并调用 `check`。", glossary
    )
    # names kept in English match with their case: "zero" is not ZeRO
    assert zh_glossary.violations("With zero reward.", "奖励为零。", glossary) == []
    assert zh_glossary.violations("ZeRO shards it.", "零冗余优化器把它分片。", glossary)
    # "the reference solution" is not the reference model
    assert (
        zh_glossary.violations("See the reference solution.", "见参考答案。", glossary)
        == []
    )
    assert zh_glossary.violations("Load the reference.", "加载参考答案。", glossary)


def test_glossary_check_reads_wrapped_terms_and_not_text_between_roles_as_code():
    glossary = zh_glossary.load()
    # the English is wrapped: a term may run over a line break
    assert zh_glossary.violations(
        "It drops zero-std\n   groups.", "它去掉相同分数的组。", glossary
    )
    assert (
        zh_glossary.violations(
            "It drops zero-std\n   groups.", "它去掉同分组。", glossary
        )
        == []
    )
    # the text between two roles is prose, not inline code: "check" there is the English
    # verb
    english = "See {ref}`ch-a`, then check {ref}`ch-b`."
    assert (
        zh_glossary.violations(
            english, "见 {ref}`ch-a`，再核对 {ref}`ch-b`。", glossary
        )
        == []
    )
    # "a clip" of a video is not clipping
    assert (
        zh_glossary.violations(
            "A terminal score for a clip.", "给一段视频一个终局分数。", glossary
        )
        == []
    )


#: One sentence per forbidden rendering of the glossary, and the same sentence as it
#: should read.
FORBIDDEN_EXAMPLES = [
    ("价值网络是最难自圆其说的成本。", "价值网络是最难解释的成本。"),
    ("每次训练前向都要算一遍。", "每一次训练（前向 + 反向）都要算一遍。"),
    ("两者分不开。", "两者无法区分；区分不开也一样。"),
    ("这个回答变得更可能。", "这个回答的概率升高。"),
    ("裸 k3 有偏差。", "单独的 k3 有偏差。"),
    ("诚实的总结是：没有。", "如实地说：没有。"),
    ("相对而言小了三倍。", "小到原来的三分之一。"),
    ("在每个一个服务的地方。", "在每一个服务的地方。"),
    ("AdamW 看不出常数权重。", "AdamW 对常数缩放不敏感。"),
    ("本书 package 的账本。", "本书 `dpo_grpo` 包的账本。"),
    ("运行下一个单元。", "运行下一个单元格；单元测试不变。"),
    ("每个批次有 8 条。", "每个 batch 有 8 条。"),
    ("同一基座。", "同一底座。"),
    ("训练适配器。", "训练 adapter。"),
    ("标准差保护项是 ε。", "防零项是 ε。"),
    ("比率被裁剪。", "概率比被裁剪；裁剪比例是 0.1。"),
    ("zero-std 组没有信号。", "同分组没有信号。"),
    ("16.8 百万个参数。", "1680 万个参数。"),
    ("列印成 PDF。", "打印成 PDF。"),
    ("这是*重点*。", "这是**重点**，`a*b*c` 与 $a*b$ 不算。"),
]


def test_every_forbidden_rendering_has_an_example():
    rules = zh_glossary.load().forbidden
    caught = [
        {r.zh for r in rules if re.search(r.zh, zh_glossary.prose(bad))}
        for bad, _ in FORBIDDEN_EXAMPLES
    ]
    assert set().union(*caught) == {r.zh for r in rules}


@pytest.mark.parametrize(("bad", "good"), FORBIDDEN_EXAMPLES)
def test_glossary_check_catches_a_forbidden_rendering(bad, good):
    glossary = zh_glossary.load()
    assert zh_glossary.forbidden_renderings(bad, glossary)
    assert zh_glossary.forbidden_renderings(good, glossary) == []


def _package_strings() -> dict[str, str]:
    """The package's Chinese catalog, ``data/i18n/zh.json`` (English -> Chinese)."""
    return json.loads(
        (ROOT / "code/dpo_grpo/data/i18n/zh.json").read_text(encoding="utf-8")
    )


def test_package_strings_use_no_forbidden_rendering():
    """The package's own Chinese (figures, tables, check messages) follows the same
    rules as the catalogs."""
    glossary = zh_glossary.load()
    strings = _package_strings()
    found = {
        en: bad
        for en, zh in strings.items()
        if (bad := zh_glossary.forbidden_renderings(zh, glossary))
    }
    assert not found


def test_package_strings_follow_the_glossary():
    """The package's own Chinese (figure and widget labels, tables, check messages and
    hints) uses the glossary's terms where its English does, keeps the ``kept`` words
    and TRL's names, as the catalogs do."""
    glossary = zh_glossary.load()
    strings = _package_strings()
    found = {
        en: bad
        for en, zh in strings.items()
        if (bad := zh_glossary.violations(en, zh, glossary))
    }
    assert not found


# --------------------------------------------------------------------------------------
# The generated Chinese source
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def zh_source(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("zh_src")
    zh_edition.generate(out)
    return out


def _sets_lang_first(source: str) -> bool:
    body = ast.parse(source).body
    assigns = [
        i
        for i, node in enumerate(body)
        if isinstance(node, ast.Assign)
        and ast.unparse(node.targets[0]) == "os.environ['DPO_GRPO_LANG']"
        and ast.literal_eval(node.value) == "zh"
    ]
    # only `import os` may come before it
    return bool(assigns) and all(
        isinstance(node, ast.Import) and [a.name for a in node.names] == ["os"]
        for node in body[: assigns[0]]
    )


def test_set_up_cell_check_catches_a_late_language_setting():
    assert _sets_lang_first('import os\n\nos.environ["DPO_GRPO_LANG"] = "zh"\nx = 1')
    assert not _sets_lang_first('x = 1\nimport os\nos.environ["DPO_GRPO_LANG"] = "zh"')
    assert not _sets_lang_first("import os\nx = 1")


@pytest.mark.parametrize("stem", NOTEBOOK_STEMS)
def test_chinese_notebook_keeps_the_code_and_sets_the_language(zh_source, stem):
    english = nbformat.read(ROOT / "book" / f"{stem}.ipynb", as_version=4)
    chinese = nbformat.read(zh_source / "book" / f"{stem}.ipynb", as_version=4)
    assert [c.cell_type for c in chinese.cells] == [c.cell_type for c in english.cells]
    for en, zh in zip(english.cells, chinese.cells):
        assert zh.get("id") == en.get("id")
        # the site's label of a solution's toggle is Chinese; the rest is the same
        if "solution" in en.metadata.get("tags", []):
            assert zh.metadata.get("mystnb") == {
                "code_prompt_show": "显示解答",
                "code_prompt_hide": "隐藏解答",
            }, stem
        assert {k: v for k, v in zh.metadata.items() if k != "mystnb"} == {
            k: v for k, v in en.metadata.items() if k != "mystnb"
        }
        if en.cell_type != "code":
            continue
        if zh_edition.SETUP_TAG in en.metadata.get("tags", []):
            assert _sets_lang_first(zh.source), stem
            en_extras, zh_extras = zh_edition.EXTRAS_LINES
            assert zh_extras in zh.source, stem  # installs the zh extra (its font)
            assert zh_edition.FONT_LINES in zh.source, stem  # matplotlib's CJK font
            assert (
                zh.source.replace(zh_edition.LANG_LINES, "")
                .replace(zh_extras, en_extras)
                .replace(zh_edition.FONT_LINES, "")
                == en.source
            )
        else:
            assert zh.source == en.source


@pytest.mark.parametrize("stem", STEMS)
def test_untranslated_pages_say_so_and_translated_ones_are_chinese(zh_source, stem):
    page = next(zh_source.glob(f"book/{stem}.*"))
    text = "\n".join(src for _, src in zh_catalog.markdown_sources(page))
    note = "本页尚未全部译成中文" in text
    assert note == (stem in UNTRANSLATED), stem
    if stem not in UNTRANSLATED:
        han = len(re.findall(r"[\u4e00-\u9fff]", text))
        latin = len(re.findall(r"[A-Za-z]", zh_glossary.prose(text)))
        # the glossary page keeps an English column: a third of the letters Chinese is a
        # clear margin
        assert han > 0.3 * (han + latin), (
            f"{stem}: {han} Chinese characters, {latin} Latin letters"
        )


def test_chinese_config_and_toc(zh_source):
    import yaml

    cfg = yaml.safe_load((zh_source / "_config.yml").read_text(encoding="utf-8"))
    toc = yaml.safe_load((zh_source / "_toc.yml").read_text(encoding="utf-8"))
    assert cfg["title"] == "从 DPO 到 GRPO"
    sphinx_config = cfg["sphinx"]["config"]
    assert sphinx_config["language"] == "zh_CN"
    assert sphinx_config["book_language_switch"]["root"] == "../"
    assert sphinx_config["book_reader_prefix"] == "zh/"
    # jieba's dictionary for the search index: the glossary's terms, each one word
    words = Path(sphinx_config["html_search_options"]["dict"]).read_text("utf-8")
    assert {"价值网络", "组内相对优势", "参考模型"} <= set(words.split())
    assert [p["caption"] for p in toc["parts"]] == [
        "前言",
        "正文",
        "探索与验证",
        "附录与参考",
    ]


def test_language_switch_urls_are_relative_and_symmetric():
    from dpo_grpo_book import language_switch, language_switch_url

    assert language_switch_url("book/01_why", "zh/") == "../zh/book/01_why.html"
    assert language_switch_url("book/01_why", "../") == "../../book/01_why.html"
    assert language_switch_url("genindex", "zh/") == "zh/genindex.html"
    buttons = [{"label": "launch-buttons"}]
    assert language_switch(buttons, "book/01_why", {"label": "中文", "root": "zh/"})
    assert (
        buttons[0]["url"] == "../zh/book/01_why.html" and buttons[0]["text"] == "中文"
    )
    assert not language_switch(buttons, "book/01_why", {})


# --------------------------------------------------------------------------------------
# The built Chinese site and reader edition
# --------------------------------------------------------------------------------------


def _page(html: Path, stem: str) -> BeautifulSoup:
    path = html / "book" / f"{stem}.html"
    assert path.exists(), f"{path} was not built"
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def glued_values(soup: BeautifulSoup) -> Counter:
    """The numbers glued into the page's prose (myst-nb's ``pasted-text`` spans), as a
    multiset; a glued word (English words to translate, or Chinese) is text, which each
    edition writes in its own language (tests/book/test_zh_outputs.py)."""
    return Counter(
        text
        for span in soup.select("span.pasted-text")
        if not (
            needs_translation(text := span.get_text()) or zh_edition.HAN.search(text)
        )
    )


def test_glued_values_are_read_from_the_pasted_spans():
    soup = BeautifulSoup(
        '<p>a <span class="pasted-text">112</span> b <span '
        'class="pasted-text">0.5</span></p>',
        "html.parser",
    )
    assert glued_values(soup) == Counter({"112": 1, "0.5": 1})
    words = BeautifulSoup(
        '<p><span class="pasted-text">cpu with 2 CPUs</span><span class="pasted-text">'
        '全部</span><span class="pasted-text">1.5 GB</span></p>',
        "html.parser",
    )
    assert glued_values(words) == Counter({"1.5 GB": 1})


def test_the_chinese_build_met_no_untranslated_string(built_book):
    """Every string the package's tr() was asked for in the Chinese build's kernels had
    a translation (dpo_grpo.i18n records the others in the file that
    scripts/build_book.py --zh empties and names)."""
    misses = built_book / "zh" / "i18n_misses.txt"
    assert misses.is_file(), f"{misses} missing: the Chinese build recorded no misses"
    text = misses.read_text(encoding="utf-8")
    assert text == "", (
        f"{len(text.splitlines())} strings have no entry in "
        "dpo_grpo/data/i18n/zh.json:\n" + text[:2000]
    )


#: Glued values measured on the building machine (wall times and their shares, tokens
#: per second): any two runs differ, so the two editions' runs do too. Every other glued
#: number must be equal.
MEASURED = {
    "lab_grpo_wall",
    "lab_dpo_wall",
    "lab_rollout_share",
    "lab_train_share",
    "lab_hack_rollout_share",
    "lab_tok_s",
    "lab_page_seconds",
    "lab_sweep_r_short",
    "lab_sweep_r_long",
}


def glued_numbers(executed: Path, stem: str) -> dict[str, float]:
    """The numbers a page glues (myst-nb's ``<stem>.glue.json`` of the executed build),
    by key; figures and other non-numbers (whose text may be Chinese) left out."""
    path = executed / "book" / f"{stem}.glue.json"
    assert path.exists(), f"{path} was not built"
    numbers = {}
    for key, value in json.loads(path.read_text(encoding="utf-8")).items():
        text = value["data"].get("text/plain", "")
        m = re.fullmatch(r"(?:np\.\w+\()?([-+0-9.eE]+|nan|inf)\)?", text.strip())
        if m:
            numbers[key] = float(m.group(1))
    return numbers


def test_glued_numbers_are_read_by_key(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "p.glue.json").write_text(
        json.dumps(
            {
                "a": {"data": {"text/plain": "112.0"}},
                "b": {"data": {"text/plain": "np.float64(0.25)"}},
                "f": {"data": {"text/plain": "<Figure size 640x480 with 1 Axes>"}},
            }
        ),
        encoding="utf-8",
    )
    assert glued_numbers(tmp_path, "p") == {"a": 112.0, "b": 0.25}


@pytest.mark.parametrize("stem", NOTEBOOK_STEMS)
def test_chinese_page_shows_the_english_pages_numbers(built_book, stem):
    english = glued_numbers(built_book / "jupyter_execute", stem)
    chinese = glued_numbers(built_book / "zh" / "_build" / "jupyter_execute", stem)
    differ = {
        k: (english.get(k), chinese.get(k))
        for k in set(english) | set(chinese)
        if k not in MEASURED
        and english.get(k) != chinese.get(k)
        and not (english.get(k) != english.get(k) and chinese.get(k) != chinese.get(k))
    }
    assert differ == {}, f"{stem}: glued numbers (English, Chinese) differ: {differ}"
    # and the prose shows them: as many pasted values, the same ones where nothing
    # measured is glued
    en_page = glued_values(_page(built_book / "html", stem))
    zh_page = glued_values(_page(built_book / "html" / "zh", stem))
    assert sum(zh_page.values()) == sum(en_page.values()), stem
    if not MEASURED & set(english):
        assert zh_page == en_page, (
            f"{stem}: only in English {dict(en_page - zh_page)}, "
            f"only in Chinese {dict(zh_page - en_page)}"
        )


def _switch_target(soup: BeautifulSoup, page: Path) -> Path:
    link = soup.select_one("a.btn-language-switch")
    assert link is not None, f"{page}: no language switch in the header"
    return (page.parent / link["href"]).resolve()


@pytest.mark.parametrize("stem", STEMS)
def test_language_switch_links_the_same_page_both_ways(built_book, stem):
    html = built_book / "html"
    english_page, chinese_page = (
        html / "book" / f"{stem}.html",
        html / "zh" / "book" / f"{stem}.html",
    )
    assert _switch_target(_page(html, stem), english_page) == chinese_page.resolve()
    assert (
        _switch_target(_page(html / "zh", stem), chinese_page) == english_page.resolve()
    )
    assert chinese_page.exists()


@pytest.mark.parametrize("stem", NOTEBOOK_STEMS)
def test_chinese_launch_buttons_open_the_chinese_reader_edition(built_book, stem):
    soup = _page(built_book / "html" / "zh", stem)
    colab = [
        a["href"]
        for a in soup.select("a[href]")
        if "colab.research.google.com" in a["href"]
    ]
    assert colab and all(
        href.endswith(f"/blob/notebooks/zh/{stem}.ipynb") for href in colab
    ), colab


@pytest.fixture(scope="module")
def zh_reader_notebooks(built_book, tmp_path_factory) -> Path:
    """The Chinese reader edition (``make notebooks``), from the Chinese build's
    numbers."""
    out = tmp_path_factory.mktemp("zh-reader-edition")
    source = tmp_path_factory.mktemp("zh-source")
    zh_edition.generate(source)
    reader_edition.build(
        out,
        built_book / "zh" / "_build" / "jupyter_execute",
        execute=False,
        book=source / "book",
        lang="zh",
    )
    return out


@pytest.mark.parametrize("stem", NOTEBOOK_STEMS)
def test_chinese_reader_edition_has_no_myst_and_sets_the_language(
    zh_reader_notebooks, stem
):
    nb = nbformat.read(zh_reader_notebooks / f"{stem}.ipynb", as_version=4)
    leftover = [
        x
        for c in nb.cells
        if c.cell_type == "markdown"
        for x in CHECKS.raw_myst(c.source)
    ]
    assert leftover == [], stem
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    assert _sets_lang_first(first_code.source)
    assert "/notebooks/zh/" in nb.cells[0].source and "读者版" in nb.cells[0].source


@pytest.mark.parametrize("graded", [False, True], ids=["student", "graded"])
def test_chinese_handouts_are_made_from_the_chinese_reader_edition(
    zh_reader_notebooks, tmp_path, graded
):
    """``make student`` also writes the Chinese handouts (``_build/student/zh``): no
    MyST, no solution, their header in Chinese, the language still set first."""
    from dpo_grpo.exercises.student import write_student_edition

    written = write_student_edition(zh_reader_notebooks, tmp_path, graded=graded)
    assert {p.stem for p in written} == set(NOTEBOOK_STEMS)
    for path in written:
        nb = nbformat.read(path, as_version=4)
        markdown = [c.source for c in nb.cells if c.cell_type == "markdown"]
        assert [x for md in markdown for x in CHECKS.raw_myst(md)] == [], path.stem
        assert ("评分版" if graded else "学生版") in markdown[0], path.stem
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert _sets_lang_first(code[0].source), path.stem
        assert not [c for c in code if "solution" in c.metadata.get("tags", [])]
