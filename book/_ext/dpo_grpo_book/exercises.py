"""Answers on the page, no kernel: the self-check of the numeric and multiple-choice
exercises on the built site.

A page whose code cells call ``check("04.2", ...)`` gets, when it is written
(``html-page-context``), the self-check key entries of its numeric and multiple-choice
exercises: the same ``KEY`` data :func:`dpo_grpo.exercises.check` reads (hashes,
exponents, offsets, shapes: no answer), with the hints and the check's messages in the
page's language, as JSON in a ``<script type="application/json">`` (id
``book-exercise-key``) at the end of the article; and it loads ``static/exercises.js``
and ``static/exercises.css``, on those pages only. The script puts a small form under
each such exercise's answer cell and answers with the verdict and the words ``check``
prints in a notebook, by the rule of the docstring of
:mod:`dpo_grpo.exercises.selfcheck` (SHA-256 included). Coding exercises are left to
the kernel. ``tests/browser/test_page_exercises.py`` compares the page with Python's
``check`` on the same answers in both editions.

A page built from the graded edition (its code imports the graded ``check``, which
gives no feedback: ``dpo_grpo.exercises.student.GRADED_IMPORT``) gets no key and no
form. A page built from the student edition gets them: its key is the one the student
edition's package holds.

The messages are read from the catalog for the edition's language
(:func:`dpo_grpo.i18n.translate`), so building the Chinese edition needs no
``DPO_GRPO_LANG`` in the build's environment and leaves none behind.
"""

from __future__ import annotations

import json
import re

#: The exercises a cell checks: ``check("04.2", answer)`` (answer cells and solutions).
CHECK_CALL = re.compile(r"\bcheck\(\s*[\"']([^\"']+)[\"']")
#: The kinds the page answers; a coding exercise needs the reader's function, run.
PAGE_KINDS = ("numeric", "choice")
EXERCISES_JS, EXERCISES_CSS = "exercises.js", "exercises.css"
KEY_ELEMENT_ID = "book-exercise-key"

#: What ``check`` says, as :mod:`dpo_grpo.exercises.feedback`, ``.selfcheck`` and
#: ``.core`` (``Feedback``'s line) pass it to ``tr``, by the name exercises.js uses.
#: ``tests/exercises/test_page_key.py`` fails when one of them is no longer theirs.
MESSAGES = {
    "exercise": "Exercise {id}: {message}",
    "correct": "correct.",
    "notQuite": "not quite. {hint}",
    "notThisOne": "not this one. {hint}",
    "reread": "Reread the section and try again.",
    "notNumbers": "expected a number or an array of numbers, got {type}",
    "shape": "expected shape {want}, got {got}",
    "nonFinite": "your answer contains NaN or inf",
    "closeOne": (
        "close, but not within the tolerance ({tols}): keep more significant figures."
    ),
    "outsideOne": "not within the tolerance ({tols}). Recheck your computation.",
    "closeMany": (
        "close, but not within the tolerance at positions {which} of {n} ({tols}): "
        "keep more significant figures."
    ),
    "outsideMany": (
        "not within the tolerance at positions {which} of {n} ({tols}). Recheck your "
        "computation."
    ),
}

#: The form's own words (the page's, not the package's: no notebook shows them).
UI = {
    "en": {
        "number": "Your answer: a number",
        "numbers": "Your answer: {n} numbers, separated by commas or spaces",
        "array": "Your answer: an array of shape {shape}, as nested [...] lists",
        "choice": "Your answer",
        "check": "Check",
        "note": "A self-check in your browser: not a grade, nothing is recorded.",
        "empty": "Type your answer first.",
        "choose": "Choose a letter first.",
        "unreadable": "Type a number, or numbers separated by commas or spaces.",
    },
    "zh": {
        "number": "你的答案：一个数",
        "numbers": "你的答案：{n} 个数，用逗号或空格分隔",
        "array": "你的答案：形状为 {shape} 的数组，写成嵌套的 [...] 列表",
        "choice": "你的答案",
        "check": "检查",
        "note": "在浏览器里自测：不计分，不记录任何内容。",
        "empty": "请先输入答案。",
        "choose": "请先选一个字母。",
        "unreadable": "请输入一个数，或用逗号或空格分隔的几个数。",
    },
}


def page_language(config_language) -> str:
    """``"zh"`` for the Chinese edition (``language: zh_CN``), else ``"en"``."""
    return "zh" if str(config_language or "").startswith("zh") else "en"


def checked_ids(texts) -> list[str]:
    """The exercise ids the code ``texts`` pass to ``check``, first seen first."""
    seen = {}
    for text in texts:
        for m in CHECK_CALL.finditer(text):
            seen.setdefault(m.group(1), None)
    return list(seen)


def gives_feedback(texts) -> bool:
    """Whether code ``texts`` use the self-check, not the graded edition's ``check``."""
    from dpo_grpo.exercises.student import GRADED_IMPORT

    return not any(GRADED_IMPORT in text for text in texts)


def page_entry(entry: dict, lang: str) -> dict:
    """A key entry with its hints in ``lang``."""
    from dpo_grpo.i18n import translate

    out = json.loads(json.dumps(entry))  # a copy: the key is shared by the pages
    if out["kind"] == "choice":
        out["hints"] = {h: translate(hint, lang) for h, hint in out["hints"].items()}
    else:
        for m in out["mistakes"]:
            m["hint"] = translate(m["hint"], lang)
    return out


def page_key(ids, lang: str, key: dict | None = None) -> dict | None:
    """What a page with the exercises ``ids`` embeds: its numeric and multiple-choice
    entries of the self-check key, the messages and the form's words in ``lang``;
    None when it has no such exercise."""
    from dpo_grpo.i18n import translate

    if key is None:
        from dpo_grpo.exercises._selfcheck_key import KEY as key
    entries = {
        i: page_entry(key[i], lang)
        for i in ids
        if i in key and key[i]["kind"] in PAGE_KINDS
    }
    if not entries:
        return None
    return {
        "lang": lang,
        "messages": {name: translate(text, lang) for name, text in MESSAGES.items()},
        "ui": UI[lang],
        "exercises": entries,
    }


def json_script(data: dict, element_id: str = KEY_ELEMENT_ID) -> str:
    """``data`` as a ``<script type="application/json">`` that no text in it can
    close."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{element_id}">{text}</script>\n'


def embed_page_key(app, pagename, templatename, context, doctree):
    """``html-page-context``: on a page with numeric or multiple-choice exercises, their
    key as JSON at the end of the article, and the script and style sheet that answer
    them."""
    if doctree is None or getattr(app.builder, "format", None) != "html":
        return
    from docutils import nodes

    blocks = getattr(doctree, "findall", doctree.traverse)(nodes.literal_block)
    code = [b.astext() for b in blocks]
    if "body" not in context or not gives_feedback(code):
        return
    data = page_key(checked_ids(code), page_language(app.config.language))
    if data is None:
        return
    context["body"] += json_script(data)
    # the builder's lists are reset for every page: these load on this page only
    app.builder.add_css_file(EXERCISES_CSS)
    app.builder.add_js_file(EXERCISES_JS, defer="defer")
