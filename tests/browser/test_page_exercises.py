"""Answers on the page, no kernel: every numeric and multiple-choice exercise of both
editions is answered on the built site (``static/exercises.js``, from the page's
entries of the hashed key) with the verdict and the words of Python's
``dpo_grpo.exercises.check`` on the same answer, in the page's language.

In headless Chromium at a phone's 390 x 844, served from 127.0.0.1 with every other
host blocked, one tab for all the pages of an edition: under each exercise's answer
cell the test types answers into the form (the first of each exercise with
Playwright's keyboard and taps, the others through the form's own field and button)
and compares the page's verdict line with ``repr(check(id, answer))`` computed here
(``DPO_GRPO_LANG=zh`` for the Chinese pages). The answers: the reference rounded to
four significant figures (right); the reference times ``1 + 3 rtol`` and plus
``3 atol``; ``±0.99 w`` and ``±1.01 w`` of each tolerance ``w`` (``tolerance.py``'s:
``Exercise.tolerance()``) and of the "close" tier's; one value beyond its tolerance;
a far value; each registered mistake's value (its hint); a wrong shape, ragged lists,
NaN and infinity; every letter of a choice question (the right one, the explained
wrong ones, the others). Each page is then checked for a phone: nothing wider than
the screen, tap targets at least 44 px high.

The page's SHA-256 and its Python-style tolerance text (``f"{w:.3g}"``) are compared
with ``hashlib`` and Python on known vectors and edge lengths.

Reads the one book build of the test run (the ``built_book`` fixture).
"""

from __future__ import annotations

import functools
import hashlib
import re

import numpy as np
import pytest

pytestmark = pytest.mark.browser

from testing_support import (  # noqa: E402
    local_only_route,
    skip_without_chromium,
)

skip_without_chromium()  # skips the module where Chromium or Playwright is missing

EDITIONS = {"en": "", "zh": "zh/"}
PHONE = (390, 844)
#: what exercises.js answers; a coding exercise needs the kernel
PAGE_KINDS = ("numeric", "choice")
#: an exercise's answer cell: no solution, and it checks ``answer``
ANSWER_CELL = re.compile(r"\bcheck\(\s*[\"']([^\"']+)[\"']\s*,\s*answer\s*\)")
MIN_TAP = 44

#: the answers of one exercise, typed through its form; returns the verdict lines
ANSWER_ALL = """([id, answers]) => {
  const form = document.querySelector(`form.book-exercise[data-exercise="${id}"]`);
  const input = form.querySelector('input.book-exercise-input');
  const line = form.querySelector('.book-exercise-verdict');
  return answers.map(a => {
    if (input) {
      input.value = a;
    } else {
      form.querySelector(`input[type=radio][value="${a}"]`).checked = true;
    }
    form.querySelector('button.book-exercise-check').click();
    return line.textContent;
  });
}"""

#: a phone's page: wider than the screen, and tap targets smaller than MIN_TAP
PHONE_LAYOUT = """(minTap) => {
  const vw = document.documentElement.clientWidth;
  const out = [];
  if (document.documentElement.scrollWidth > vw) {
    out.push(`the page is ${document.documentElement.scrollWidth} px wide`);
  }
  for (const form of document.querySelectorAll('form.book-exercise')) {
    const id = form.dataset.exercise;
    const r = form.getBoundingClientRect();
    if (r.left < 0 || r.right > vw) out.push(`${id}: the form sticks out (${r.right})`);
    const targets = form.querySelectorAll(
      'input.book-exercise-input, button, label.book-exercise-option');
    for (const t of targets) {
      const b = t.getBoundingClientRect();
      if (b.height < minTap) {
        out.push(`${id}: ${t.tagName.toLowerCase()} is ${b.height} px high`);
      }
      if (b.right > vw) out.push(`${id}: ${t.tagName.toLowerCase()} sticks out`);
    }
  }
  return out;
}"""


def page_exercises(path) -> list[str]:
    """The numeric and multiple-choice exercises whose answer cell is on the built page
    ``path``, in page order."""
    from bs4 import BeautifulSoup
    from dpo_grpo.exercises import EXERCISES

    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    found = []
    for cell in soup.select("div.cell"):
        code = cell.select_one(".cell_input pre")
        m = code and ANSWER_CELL.search(code.get_text())
        if (
            m
            and "tag_solution" not in cell.get("class", [])
            and m.group(1) in EXERCISES
            and EXERCISES[m.group(1)].kind in PAGE_KINDS
            and m.group(1) not in found
        ):
            found.append(m.group(1))
    return found


