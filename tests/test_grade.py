"""The grader on a filled, an empty, a failing and a never-ending student notebook (each in its own kernel)."""

import subprocess
import sys

import nbformat
import numpy as np
import pytest

from dpo_grpo.exercises import EXERCISES
from dpo_grpo.exercises.grade import grade_notebook, grade_path, to_csv, to_markdown

NUMERIC = next(k for k, e in EXERCISES.items() if e.kind == "numeric")
CHOICE = next(k for k, e in EXERCISES.items() if e.kind == "choice")


def _nb(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("students")
    sol_num = repr(np.asarray(EXERCISES[NUMERIC].solution()).tolist())
    head = "from dpo_grpo.exercises import check"
    _nb(d / "a_filled.ipynb", head, f"check({NUMERIC!r}, {sol_num})",
        f"check({CHOICE!r}, {EXERCISES[CHOICE].reference!r})")
    _nb(d / "b_empty.ipynb", head, f"check({NUMERIC!r}, None)", f"check({CHOICE!r}, None)")
    _nb(d / "c_failing.ipynb", head, f"check({NUMERIC!r}, 123.0)", "del check\nprint('garbage' * 1000)",
        "raise RuntimeError('student crash')", f"check({CHOICE!r}, 'a')")
    _nb(d / "d_forever.ipynb", head, f"check({NUMERIC!r}, {sol_num})", "while True:\n    pass",
        f"check({CHOICE!r}, {EXERCISES[CHOICE].reference!r})")
    return d


@pytest.fixture(scope="module")
def grades(folder):
    return {g.notebook: g for g in grade_path(folder, timeout=15)}


def test_filled(grades):
    g = grades["a_filled.ipynb"]
    assert g.verdicts == {NUMERIC: "correct", CHOICE: "correct"} and g.score == 1.0


def test_empty(grades):
    assert set(grades["b_empty.ipynb"].verdicts.values()) == {"not attempted"}


def test_failing(grades):
    # the numeric answer is wrong; the choice check sits after a crashing cell and a deleted `check`
    assert grades["c_failing.ipynb"].verdicts == {NUMERIC: "incorrect", CHOICE: "not reached"}


def test_never_ending(grades):
    g = grades["d_forever.ipynb"]
    assert g.verdicts == {NUMERIC: "correct", CHOICE: "timeout"} and g.note == "timeout"


def test_tables(grades):
    gs = list(grades.values())
    csv_text, md = to_csv(gs), to_markdown(gs)
    assert "a_filled.ipynb,SCORE,2/2" in csv_text and "| d_forever.ipynb | SCORE | 1/2 | timeout |" in md


def test_cli(folder, tmp_path):
    out = subprocess.run([sys.executable, "-m", "dpo_grpo.exercises", "grade", str(folder / "a_filled.ipynb"),
                          "--timeout", "30", "--csv", str(tmp_path / "g.csv")], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "score 100%" in out.stdout and (tmp_path / "g.csv").read_text().count("correct") == 2


def test_bad_path(tmp_path):
    with pytest.raises(ValueError, match="path"):
        grade_path(tmp_path / "nope.txt")
    assert grade_notebook(_nb(tmp_path / "none.ipynb", "x = 1")).verdicts == {}
