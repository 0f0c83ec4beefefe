"""The package's Chinese edition (:mod:`dpo_grpo.i18n`): the language switch, ``tr``'s formatting and fallback,
and the catalog ``data/i18n/zh.json``: every English string the package passes to ``tr`` (or marks with ``N_``),
and every exercise hint ``check`` prints, has a Chinese entry with the same fields; no entry is stale."""

from __future__ import annotations

import ast
import json
import re
import string
from pathlib import Path

import pytest

import dpo_grpo
from dpo_grpo import i18n
from dpo_grpo.i18n import N_, language, tr

PACKAGE = Path(dpo_grpo.__file__).resolve().parent
CATALOG = PACKAGE / "data" / "i18n" / "zh.json"
HAN = re.compile(r"[\u4e00-\u9fff]")


def literal_strings(root: Path = PACKAGE) -> dict[str, str]:
    """English text -> 'file:line' of every string literal passed as first argument to ``tr`` or ``N_``."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("tr", "N_")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.setdefault(
                    node.args[0].value, f"{path.relative_to(root)}:{node.lineno}"
                )
    return found


def exercise_hints() -> set[str]:
    """The hints and explanations ``check`` prints (read from the self-check key it reads them from)."""
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


# --- language() and tr() ----------------------------------------------------------------------------------------


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


def test_a_missing_translation_falls_back_to_english(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    assert tr("no such string {n}", n=1) == "no such string 1"


def test_a_translation_with_broken_fields_falls_back_to_english(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    monkeypatch.setitem(i18n.catalog("zh"), "x = {v}", "x 等于 {w}")
    assert tr("x = {v}", v=1) == "x = 1"


def test_catalog_rejects_english_and_unknown_languages():
    with pytest.raises(ValueError, match="lang must be"):
        i18n.catalog("en")
    with pytest.raises(ValueError, match="lang must be"):
        i18n.catalog("fr")


# --- the catalog --------------------------------------------------------------------------------------------------


def test_every_wrapped_string_and_exercise_hint_has_a_chinese_entry(zh):
    used = literal_strings()
    missing = {t: where for t, where in used.items() if t not in zh}
    missing |= {h: "exercise hint" for h in exercise_hints() if h not in zh}
    assert not missing, (
        f"{len(missing)} English strings have no entry in {CATALOG.name}: "
        + "; ".join(f"{where}: {t!r}" for t, where in sorted(missing.items())[:10])
    )


def test_no_catalog_entry_is_stale(zh):
    used = set(literal_strings()) | exercise_hints()
    stale = sorted(set(zh) - used)
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
    """The guard itself: a module that passes an untranslated literal to tr() is found."""
    (tmp_path / "m.py").write_text(
        'from dpo_grpo.i18n import tr\nx = tr("a label nobody translated")\n',
        encoding="utf-8",
    )
    found = literal_strings(tmp_path)
    assert found == {"a label nobody translated": "m.py:2"}
    assert "a label nobody translated" not in zh


def test_the_catalog_is_read_from_the_package():
    assert CATALOG.is_file()
    assert i18n.catalog("zh") == json.loads(CATALOG.read_text(encoding="utf-8"))