def typed(value, style: int = 0) -> str:
    """``value`` (a number or an array) as a reader types it: Python's repr of each
    number, an array's values separated by ``", "``, ``" "``, ``"，"`` or in
    brackets (by ``style``; an array of one value always in brackets); nested arrays in
    nested brackets."""
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        return repr(float(arr))
    if arr.ndim > 1:
        return "[" + ", ".join(typed(a, 3) for a in arr) + "]"
    items = [repr(float(v)) for v in arr]
    if len(items) < 2:  # without brackets, one number is a number
        style = 3
    return [
        ", ".join(items),
        " ".join(items),
        "，".join(items),
        f"[{', '.join(items)}]",
    ][style % 4]


@functools.cache
def mistake_values(ex_id: str) -> list[np.ndarray]:
    """The values of an exercise's registered mistakes that are arrays of numbers."""
    from dpo_grpo.exercises import EXERCISES

    out = []
    for value, _ in EXERCISES[ex_id].mistakes.values():
        try:
            out.append(np.asarray(value() if callable(value) else value, dtype=float))
        except (TypeError, ValueError):
            continue
    return out


def numeric_answers(ex_id: str) -> list[tuple[str, object]]:
    """``(typed text, the same answer in Python)`` for numeric exercise ``ex_id``."""
    from dpo_grpo.exercises import EXERCISES
    from dpo_grpo.exercises.tolerance import close_tolerance, exponents, steps

    ex = EXERCISES[ex_id]
    sol = np.asarray(ex.solution(), dtype=float)
    w = np.asarray(ex.tolerance(), dtype=float)
    w_close = steps(exponents(sol, *close_tolerance(ex.rtol, ex.atol)))
    w_close = w_close.reshape(sol.shape)
    flat = sol.ravel()
    values = [
        np.vectorize(lambda v: float(f"{v:.4g}"))(sol).reshape(sol.shape),  # right
        sol * (1 + 3 * ex.rtol),
        sol + 3 * ex.atol,
        *(sol + f * w for f in (0.99, -0.99, 1.01, -1.01)),  # either side of the edge
        *(sol + f * w_close for f in (0.99, -1.01)),  # the "close" tier's edge
        sol * 1.5 + 1,
        *mistake_values(ex_id),
        # a wrong shape: one value more (a number) or one fewer (an array)
        flat[:1] if sol.ndim == 0 else flat[:-1],
        np.where(np.arange(flat.size) == 0, np.nan, flat).reshape(sol.shape),
        np.where(np.arange(flat.size) == 0, -np.inf, flat).reshape(sol.shape),
    ]
    if sol.size > 1:  # one value beyond its tolerance, the others right
        one = flat.copy()
        one[-1] += 1.01 * w.ravel()[-1]
        values.append(one.reshape(sol.shape))
    answers = [(typed(v, k), v.tolist()) for k, v in enumerate(values)]
    return [*answers, ("[1, [2, 3]]", [1, [2, 3]])]  # ragged: NumPy refuses it


def choice_answers(ex_id: str) -> list[tuple[str, str]]:
    from dpo_grpo.exercises import EXERCISES

    return [(k, k) for k in sorted(EXERCISES[ex_id].options)]


def python_line(ex_id: str, answer) -> str:
    from dpo_grpo.exercises import check

    return repr(check(ex_id, answer))


def _tab(browser, site):
    context = browser.new_context(
        viewport={"width": PHONE[0], "height": PHONE[1]}, has_touch=True
    )
    page = context.new_page()
    errors, blocked = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    page.route("**/*", local_only_route(site, blocked))
    return context, page, errors, blocked


def _answer_first(page, ex_id: str, kind: str, text: str) -> str:
    """One answer as a reader gives it: typed on the keyboard (or the letter
    tapped), then a tap on Check."""
    form = page.locator(f'form.book-exercise[data-exercise="{ex_id}"]')
    if kind == "choice":
        form.locator(f'input[type=radio][value="{text}"]').tap()
    else:
        field = form.locator("input.book-exercise-input")
        field.fill("")
        field.press_sequentially(text)
    form.locator("button.book-exercise-check").tap()
    line = form.locator(".book-exercise-verdict:not(:empty)")
    line.wait_for()  # a tap's click comes after the touch events
    return line.text_content()


