"""The package's Chinese edition (:mod:`dpo_grpo.i18n`): the language switch, ``tr``'s
formatting and fallback, and the catalog ``data/i18n/zh.json``: every English string the
package passes to ``tr`` (or marks with ``N_``), and every exercise hint ``check``
prints, has a Chinese entry with the same fields; no entry is stale."""

from __future__ import annotations

import ast
import json
import re
import string
from pathlib import Path

import dpo_grpo
import pytest
from dpo_grpo import i18n
from dpo_grpo.i18n import N_, language, tr
from dpo_grpo.tables import translatable_header
from testing_support import literal_strings

PACKAGE = Path(dpo_grpo.__file__).resolve().parent
CATALOG = PACKAGE / "data" / "i18n" / "zh.json"
BOOK = Path(__file__).resolve().parents[2] / "book"
HAN = re.compile(r"[\u4e00-\u9fff]")


def _header_strings(node, cell: ast.Module, assigned: dict):
    """The strings (and f-strings, as nodes) a ``columns`` argument names: list items, a
    list assigned in the cell, ``*starred`` lists, comprehension items;
    ``list(rows[0])`` or none: the keys of the cell's dict literals."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.JoinedStr):
        yield node
    elif isinstance(node, (ast.List, ast.Tuple)):
        for e in node.elts:
            yield from _header_strings(e, cell, assigned)
    elif isinstance(node, ast.Starred):
        yield from _header_strings(node.value, cell, assigned)
    elif isinstance(node, ast.ListComp):
        yield from _header_strings(node.elt, cell, assigned)
    elif isinstance(node, ast.Name) and isinstance(
        assigned.get(node.id), (ast.List, ast.Tuple)
    ):
        yield from _header_strings(assigned[node.id], cell, assigned)
    elif node is None or isinstance(node, (ast.Call, ast.Name)):
        for d in ast.walk(cell):
            keys = (
                d.keys
                if isinstance(d, ast.Dict)
                else [d.key]
                if isinstance(d, ast.DictComp)
                else []
            )
            for key in keys:
                if isinstance(key, (ast.Constant, ast.JoinedStr)):
                    yield from _header_strings(key, cell, assigned)


def _is_table_call(node) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "tables"
        and node.func.attr in ("markdown_table", "html_table")
    )


def _code_cells(book: Path, needle: str):
    """``(where, syntax tree)`` of each code cell of ``book/*.ipynb`` whose source
    contains ``needle`` (IPython's ``%`` and ``!`` lines left out)."""
    for nb in sorted(book.glob("*.ipynb")):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        for k, cell in enumerate(cells):
            src = "".join(cell["source"])
            if cell["cell_type"] == "code" and needle in src:
                lines = src.splitlines()
                code = "\n".join(
                    "" if s.lstrip().startswith(("%", "!")) else s for s in lines
                )
                yield f"{nb.name} cell {k}", ast.parse(code)


def notebook_table_headers(book: Path = BOOK):
    """``(headers, patterns, constants)`` of the code cells of ``book/*.ipynb`` that
    call ``tables.*``: header text -> where, regexes of f-string headers, and every
    string constant of those cells (row labels)."""
    headers, patterns, constants = {}, set(), set()
    for where, tree in _code_cells(book, "tables."):
        assigned = {
            t.id: n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                constants.add(node.value)
            if not _is_table_call(node):
                continue
            kw = {k.arg: k.value for k in node.keywords}
            cols = node.args[1] if len(node.args) > 1 else kw.get("columns")
            found = list(_header_strings(cols, tree, assigned))
            if isinstance(kw.get("headers"), ast.Dict):
                for value in kw["headers"].values:
                    found += _header_strings(value, tree, assigned)
            for s in found:
                if isinstance(s, str):
                    headers.setdefault(s, where)
                else:
                    patterns.add(
                        "".join(
                            re.escape(p.value) if isinstance(p, ast.Constant) else ".+"
                            for p in s.values
                        )
                    )
    return headers, patterns, constants


def notebook_tr_strings(book: Path = BOOK) -> dict[str, str]:
    """English text -> where, of every string literal a code cell of ``book/*.ipynb``
    passes to ``tr`` (the labels of a figure the page draws itself)."""
    found = {}
    for where, tree in _code_cells(book, "tr("):
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "tr"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.setdefault(node.args[0].value, where)
    return found


def exercise_hints() -> set[str]:
    """The hints and explanations ``check`` prints (read from the self-check key it
    reads them from)."""
    from dpo_grpo.exercises._selfcheck_key import KEY

    hints = set()
    for entry in KEY.values():
        hints.update(m["hint"] for m in entry.get("mistakes", ()))
        hints.update(entry.get("hints", {}).values())
    return hints


def fields(text: str) -> list[str]:
    return sorted(
        name for _, name, _, _ in string.Formatter().parse(text) if name is not None
    )


@pytest.fixture(scope="module")
def zh():
    return json.loads(CATALOG.read_text(encoding="utf-8"))


# --- language() and tr() --------------------------------------------------------------


def test_language_defaults_to_english(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    assert language() == "en"
    monkeypatch.setenv("DPO_GRPO_LANG", "")
    assert language() == "en"


def test_language_is_read_at_each_call(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    assert language() == "zh"
    monkeypatch.setenv("DPO_GRPO_LANG", "en")
    assert language() == "en"


@pytest.mark.parametrize("bad", ["fr", "ZH", "zh-CN", "english"])
def test_a_bad_language_names_the_variable_and_the_choices(monkeypatch, bad):
    monkeypatch.setenv("DPO_GRPO_LANG", bad)
    with pytest.raises(ValueError, match=r"DPO_GRPO_LANG must be one of en, zh"):
        language()
    with pytest.raises(ValueError, match="DPO_GRPO_LANG"):
        tr("step")


def test_tr_in_english_formats_the_text_itself(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    assert tr("clip ε = {eps:.2f}", eps=0.2) == "clip ε = 0.20"
    # without fields the text comes back untouched: plotly's %{x} needs no escaping
    assert tr("step %{x}: %{y:.4f}<extra>") == "step %{x}: %{y:.4f}<extra>"
    assert N_("step") == "step"
    with pytest.raises(TypeError, match="text must be a str"):
        tr(3)


def test_tr_in_chinese_translates_then_formats(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    out = tr("test case {j} of {n} gives a different result.", j=2, n=3)
    assert HAN.search(out) and "2" in out and "3" in out
    assert tr("correct.") != "correct."


@pytest.mark.parametrize("env", ["en", "zh", None])
def test_translate_speaks_the_language_it_is_given_whatever_the_environment(
    monkeypatch, env
):
    if env is None:
        monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    else:
        monkeypatch.setenv("DPO_GRPO_LANG", env)
    text = "test case {j} of {n} gives a different result."
    assert i18n.translate(text, "en", j=2, n=3) == text.format(j=2, n=3)
    assert i18n.translate(text, "zh", j=2, n=3) == i18n.catalog("zh")[text].format(
        j=2, n=3
    )
    assert i18n.translate("correct.", "zh") == i18n.catalog("zh")["correct."]
    assert language() == (env or "en")  # nothing set, nothing changed
    with pytest.raises(ValueError, match="lang must be one of en, zh"):
        i18n.translate("correct.", "fr")


def test_a_missing_translation_falls_back_to_english(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    assert tr("no such string {n}", n=1) == "no such string 1"


def test_a_missing_translation_is_recorded_once_when_asked(monkeypatch, tmp_path):
    misses = tmp_path / "misses.txt"
    monkeypatch.setattr(i18n, "_RECORDED", set())
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    monkeypatch.delenv("DPO_GRPO_I18N_MISSES", raising=False)
    tr("not recorded without the variable")
    assert not misses.exists()
    monkeypatch.setenv("DPO_GRPO_I18N_MISSES", str(misses))
    tr("no entry {n}", n=1)
    tr("no entry {n}", n=2)
    tr("two\nlines")
    tr("correct.")  # translated: not a miss
    assert misses.read_text(encoding="utf-8") == "no entry {n}\ntwo\\nlines\n"
    # English is never a miss
    monkeypatch.setenv("DPO_GRPO_LANG", "en")
    tr("an English-only string")
    assert "English-only" not in misses.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "text",
    [
        "GRPO",
        "DPO",
        "δ",
        "G",
        "p",
        "β",
        "Δ",
        "τ",
        "lr",
        "k3",
        "num_iterations",
        "steps_per_generation",
        "已翻译的 logits 文本",
    ],
)
def test_symbols_acronyms_and_code_names_are_no_miss(monkeypatch, tmp_path, text):
    """The last Chinese build recorded these: nothing in them needs a translation."""
    misses = tmp_path / "misses.txt"
    monkeypatch.setattr(i18n, "_RECORDED", set())
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    monkeypatch.setenv("DPO_GRPO_I18N_MISSES", str(misses))
    assert tr(text) == text
    assert not misses.exists()
    assert not i18n.needs_translation(text)


@pytest.mark.parametrize(
    "text", ["step", "a new label", "clip (ε)", "PPO loss", "lr sweep"]
)
def test_english_words_still_need_a_translation(text):
    assert i18n.needs_translation(text)


def test_a_translation_with_broken_fields_falls_back_to_english(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    monkeypatch.setitem(i18n.catalog("zh"), "x = {v}", "x 等于 {w}")
    assert tr("x = {v}", v=1) == "x = 1"


def test_catalog_rejects_english_and_unknown_languages():
    with pytest.raises(ValueError, match="lang must be"):
        i18n.catalog("en")
    with pytest.raises(ValueError, match="lang must be"):
        i18n.catalog("fr")


# --- the catalog ----------------------------------------------------------------------


def test_every_wrapped_string_and_exercise_hint_has_a_chinese_entry(zh):
    used = literal_strings(PACKAGE) | notebook_tr_strings()
    missing = {t: where for t, where in used.items() if t not in zh}
    missing |= {h: "exercise hint" for h in exercise_hints() if h not in zh}
    assert not missing, (
        f"{len(missing)} English strings have no entry in {CATALOG.name}: "
        + "; ".join(f"{where}: {t!r}" for t, where in sorted(missing.items())[:10])
    )


def test_no_catalog_entry_is_stale(zh):
    headers, patterns, constants = notebook_table_headers()
    used = set(literal_strings(PACKAGE)) | exercise_hints() | set(headers) | constants
    used |= set(notebook_tr_strings())
    stale = sorted(
        t for t in set(zh) - used if not any(re.fullmatch(p, t) for p in patterns)
    )
    assert not stale, (
        f"{len(stale)} entries of {CATALOG.name} no code uses: {stale[:10]}"
    )


def test_translations_are_chinese_and_keep_the_fields(zh):
    for en, cn in zh.items():
        assert isinstance(cn, str) and cn.strip(), en
        assert HAN.search(cn), f"not translated: {en!r} -> {cn!r}"
        assert fields(cn) == fields(en), f"fields differ: {en!r} -> {cn!r}"
        # plotly's hover markup survives the translation
        assert sorted(re.findall(r"%\{[^}]*\}|<extra>|</extra>|<br>", cn)) == sorted(
            re.findall(r"%\{[^}]*\}|<extra>|</extra>|<br>", en)
        ), f"hover markup differs: {en!r} -> {cn!r}"


def test_the_collector_sees_a_new_untranslated_string(tmp_path, zh):
    """The guard itself: a module that passes an untranslated literal to tr() is
    found."""
    (tmp_path / "m.py").write_text(
        'from dpo_grpo.i18n import tr\nx = tr("a label nobody translated")\n',
        encoding="utf-8",
    )
    found = literal_strings(tmp_path)
    assert found == {"a label nobody translated": "m.py:2"}
    assert "a label nobody translated" not in zh


def test_every_table_header_a_notebook_passes_has_a_chinese_entry(zh):
    """The tables layer translates headers at render time (dpo_grpo.tables.header_text),
    so the notebooks' English header literals need entries; code names and symbols stay
    as written."""
    headers, _, _ = notebook_table_headers()
    assert len(headers) > 100
    missing = {
        t: where
        for t, where in headers.items()
        if translatable_header(t) and t not in zh
    }
    assert not missing, (
        f"{len(missing)} table headers of book/*.ipynb have no entry in "
        f"{CATALOG.name}: "
        + "; ".join(f"{where}: {t!r}" for t, where in sorted(missing.items())[:10])
    )


def _write_notebook(path: Path, source: str) -> None:
    """A notebook of one code cell holding ``source``, for the collectors' own tests."""
    nb = {"cells": [{"cell_type": "code", "source": [source], "metadata": {}}]}
    path.write_text(json.dumps(nb), encoding="utf-8")


def test_the_notebook_collector_sees_a_new_header(tmp_path, zh):
    """The guard itself: a header literal, a header from a list variable and a row-dict
    key are all found."""
    src = (
        "cols = ['a new header', 'loss_type']\n"
        "rows = [{'a new row key': 1, f'per token: {x}': 2}]\n"
        "display(Markdown(tables.markdown_table(rows, cols)))\n"
        "display(HTML(tables.html_table(rows, ['another header'])))\n"
        "display(Markdown(tables.markdown_table(rows, list(rows[0]))))\n"
    )
    _write_notebook(tmp_path / "x.ipynb", src)
    headers, patterns, _ = notebook_table_headers(tmp_path)
    assert set(headers) == {
        "a new header",
        "loss_type",
        "another header",
        "a new row key",
    }
    assert [p for p in patterns if re.fullmatch(p, "per token: right, long")]
    assert translatable_header("a new header") and not translatable_header("loss_type")
    assert "a new header" not in zh


def test_the_notebook_collector_sees_a_label_passed_to_tr(tmp_path, zh):
    """The guard itself: a figure label a notebook cell passes to tr() is found, and a
    string it leaves alone is not."""
    src = (
        "from dpo_grpo.i18n import tr\n"
        "%matplotlib inline\n"
        "ax.set_title(tr('a title nobody translated'))\n"
        "ax.set_xlabel(tr('{n} steps', n=3)); ax.plot(x, label='left alone')\n"
    )
    _write_notebook(tmp_path / "x.ipynb", src)
    assert notebook_tr_strings(tmp_path) == {
        "a title nobody translated": "x.ipynb cell 0",
        "{n} steps": "x.ipynb cell 0",
    }
    assert "a title nobody translated" not in zh


def test_the_catalog_is_read_from_the_package():
    assert CATALOG.is_file()
    assert i18n.catalog("zh") == json.loads(CATALOG.read_text(encoding="utf-8"))


def test_pad_counts_the_columns_of_a_monospaced_font():
    """A Chinese character takes two columns, so ``f"{text:<6}"`` would leave a Chinese
    header two columns short per character."""
    assert i18n.display_width("GRPO 优势") == 9
    assert i18n.pad("优势", 6) == "优势  " and i18n.pad("优势", 6, ">") == "  优势"
    assert i18n.pad("ab", 5, "^") == " ab  " and i18n.pad("ab", 5) == f"{'ab':<5}"
    assert i18n.pad("超过宽度", 3) == "超过宽度"


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: i18n.pad("x", -1), ValueError, "width must be an int >= 0"),
        (lambda: i18n.pad("x", 2.0), ValueError, "width"),
        (lambda: i18n.pad("x", True), ValueError, "width"),
        (lambda: i18n.pad("x", 2, "left"), ValueError, "align must be"),
        (lambda: i18n.display_width(3), TypeError, "text must be a str"),
    ],
)
def test_pad_names_a_bad_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize(
    "n, digits, en, zh",
    [
        # chapter 5's LoRA adapters: 32 x 4 x (2 x 4096 x 16) parameters
        (16_777_216, 1, "16.8 million", "1,680 万"),
        (16_777_216, 2, "16.78 million", "1,678 万"),
        (168_435_456, 1, "168.4 million", "1.684 亿"),
        (7e9, 1, "7.0 billion", "70 亿"),
        (7_241_000_000, 2, "7.24 billion", "72.4 亿"),
        # rounded to 1,000 million: billions, and the same number in Chinese
        (999_960_000, 1, "1.0 billion", "10 亿"),
        (1_234_567_890_123, 1, "1,234.6 billion", "12,346 亿"),
    ],
)
def test_large_count_says_the_same_number_in_each_languages_units(n, digits, en, zh):
    assert i18n.large_count(n, digits, lang="en") == en
    assert i18n.large_count(n, digits, lang="zh") == zh
    # the English is the number str.format prints
    assert en.split()[0] == f"{n / (1e9 if 'billion' in en else 1e6):,.{digits}f}"


def test_large_count_speaks_the_readers_language(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    assert i18n.large_count(16_777_216) == "16.8 million"
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    assert i18n.large_count(16_777_216) == "1,680 万"
    assert "百万" not in i18n.large_count(16_777_216)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: i18n.large_count("16"), TypeError, "n must be a real number"),
        (lambda: i18n.large_count(True), TypeError, "n must be a real number"),
        (lambda: i18n.large_count(-1), ValueError, "n must be a finite count"),
        (lambda: i18n.large_count(float("nan")), ValueError, "finite"),
        (lambda: i18n.large_count(1e7, -1), ValueError, "digits must be an int"),
        (lambda: i18n.large_count(1e7, 1.0), ValueError, "digits"),
        (lambda: i18n.large_count(1e7, lang="fr"), ValueError, "lang must be one"),
    ],
)
def test_large_count_names_a_bad_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()
