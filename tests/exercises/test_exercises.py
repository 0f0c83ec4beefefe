"""dpo_grpo.exercises: every reference solution passes its checker, known mistakes fail
with their hint, feedback never contains the solution, and the student edition drops
solution cells."""

import json
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest

from dpo_grpo.exercises import EXERCISES, check
from dpo_grpo.exercises.grade import exercises_in
from dpo_grpo.exercises.student import strip_solutions, write_student_edition

BOOK = Path(__file__).resolve().parents[2] / "book"


@pytest.mark.parametrize("ex_id", sorted(EXERCISES))
def test_reference_solution_passes(ex_id):
    assert check(ex_id, EXERCISES[ex_id].solution())


@pytest.mark.parametrize("ex_id", sorted(EXERCISES))
def test_wrong_answers_fail_without_leaking(ex_id):
    ex = EXERCISES[ex_id]
    if ex.kind == "numeric":
        sol = np.asarray(ex.solution(), dtype=float)
        wrong = sol + 0.37 * (np.abs(sol) + 1)
        fb = check(ex_id, wrong)
        assert not fb and fb.status == "incorrect"
        for s in np.atleast_1d(sol):
            assert f"{s:.4f}" not in fb.message
        for label, (value, hint) in ex.mistakes.items():
            fb = check(ex_id, value() if callable(value) else value)
            assert not fb and hint in fb.message, label
    elif ex.kind == "choice":
        for letter in ex.options:
            if letter != ex.reference:
                fb = check(ex_id, letter)
                assert not fb and f"'{ex.reference}'" not in fb.message
    else:
        fb = check(ex_id, lambda *args: 12345.0)
        assert not fb
        for label, (wrong_fn, hint) in ex.mistakes.items():
            fb = check(ex_id, wrong_fn)
            assert not fb and hint in fb.message, label


def test_not_attempted_and_errors_are_reported():
    ex_id = next(k for k, e in EXERCISES.items() if e.kind == "code")
    assert check(ex_id, None).status == "not attempted"

    def boom(*args):
        raise RuntimeError("student bug")

    fb = check(ex_id, boom)
    assert fb.status == "error" and "student bug" in fb.message
    num = next(k for k, e in EXERCISES.items() if e.kind == "numeric")
    assert check(num, "twelve").status == "incorrect"
    with pytest.raises(ValueError, match="unknown exercise id"):
        check("99.9", 1.0)


def test_answers_are_recorded_as_data_in_the_grader_sandbox(tmp_path, monkeypatch):
    log = tmp_path / "answers.jsonl"
    monkeypatch.setenv("DPO_GRPO_ANSWERS", str(log))
    ex_id = next(k for k, e in EXERCISES.items() if e.kind == "numeric")
    check(ex_id, EXERCISES[ex_id].solution())
    rec = json.loads(log.read_text().splitlines()[-1])
    sol = np.asarray(EXERCISES[ex_id].solution(), dtype=float)
    assert rec == {
        "id": ex_id,
        "answer": {
            "kind": "array",
            "shape": list(sol.shape),
            "data": sol.ravel().tolist(),
        },
    }
    assert "status" not in rec  # the kernel records answers, never verdicts


def _notebooks():
    return sorted(BOOK.glob("*.ipynb"))


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.name)
def test_every_checked_exercise_exists_and_has_a_solution_cell(path):
    nb = nbformat.read(path, as_version=4)
    ids = exercises_in(path)
    for ex_id in ids:
        assert ex_id in EXERCISES, f"{path.name} checks unknown exercise {ex_id}"
    solution_ids = set()
    for cell in nb.cells:
        if "solution" in cell.metadata.get("tags", []):
            assert (
                "hide-cell" in cell.metadata["tags"]
                or "hide-input" in cell.metadata["tags"]
            ), f"{path.name}: solution cells must be hidden behind a toggle"
            solution_ids.update(
                re.findall(r"""check\(\s*["']([^"']+)["']""", cell.source)
            )
    assert solution_ids == set(ids), (
        f"{path.name}: every exercise needs exactly one solution cell"
    )


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.name)
def test_student_edition_has_no_solutions(path):
    nb = nbformat.read(path, as_version=4)
    student = strip_solutions(nb)
    assert all("solution" not in c.metadata.get("tags", []) for c in student.cells)
    assert len(student.cells) == len(nb.cells) - sum(
        "solution" in c.metadata.get("tags", []) for c in nb.cells
    )


def test_the_student_edition_is_made_from_the_reader_edition_only(tmp_path):
    """book/ holds MyST a student would read as raw text: refused, saying what to run
    (tests/exercises/test_student.py makes the editions from the reader edition)."""
    with pytest.raises(ValueError, match="make notebooks"):
        write_student_edition(BOOK, tmp_path)
    with pytest.raises(ValueError, match="reader_dir"):
        write_student_edition(tmp_path / "missing", tmp_path)
