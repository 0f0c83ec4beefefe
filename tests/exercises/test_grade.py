"""The grader on a filled, an empty, a failing and a never-ending student notebook (each
in its own sandbox), its tables, and the verdicts it computes itself from answer records
(dpo_grpo.exercises.core.judge); a class that hands in chapter 3 as the two notebooks it
ships as, graded into one gradebook row per student."""

import csv
import json
import subprocess

import nbformat
import numpy as np
import pytest
from dpo_grpo.exercises import EXERCISES
from testing_support import grade_command
from dpo_grpo.exercises.core import chapter_exercises, grading_cases, judge
from dpo_grpo.exercises.grade import (
    NotebookGrade,
    csv_cell,
    grade_path,
    to_csv,
    to_markdown,
)

#: The tests that run grading sandboxes share one xdist worker: each checks that no
#: sandbox process of its batch outlives grading, which a batch graded at the same time
#: on another worker would confuse.
pytestmark = pytest.mark.xdist_group("sandbox")

NUMERIC = next(k for k, e in EXERCISES.items() if e.kind == "numeric")
CHAPTER = NUMERIC.split(".")[0]
CHOICE = next(
    k for k, e in EXERCISES.items() if e.kind == "choice" and e.chapter == CHAPTER
)
ALL = chapter_exercises(CHAPTER)
OTHERS = {k: "not attempted" for k in ALL if k not in (NUMERIC, CHOICE)}