@pytest.mark.parametrize("edition", sorted(EDITIONS))
def test_the_page_answers_as_python_checks(
    browser, site, built_book, edition, monkeypatch
):
    from dpo_grpo.exercises import EXERCISES

    monkeypatch.delenv("DPO_GRPO_ANSWERS", raising=False)
    monkeypatch.delenv("DPO_GRPO_CASES", raising=False)
    if edition == "zh":
        monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    else:
        monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    html = built_book / "html" / EDITIONS[edition] / "book"
    pages = {p.name: page_exercises(p) for p in sorted(html.glob("*.html"))}
    pages = {name: ids for name, ids in pages.items() if ids}
    expected = {k for k, e in EXERCISES.items() if e.kind in PAGE_KINDS}
    on_pages = {i for ids in pages.values() for i in ids}
    assert on_pages == expected, (
        f"answer cells on no page: {sorted(expected - on_pages)}; "
        f"unknown: {sorted(on_pages - expected)}"
    )
    context, page, errors, blocked = _tab(browser, site)
    failures, checked = [], 0
    for name, ids in pages.items():
        page.goto(f"{site}/{EDITIONS[edition]}book/{name}", wait_until="load")
        forms = page.eval_on_selector_all(
            "form.book-exercise", "fs => fs.map(f => f.dataset.exercise)"
        )
        if forms != ids:
            failures.append(f"{name}: forms for {forms}, exercises {ids}")
            continue
        for ex_id in ids:
            kind = EXERCISES[ex_id].kind
            answers = (
                numeric_answers(ex_id) if kind == "numeric" else choice_answers(ex_id)
            )
            lines = [_answer_first(page, ex_id, kind, answers[0][0])]
            lines += page.evaluate(ANSWER_ALL, [ex_id, [t for t, _ in answers[1:]]])
            for (text, answer), line in zip(answers, lines):
                want = python_line(ex_id, answer)
                checked += 1
                if line != want:
                    failures.append(f"{name} {ex_id} {text!r}: {line!r} != {want!r}")
        failures += [f"{name}: {p}" for p in page.evaluate(PHONE_LAYOUT, MIN_TAP)]
        failures += [f"{name}: console: {e}" for e in errors]
        errors.clear()
    context.close()
    assert blocked == [], f"requests left the machine: {blocked[:5]}"
    assert not failures, f"{len(failures)} of {checked} answers:\n" + "\n".join(
        failures[:40]
    )


#: SHA-256 test vectors (FIPS 180-4 examples)
KNOWN = {
    "": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "abc": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq": (
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    ),
}


def test_the_pages_sha256_tolerances_and_reading_are_pythons(browser, site, built_book):
    from dpo_grpo.exercises import EXERCISES

    context, page, errors, blocked = _tab(browser, site)
    page.goto(f"{site}/book/04_code.html", wait_until="load")
    texts = [
        *KNOWN,
        *("a" * n for n in range(130)),  # every padding case, up to three blocks
        "dpo_grpo selfcheck 04.2",
        "练习 ü é 😀",
        "x" * 1_000_000,
    ]
    got = page.evaluate("ts => ts.map(t => window.bookExercises.sha256(t))", texts)
    for text, digest in KNOWN.items():
        assert hashlib.sha256(text.encode()).hexdigest() == digest
    want = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
    wrong = [t[:20] for t, g, w in zip(texts, got, want) if g != w]
    assert not wrong, f"SHA-256 differs on {wrong}"
    exps = list(range(-80, 81))
    shown = page.evaluate("es => es.map(window.bookExercises.toleranceText)", exps)
    assert shown == [f"{2.0**e:.3g}" for e in exps]
    # what a reader types, read as np.asarray reads the same numbers
    read = {
        "0.25": [],
        "1e-3, -2, .5": [3],
        "1 2 3 4": [4],
        "1，2、3": [3],
        "[0.5]": [1],
        "[[1, 2], [3, 4], [5, 6]]": [3, 2],
        "(1, 2)": [2],
        "[]": [0],
    }
    shapes = page.evaluate(
        "ts => ts.map(t => window.bookExercises.parse(t).shape)", list(read)
    )
    assert dict(zip(read, shapes)) == read
    refused = page.evaluate(
        "ts => ts.map(t => window.bookExercises.parse(t))",
        ["abc", "1,,2", "[1, 2", "0x10"],
    )
    assert refused == [None] * 4
    assert page.evaluate("() => window.bookExercises.parse('[1, [2, 3]]')") == {
        "ragged": True
    }
    # no answer, or no number: the form says what to type (a notebook has no such case)
    ids = page_exercises(built_book / "html" / "book" / "04_code.html")
    numeric = next(i for i in ids if EXERCISES[i].kind == "numeric")
    form = page.locator(f'form.book-exercise[data-exercise="{numeric}"]')
    for text, status in (("", "not attempted"), ("about 0.3", "unreadable")):
        form.locator("input.book-exercise-input").fill(text)
        form.locator("button.book-exercise-check").tap()
        # times out, and fails, unless the line says so
        form.locator(f'.book-exercise-verdict[data-status="{status}"]').wait_for()
    context.close()
    assert not errors and not blocked, (errors, blocked)
