"""What a built page embeds for its exercises (``dpo_grpo_book.exercises``): the
self-check key entries of its numeric and multiple-choice exercises, hints and messages
in the page's language, read without touching the process's language; the messages are
still the ones ``check`` prints. (The page's answers themselves are compared with
``check`` in Chromium: tests/browser/test_page_exercises.py.)"""

from __future__ import annotations

import json
import os
import re
import string
from pathlib import Path

import dpo_grpo.exercises
import pytest
from dpo_grpo.exercises._selfcheck_key import KEY
from dpo_grpo.i18n import catalog
from dpo_grpo_book import exercises as page
from testing_support import literal_strings

EXERCISES_DIR = Path(dpo_grpo.exercises.__file__).resolve().parent


def _fields(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


def test_the_page_says_what_check_says():
    missing = {
        k: v
        for k, v in page.MESSAGES.items()
        if v not in literal_strings(EXERCISES_DIR)
    }
    assert not missing, f"no longer a message of dpo_grpo.exercises: {missing}"


def test_both_languages_have_the_forms_words_with_the_same_fields():
    assert set(page.UI["en"]) == set(page.UI["zh"])
    for name, text in page.UI["en"].items():
        assert _fields(text) == _fields(page.UI["zh"][name]), name
        assert re.search(r"[\u4e00-\u9fff]", page.UI["zh"][name]), name


def _ids(kind):
    return sorted(k for k, e in KEY.items() if e["kind"] == kind)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_page_embeds_its_numeric_and_choice_entries_in_its_language(
    lang, monkeypatch
):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    ids = _ids("numeric")[:2] + _ids("choice")[:2] + _ids("code")[:1] + ["99.9"]
    data = page.page_key(ids, lang)
    assert "DPO_GRPO_LANG" not in os.environ  # nothing leaks into the build
    assert data["lang"] == lang and data["ui"] == page.UI[lang]
    assert list(data["exercises"]) == ids[:4]
    zh = catalog("zh")
    for name, text in page.MESSAGES.items():
        assert data["messages"][name] == (text if lang == "en" else zh[text])
    for ex_id, entry in data["exercises"].items():
        key = KEY[ex_id]
        if key["kind"] == "choice":
            hints = {h: (t if lang == "en" else zh[t]) for h, t in key["hints"].items()}
            assert entry == {**key, "hints": hints}
        else:
            assert [m["hint"] for m in entry["mistakes"]] == [
                m["hint"] if lang == "en" else zh[m["hint"]] for m in key["mistakes"]
            ]
            assert entry == {
                **key,
                "mistakes": [
                    {**m, "hint": e["hint"]}
                    for m, e in zip(key["mistakes"], entry["mistakes"])
                ],
            }
    assert page.page_key(_ids("code")[:3], lang) is None


def test_the_ids_are_read_from_the_check_calls():
    cells = [
        'answer = None  # a float\ncheck("04.2", answer)',
        "check('04.3', leave_one_out)",
        'x = 1\ncheck( "04.2" , 0.5)',
        "print('no check here')",
    ]
    assert page.checked_ids(cells) == ["04.2", "04.3"]


def test_a_page_of_the_graded_edition_gives_no_feedback():
    from dpo_grpo.exercises.student import GRADED_IMPORT, SELF_CHECK_IMPORT

    assert page.gives_feedback([SELF_CHECK_IMPORT, 'check("04.2", answer)'])
    assert not page.gives_feedback(["import numpy as np", GRADED_IMPORT])


def test_the_embedded_json_cannot_close_its_script():
    data = {"hint": "</script><script>alert(1)</script> & <!-- 中文"}
    html = page.json_script(data)
    body = re.fullmatch(
        r'<script type="application/json" id="book-exercise-key">(.*)</script>\n',
        html,
        flags=re.S,
    ).group(1)
    assert "<" not in body and ">" not in body
    assert json.loads(body) == data
    assert "中文" in body  # the CJK font subset reads the page's characters


def test_the_page_language_follows_the_sphinx_language():
    assert page.page_language("zh_CN") == "zh"
    assert page.page_language(None) == "en"
    assert page.page_language("en") == "en"
