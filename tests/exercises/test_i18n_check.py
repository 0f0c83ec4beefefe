"""``check`` in the Chinese edition (DPO_GRPO_LANG=zh): its fixed messages and each
exercise's hints come out in Chinese; in English they are unchanged."""

from __future__ import annotations

import re

from dpo_grpo.exercises import check
from dpo_grpo.exercises.record import check as graded_check

HAN = re.compile(r"[\u4e00-\u9fff]")


def _wrong_letter(exercise_id):
    for letter in "abcd":
        fb = check(exercise_id, letter)
        if fb.status == "incorrect":
            return letter, fb
    raise AssertionError("no wrong letter")


def test_check_in_english_is_unchanged(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    fb = check("01.1", None)
    assert repr(fb) == (
        "… Exercise 01.1: replace None with your answer and run the cell again."
    )
    _, fb = _wrong_letter("01.3")
    assert fb.message.startswith("not this one. ") and not HAN.search(fb.message)
    assert check("01.1", [1, 2]).message == "expected shape (), got (2,)"


def test_check_in_chinese(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    fb = check("01.1", None)
    assert repr(fb) == "… 练习 01.1：把 None 换成你的答案，再运行这个单元格。"
    letter, fb = _wrong_letter("01.3")
    # the hint of that wrong letter, in Chinese
    assert fb.message.startswith("不是这个。") and HAN.search(fb.message[5:])
    assert check("01.1", [1, 2]).message == "形状应为 ()，得到的是 (2,)"
    assert graded_check("01.1", None).message.startswith("把 None 换成")


def test_a_numeric_mistake_hint_in_chinese(monkeypatch):
    """01.1's first registered mistake (decimal GB instead of GiB) gets its own hint,
    translated."""
    from dpo_grpo.exercises.core import registry

    ex = registry()["01.1"]
    value, hint = next(iter(ex.mistakes.values()))
    value = value() if callable(value) else value
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    assert check("01.1", value).message == f"not quite. {hint}"
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    msg = check("01.1", value).message
    assert msg.startswith("不太对。") and HAN.search(msg[len("不太对。") :])