def _nb(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("students")
    sol_num = repr(np.asarray(EXERCISES[NUMERIC].solution()).tolist())
    head = "from dpo_grpo.exercises import check"
    _nb(
        d / "a_filled.ipynb",
        head,
        f"check({NUMERIC!r}, {sol_num})",
        f"check({CHOICE!r}, {EXERCISES[CHOICE].reference!r})",
    )
    _nb(
        d / "b_empty.ipynb",
        head,
        f"check({NUMERIC!r}, None)",
        f"check({CHOICE!r}, None)",
    )
    _nb(
        d / "c_failing.ipynb",
        head,
        f"check({NUMERIC!r}, 123.0)",
        "del check\nprint('garbage' * 1000)",
        "raise RuntimeError('student crash')",
        f"check({CHOICE!r}, 'a')",
    )
    _nb(
        d / "d_forever.ipynb",
        head,
        f"check({NUMERIC!r}, {sol_num})",
        "while True:\n    pass",
        f"check({CHOICE!r}, {EXERCISES[CHOICE].reference!r})",
    )
    return d


@pytest.fixture(scope="module")
def grades(folder):
    return {g.notebook: g for g in grade_path(folder, timeout=10, jobs=2)}


def test_filled(grades):
    g = grades["a_filled.ipynb"]
    assert (
        g.verdicts == {NUMERIC: "correct", CHOICE: "correct", **OTHERS}
        and g.correct == 2
    )
    # the denominator is every exercise of the chapter, not what the notebook checks
    assert g.score == 2 / len(ALL)


def test_empty(grades):
    assert set(grades["b_empty.ipynb"].verdicts.values()) == {"not attempted"}


def test_failing(grades):
    # the numeric answer is wrong; the choice check sits after a crashing cell and a
    # deleted `check`
    assert grades["c_failing.ipynb"].verdicts == {
        NUMERIC: "incorrect",
        CHOICE: "not reached",
        **OTHERS,
    }


def test_never_ending(grades):
    g = grades["d_forever.ipynb"]
    assert (
        g.verdicts == {NUMERIC: "correct", CHOICE: "timeout", **OTHERS}
        and g.note == "timeout"
    )


def test_tables(grades):
    gs = list(grades.values())
    csv_text, md = to_csv(gs), to_markdown(gs)
    assert f"a_filled.ipynb,SCORE,2/{len(ALL)}" in csv_text
    # names and notes as code spans
    assert f"| `d_forever.ipynb` | SCORE | 1/{len(ALL)} | `timeout` |" in md


def test_cli_appends_rows(folder, tmp_path):
    reports = ["gradebook.csv", "gradebook.md", "summary.csv", "summary.md"]
    out = subprocess.run(
        grade_command(
            folder / "a_filled.ipynb",
            "--timeout",
            "30",
            "--csv",
            str(tmp_path / "g.csv"),
            "--markdown",
            str(tmp_path / "g.md"),
            "--gradebook",
            str(tmp_path / reports[0]),
            "--gradebook",
            str(tmp_path / reports[1]),
            "--summary",
            str(tmp_path / reports[2]),
            "--summary",
            str(tmp_path / reports[3]),
        ),
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert (
        f"score {2 / len(ALL):.0%}" in out.stdout
        and "sandbox:" in out.stderr
        and "1/1" in out.stderr
    )
    assert (tmp_path / "g.csv").read_text().count(",correct,") == 2
    assert (tmp_path / "g.md").read_text().count("| correct |") == 2
    (row,) = csv.DictReader((tmp_path / "gradebook.csv").open())
    assert row["score"] == f"2/{len(ALL)}" and float(row["seconds"]) > 0
    assert row[NUMERIC] == row[CHOICE] == "correct"
    assert f"| {NUMERIC} | 1/1 |" in (tmp_path / "summary.md").read_text()
    assert "| student | score | seconds |" in out.stdout  # the gradebook, printed
    bad = subprocess.run(
        grade_command(folder, "--gradebook", tmp_path / "g.txt"),
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "--gradebook" in bad.stderr


def test_bad_path(tmp_path):
    with pytest.raises(ValueError, match="path"):
        grade_path(tmp_path / "nope.txt")
    with pytest.raises(ValueError, match="chapter"):
        grade_path(_nb(tmp_path / "none.ipynb", "x = 1"), chapter="99")


def test_judge_compares_with_the_key():
    ex = EXERCISES[NUMERIC]
    sol = np.asarray(ex.solution(), dtype=float)
    rec = {"kind": "array", "shape": list(sol.shape), "data": sol.ravel().tolist()}
    assert judge(ex, rec) == "correct"
    assert judge(ex, dict(rec, data=(sol.ravel() + 1.0).tolist())) == "incorrect"
    assert judge(ex, {"kind": "array", "shape": [10**9], "data": []}) == "incorrect"
    assert judge(ex, {"kind": "none"}) == judge(ex, "garbage") == "not attempted"
    assert (
        judge(
            EXERCISES[CHOICE],
            {"kind": "str", "value": f" {EXERCISES[CHOICE].reference.upper()} "},
        )
        == "correct"
    )
    code_id = next(k for k, e in EXERCISES.items() if e.kind == "code")
    cex = EXERCISES[code_id]
    cases = grading_cases(cex, np.random.default_rng(0))
    assert len(cases) > len(cex.cases) or cex.draw is None
    outs = [
        {
            "kind": "array",
            "shape": list(np.shape(cex.reference(*c))),
            "data": np.asarray(cex.reference(*c), dtype=float).ravel().tolist(),
        }
        for c in cases
    ]
    assert judge(cex, {"kind": "function", "outputs": outs}, cases) == "correct"
    assert judge(cex, {"kind": "function", "outputs": outs[:-1]}, cases) == "incorrect"
    assert (
        judge(
            cex, {"kind": "function", "outputs": outs[:-1] + [{"kind": "error"}]}, cases
        )
        == "error"
    )
    assert (
        judge(cex, {"kind": "array", "shape": [], "data": [1.0]}, cases) == "incorrect"
    )


def test_cells_are_escaped():
    assert (
        csv_cell("=HYPERLINK(1)") == "'=HYPERLINK(1)"
        and csv_cell("-1+1") == "'-1+1"
        and csv_cell("@x") == "'@x"
    )
    assert csv_cell("+1") == "'+1" and csv_cell("a=1") == "a=1"
    g = NotebookGrade("x|y\n.ipynb", {"01.1": "correct"}, "note | with\npipe")
    rows = to_markdown([g]).splitlines()[2:]
    # four cells per row, whatever the name and the note hold
    assert all(r.count(" | ") == 3 for r in rows)


def test_every_code_exercise_draws_fresh_inputs():
    rng = np.random.default_rng(15)
    for ex_id, ex in EXERCISES.items():
        if ex.kind == "code":
            drawn = grading_cases(ex, rng)[len(ex.cases) :]
            assert len(drawn) == 3, ex_id
            for args in drawn:
                # the reference digests what the grader draws
                np.asarray(ex.reference(*args), dtype=float)


# --- chapter 3, handed in as the two notebooks it ships as ----------------------------

CH03 = chapter_exercises("03")
PART_A = ["03.1", "03.2", "03.3", "03.4", "03.5"]  # 03_derivations
PART_B = [i for i in CH03 if i not in PART_A]  # 03c_kl_term
GRADED = "from dpo_grpo.exercises.record import check"


@pytest.fixture(scope="module")
def chapter3(tmp_path_factory):
    """alice: the first notebook in the self-check edition, saved without ``outputs``
    keys, 03.1 answered then its cell run again with None; the second in the graded
    edition, 03.6 answered, the rest untouched. bob: the second notebook untouched, in
    a folder of his own."""
    d = tmp_path_factory.mktemp("chapter3")
    right = repr(np.asarray(EXERCISES["03.1"].solution()).tolist())
    first = nbformat.v4.new_notebook()
    first.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    first.cells = [
        nbformat.v4.new_code_cell(s)
        for s in (
            "from dpo_grpo.exercises import check",
            f"check('03.1', {right})",
            "check('03.1', None)",
            *(f"check({i!r}, None)" for i in PART_A[1:]),
        )
    ]
    raw = json.loads(nbformat.writes(first))
    for cell in raw["cells"]:
        del cell["outputs"]
    (d / "alice_03_derivations.ipynb").write_text(json.dumps(raw))
    untouched = [f"check({i!r}, None)" for i in PART_B if i != "03.6"]
    _nb(d / "alice_03c_kl_term.ipynb", GRADED, "check('03.6', 'b')", *untouched)
    (d / "bob").mkdir()
    _nb(
        d / "bob" / "03c_kl_term.ipynb",
        GRADED,
        "check('03.6', None)",
        *untouched,
    )
    return {g.notebook: g for g in grade_path(d, timeout=60, jobs=2)}


def test_each_notebook_of_a_split_chapter_is_graded_on_its_own_exercises(chapter3):
    assert sorted(chapter3) == [
        "alice_03_derivations.ipynb",
        "alice_03c_kl_term.ipynb",
        "bob/03c_kl_term.ipynb",
    ]
    first = chapter3["alice_03_derivations.ipynb"]
    # no outputs keys, and a re-run with None: the answer stands
    assert first.verdicts == {
        "03.1": "correct",
        **{i: "not attempted" for i in PART_A[1:]},
    }, first.note
    second = chapter3["alice_03c_kl_term.ipynb"]
    assert list(second.verdicts) == PART_B and second.correct == 1
    untouched = chapter3["bob/03c_kl_term.ipynb"]
    # the graded edition's untouched answers are not attempted, not "not reached"
    assert set(untouched.verdicts.values()) == {"not attempted"}, untouched.note
    assert all(g.seconds > 0 for g in chapter3.values())


def test_a_students_notebooks_make_one_gradebook_row(chapter3):
    from dpo_grpo.exercises.report import gradebook

    alice, bob = gradebook(chapter3.values())
    assert (alice.student, alice.correct, len(alice.verdicts)) == ("alice", 2, 14)
    assert (bob.student, bob.correct, list(bob.verdicts)) == ("bob", 0, CH03)
