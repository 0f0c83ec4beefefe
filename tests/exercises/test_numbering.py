"""How the exercises are laid out on the pages of the book: on every page the ids run
k, k+1, ... without a gap (a chapter shipped as two pages continues on its second page
where the first stops), the levels never fall, each heading states the registry's kind
and level, and no question states its own answer."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from dpo_grpo.exercises import EXERCISES
from dpo_grpo.exercises.core import NOTEBOOKS, chapter_exercises, notebook_exercises
from dpo_grpo.exercises.grade import exercises_in

BOOK = Path(__file__).resolve().parents[2] / "book"
HEADING = re.compile(r"^\*\*Exercise (\d\d)\.(\d+)\*\* \(([^)]*)\)\.", re.MULTILINE)
KINDS = {"numeric": "numeric", "choice": "multiple choice", "code": "coding"}
LEVELS = {1: "level 1: recall/compute", 2: "level 2: apply", 3: "level 3: derive"}


def _questions(path) -> list[tuple[str, str, str]]:
    """(id, what the heading says in brackets, the question's Markdown) for each
    exercise of the page at ``path``, in page order."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    found = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"])
        for m in HEADING.finditer(source):
            found.append((f"{m.group(1)}.{m.group(2)}", m.group(3), source))
    return found


PAGES = [p for p in sorted(BOOK.glob("*.ipynb")) if _questions(p)]
QUESTIONS = {i: text for p in PAGES for i, _, text in _questions(p)}


def _number(ex_id: str) -> int:
    return int(ex_id.split(".")[1])


def test_the_pages_with_exercises_are_the_notebooks_the_grader_knows():
    assert [p.stem for p in PAGES] == sorted(NOTEBOOKS)


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_ids_run_without_a_gap_on_each_page(path):
    ids = [i for i, _, _ in _questions(path)]
    numbers = [_number(i) for i in ids]
    assert numbers == list(range(numbers[0], numbers[0] + len(ids))), ids
    assert len({i.split(".")[0] for i in ids}) == 1, ids
    # the answer cells check the exercises the headings announce, in the same order
    assert exercises_in(path) == ids
    assert sorted(notebook_exercises(path.stem), key=_number) == ids


@pytest.mark.parametrize("chapter", sorted({i.split(".")[0] for i in EXERCISES}))
def test_each_chapter_is_numbered_from_1_across_its_pages(chapter):
    pages = [p for p in PAGES if _questions(p)[0][0].startswith(chapter + ".")]
    ids = [i for p in pages for i, _, _ in _questions(p)]
    assert [_number(i) for i in ids] == list(range(1, len(ids) + 1)), ids
    assert sorted(chapter_exercises(chapter), key=_number) == ids


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_levels_ascend_on_each_page_as_the_headings_state(path):
    levels = []
    for ex_id, said, _ in _questions(path):
        ex = EXERCISES[ex_id]
        expected = KINDS[ex.kind]
        if ex.level is not None:
            expected += ", " + LEVELS[ex.level]
        assert said == expected, ex_id
        levels.append(ex.level)
    if any(lv is not None for lv in levels):
        assert levels == sorted(levels), levels


def test_chapter_3_has_at_least_four_dpo_exercises():
    assert len(notebook_exercises("03_derivations")) >= 4


def _figures(value: float, digits: int) -> float:
    return float(f"{value:.{digits}g}")


NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _stated(text: str, value: float) -> bool:
    """Whether ``text`` writes ``|value|`` rounded to 3 or 4 significant figures."""
    targets = {_figures(abs(value), d) for d in (3, 4)}
    return any(float(tok) in targets for tok in NUMBER.findall(text))


NUMERIC = sorted(k for k, e in EXERCISES.items() if e.kind == "numeric")


@pytest.mark.parametrize("ex_id", NUMERIC)
def test_no_question_states_its_numeric_answer(ex_id):
    ex = EXERCISES[ex_id]
    values = [float(v) for v in np.ravel(ex.solution()) if v != 0 and np.isfinite(v)]
    for text in (ex.prompt, QUESTIONS[ex_id]):
        assert not [v for v in values if _stated(text, v)], text


@pytest.mark.parametrize("ex_id", sorted(EXERCISES))
def test_no_question_hands_out_the_result_to_show(ex_id):
    """'Show that f = g, and evaluate it at ...' states the answer as a formula."""
    for text in (EXERCISES[ex_id].prompt, QUESTIONS[ex_id]):
        assert "show that" not in text.lower(), text


def test_the_answer_check_sees_a_stated_answer():
    assert _stated("the loss is $0.6731$ here", 0.673079)
    assert _stated("a ratio of 1.185", -1.1848835)
    assert not _stated("rewards [0.2, 0.8, 1.4, 0.6] and eps = 1e-4", 0.673079)
    assert not _stated("exercise 03.1", 3.1234)
