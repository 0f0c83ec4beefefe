"""The grade report a teacher reads, built without running a sandbox: which exercises
each submitted notebook is graded on (chapters 3 and 5 ship as two notebooks), whose
notebook it is, the gradebook (one row per student), the class summary per exercise,
the diagnosis in the notes, and notebooks loaded without failing an honest student for
what the grader discards (outputs)."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from dpo_grpo.exercises import EXERCISES, core, grade, reading
from dpo_grpo.exercises.core import chapter_exercises

BOOK = Path(__file__).resolve().parents[2] / "book"
CH03 = chapter_exercises("03")
PART_A = ["03.1", "03.2", "03.3", "03.4", "03.5"]  # 03_derivations
PART_B = [i for i in CH03 if i not in PART_A]  # 03c_kl_term


@pytest.fixture(autouse=True)
def _english(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)


@pytest.fixture
def report():
    from dpo_grpo.exercises import report

    return report


def _nb(*sources):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    return nb


def _checks(*ids):
    return _nb(*[f"check({i!r}, None)" for i in ids])


# --- which exercises a notebook is graded on, and whose it is -------------------------


def test_every_shipped_notebook_is_known_with_the_exercises_it_holds():
    for path in sorted(BOOK.glob("*.ipynb")):
        ids = grade.exercises_in(path)
        if ids:
            assert sorted(core.notebook_exercises(path.stem)) == sorted(ids), path.name
    assert core.notebook_exercises("03_derivations") == PART_A
    assert core.notebook_exercises("03c_kl_term") == PART_B
    with pytest.raises(ValueError, match="stem"):
        core.notebook_exercises("99_nothing")


def test_a_split_chapter_notebook_is_graded_on_the_exercises_it_ships_with():
    name = "alice.ipynb"
    assert grade.graded_exercises(_checks(*PART_A), name, "03") == PART_A
    assert grade.graded_exercises(_checks(*PART_B), name, "03") == PART_B
    # deleting check cells does not shrink the denominator
    assert grade.graded_exercises(_checks("03.8"), name, "03") == PART_B
    # one notebook holding both parts, or none of its checks: the whole chapter
    assert grade.graded_exercises(_checks("03.1", "03.8"), name, "03") == CH03
    assert grade.graded_exercises(_nb("x = 1"), name, "03") == CH03
    # no check left: the file's name tells which notebook it was
    assert grade.graded_exercises(_nb("x = 1"), "a_03c_kl_term.ipynb", "03") == (PART_B)
    assert grade.graded_exercises(_checks("04.1"), name, "04") == chapter_exercises(
        "04"
    )
    with pytest.raises(ValueError, match="chapter"):
        grade.graded_exercises(_nb(), name, "99")


@pytest.mark.parametrize(
    "name, student",
    [
        ("alice_03_derivations.ipynb", "alice"),
        ("alice-03c_kl_term.ipynb", "alice"),
        ("Alice Smith 03C_KL_term.ipynb", "Alice Smith"),
        ("bob/03_derivations.ipynb", "bob"),
        ("bob/anything.ipynb", "bob"),
        ("carol.ipynb", "carol"),
        ("04_code.ipynb", "class"),  # only the book's name: the folder's
    ],
)
def test_a_student_is_the_folder_or_the_name_without_the_book_notebook(name, student):
    assert grade.student_of(name, "class") == student


def test_bad_arguments_are_named(report):
    from dpo_grpo.exercises.tolerance import within

    with pytest.raises(TypeError, match="name"):
        grade.student_of(None)
    with pytest.raises(TypeError, match="name"):
        grade.graded_exercises(_nb(), 3, "03")
    with pytest.raises(TypeError, match="grades"):
        report.gradebook([{"notebook": "x.ipynb"}])
    with pytest.raises(ValueError, match="ref"):
        within(1.0, float("nan"), 1e-3, 1e-6)


def test_student_folders_are_graded_and_hidden_folders_are_not(tmp_path):
    for rel in (
        "alice_03_derivations.ipynb",
        "bob/03_derivations.ipynb",
        "bob/.ipynb_checkpoints/03_derivations-checkpoint.ipynb",
        ".hidden/x.ipynb",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(_checks("03.1"), tmp_path / rel)
    found = [p.relative_to(tmp_path).as_posix() for p in grade.notebooks_in(tmp_path)]
    assert found == ["alice_03_derivations.ipynb", "bob/03_derivations.ipynb"]


# --- the answer model -----------------------------------------------------------------


def test_a_none_record_never_erases_an_answer():
    right = {"kind": "str", "value": "b"}
    none = {"kind": "none"}
    answers, untouched = grade.last_answers(
        [
            {"id": "04.4", "answer": right},
            {"id": "04.4", "answer": none},  # the cell run again, answer reset
            {"id": "04.1", "answer": none},
            {"id": "04.2", "status": "correct"},  # not an answer
        ]
    )
    assert answers == {"04.4": right} and untouched == {"04.1", "04.2"}


def test_the_graded_edition_records_an_untouched_answer(tmp_path, monkeypatch):
    """So that the grader tells an untouched answer (``not attempted``) from a check
    that never ran (``not reached``)."""
    from dpo_grpo.exercises.record import check

    log = tmp_path / "answers.jsonl"
    monkeypatch.setenv("DPO_GRPO_ANSWERS", str(log))
    assert check("04.1", None).status == "not attempted"
    assert [json.loads(x) for x in log.read_text().splitlines()] == [
        {"id": "04.1", "answer": {"kind": "none"}}
    ]


# --- the diagnosis in the notes -------------------------------------------------------


def _array(x):
    x = np.asarray(x, dtype=float)
    return {"kind": "array", "shape": list(x.shape), "data": x.ravel().tolist()}


def test_the_notes_hold_the_self_checks_diagnosis():
    ex = EXERCISES["04.2"]
    value, hint = ex.mistakes["ddof 0"]
    got = core.diagnose(ex, _array(value() if callable(value) else value))
    assert (got.status, got.message, got.mistake) == (
        "incorrect",
        f"not quite. {hint}",
        hint,
    )
    sol = np.asarray(ex.solution(), dtype=float)
    close = core.diagnose(ex, _array(sol + 4 * np.asarray(ex.tolerance())))
    assert close.status == "incorrect" and close.message.startswith("close, but")
    assert "keep more significant figures" in close.mistake
    assert core.diagnose(ex, _array([1.0, 2.0])).message == (
        "expected shape (4,), got (2,)"
    )
    assert core.diagnose(ex, {"kind": "none"}).status == "not attempted"
    choice = EXERCISES["04.4"]
    wrong = core.diagnose(choice, {"kind": "str", "value": "a"})
    assert wrong.message == f"not this one. {choice.explanations['a']}"
    assert core.diagnose(choice, {"kind": "str", "value": "B "}).status == "correct"


def test_a_coding_exercise_is_diagnosed_on_the_graded_cases():
    ex = EXERCISES["04.3"]
    cases = [tuple(c) for c in ex.cases]
    fn, hint = ex.mistakes["centred"]
    outs = [_array(fn(*c)) for c in cases]
    got = core.diagnose(ex, {"kind": "function", "outputs": outs}, cases)
    assert got.status == "incorrect" and got.message == f"test case 1 fails. {hint}"
    error = {"kind": "error", "message": "ZeroDivisionError: division by zero"}
    got = core.diagnose(
        ex, {"kind": "function", "outputs": [error] * len(cases)}, cases
    )
    assert got.status == "error" and got.message == (
        "your function raised ZeroDivisionError on test case 1: division by zero"
    )


# --- the gradebook and the class summary ----------------------------------------------


def _g(name, student, verdicts, seconds=10.0, note="", notes=None, mistakes=None):
    return grade.NotebookGrade(
        name,
        verdicts,
        note,
        seconds,
        student=student,
        chapter="03",
        notes=notes or {},
        mistakes=mistakes or {},
    )


@pytest.fixture
def grades():
    hint = EXERCISES["03.1"].mistakes["sign"][1]
    return [
        _g(
            "alice_03_derivations.ipynb",
            "alice",
            {"03.1": "correct", "03.5": "incorrect"},
            12.0,
            notes={"03.5": "close, but not within the tolerance ±0.000977"},
        ),
        _g(
            "alice_03c_kl_term.ipynb",
            "alice",
            {i: "correct" if i == "03.6" else "not attempted" for i in PART_B},
            30.5,
        ),
        _g(
            "bob/03c_kl_term.ipynb",
            "bob",
            {i: "not attempted" for i in PART_B},
            8.0,
        ),
        _g(
            "carol_03_derivations.ipynb",
            "carol",
            {"03.1": "incorrect", "03.5": "timeout"},
            150.0,
            note="timeout",
            notes={"03.1": f"not quite. {hint}"},
            mistakes={"03.1": hint},
        ),
        _g(
            "dan_03_derivations.ipynb",
            "dan",
            {"03.1": "incorrect", "03.5": "correct"},
            notes={"03.1": f"not quite. {hint}"},
            mistakes={"03.1": hint},
        ),
    ]


def test_the_gradebook_has_one_row_per_student_over_the_whole_chapter(grades, report):
    book = report.gradebook(grades)
    assert [s.student for s in book] == ["alice", "bob", "carol", "dan"]
    alice, bob, carol, _ = book
    assert list(alice.verdicts) == CH03 and (alice.correct, len(alice.verdicts)) == (
        2,
        14,
    )
    assert alice.seconds == pytest.approx(42.5)
    assert [g.notebook for g in alice.notebooks] == [
        "alice_03_derivations.ipynb",
        "alice_03c_kl_term.ipynb",
    ]
    # bob handed in only the second notebook: the first's exercises are not attempted
    assert bob.verdicts["03.1"] == "not attempted" and "no notebook" in bob.notes[0]
    assert carol.verdicts["03.5"] == "timeout" and "timeout" in carol.notes[0]


def test_an_exercise_answered_in_two_notebooks_counts_the_lower_mark(grades, report):
    grades.append(
        _g("alice_extra.ipynb", "alice", {"03.1": "incorrect", "03.5": "correct"})
    )
    alice = report.gradebook(grades)[0]
    assert alice.verdicts["03.1"] == "incorrect"
    assert any("03.1" in n and "2 notebooks" in n for n in alice.notes)


def test_the_class_summary_counts_each_exercise_and_its_commonest_mistake(
    grades, report
):
    hint = EXERCISES["03.1"].mistakes["sign"][1]
    rows = {r["exercise"]: r for r in report.class_summary(report.gradebook(grades))}
    assert list(rows) == CH03
    assert rows["03.1"]["correct"] == "1/4" and rows["03.1"]["incorrect"] == 2
    assert rows["03.1"]["most common mistake"] == f"{hint} (2)"
    assert rows["03.5"]["did not run"] == 1 and rows["03.6"]["not attempted"] == 3


def test_the_gradebook_and_summary_tables(grades, report):
    book = report.gradebook(grades)
    md = report.gradebook_markdown(book)
    header = md.splitlines()[0]
    assert header.startswith("| student | score | seconds |") and "| 03.14 |" in header
    assert "| `alice` | 2/14 | 42.5 |" in md  # a name is a code span
    assert "alice_03_derivations.ipynb (12 s)" in md
    rows = list(csv.DictReader(io.StringIO(report.gradebook_csv(book))))
    assert [r["student"] for r in rows] == ["alice", "bob", "carol", "dan"]
    assert rows[0]["03.6"] == "correct" and rows[0]["score"] == "2/14"
    summary = report.summary_markdown(report.class_summary(book))
    assert summary.splitlines()[0].startswith("| exercise | correct |")


def test_untrusted_names_cannot_forge_gradebook_rows_or_formulas(report):
    g = _g("=cmd|x\n.ipynb", "=cmd|x\n", {"03.1": "correct", "03.5": "correct"})
    book = report.gradebook([g])
    lines = report.gradebook_markdown(book).splitlines()
    cells = lines[0].count(" | ")
    assert all(line.count(" | ") == cells for line in lines[2:]) and len(lines) == 3
    assert "'=cmd" in report.gradebook_csv(book)


def test_report_paths_must_be_csv_or_markdown(tmp_path, grades, report):
    with pytest.raises(ValueError, match="gradebook"):
        report.write_reports(grades, gradebook_paths=[tmp_path / "g.txt"])
    report.write_reports(
        grades,
        gradebook_paths=[tmp_path / "g.csv", tmp_path / "g.md"],
        summary_paths=[tmp_path / "s.csv", tmp_path / "s.md"],
    )
    assert (tmp_path / "g.csv").read_text().startswith("student,score,seconds")
    assert "| 03.1 | 1/4 |" in (tmp_path / "s.md").read_text()


# --- loading notebooks leniently, within the same limits ------------------------------


def _raw(nb):
    return json.loads(nbformat.writes(nb))


def test_a_notebook_without_outputs_keys_is_graded(tmp_path):
    d = _raw(_checks("04.1", "04.2"))
    for cell in d["cells"]:
        del cell["outputs"], cell["execution_count"]
    (tmp_path / "a.ipynb").write_text(json.dumps(d))
    nb = grade.load_notebook(tmp_path / "a.ipynb")
    assert [c.outputs for c in nb.cells] == [[], []]
    assert grade.exercises_in(tmp_path / "a.ipynb") == ["04.1", "04.2"]


def test_large_outputs_are_discarded_before_the_size_check(tmp_path):
    nb = _checks("04.1")
    image = "A" * (40 << 20)  # a 40 MiB plot
    nb.cells[0].outputs = [
        nbformat.v4.new_output(
            "display_data", data={"image/png": image, "text/plain": ["[fig]"]}
        )
    ]
    nbformat.write(nb, tmp_path / "big.ipynb")
    assert (tmp_path / "big.ipynb").stat().st_size > grade.MAX_NOTEBOOK_BYTES
    loaded = grade.load_notebook(tmp_path / "big.ipynb")
    assert loaded.cells[0].outputs == [] and "04.1" in loaded.cells[0].source
    # the limit on what is parsed stays: 33 MiB of source is not a notebook to grade
    nb.cells[0].outputs = []
    nb.cells[0].source += "\n#" + "x" * (33 << 20)
    nbformat.write(nb, tmp_path / "source.ipynb")
    with pytest.raises(ValueError, match="MiB"):
        grade.load_notebook(tmp_path / "source.ipynb")


def test_what_the_grader_reads_stays_capped(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "MAX_FILE_BYTES", 1 << 20)
    nb = _checks("04.1")
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", text="x" * (2 << 20))]
    nbformat.write(nb, tmp_path / "huge.ipynb")
    with pytest.raises(ValueError, match="MiB"):
        grade.load_notebook(tmp_path / "huge.ipynb")
    # deep nesting in the outputs, and brackets inside strings, are skipped whole
    monkeypatch.setattr(reading, "MAX_NOTEBOOK_BYTES", 1 << 10)
    d = _raw(_checks("04.1"))
    d["cells"][0]["outputs"] = [{"a": ']]}}"[[', "b": [[[[1]]]] * 400}]
    d["cells"][0]["source"] = "check('04.1', None)  # ]} not the end"
    (tmp_path / "nested.ipynb").write_text(json.dumps(d))
    assert (
        grade.load_notebook(tmp_path / "nested.ipynb").cells[0].source.endswith("end")
    )
    (tmp_path / "cut.ipynb").write_text(json.dumps(d)[:-200])
    with pytest.raises(ValueError):
        grade.load_notebook(tmp_path / "cut.ipynb")


def test_the_report_module_reads_no_answer_key(report):
    """The gradebook is built from verdicts; it never needs the chapter registries."""
    text = Path(report.__file__).read_text(encoding="utf-8")
    assert not re.search(r"from \.ch\d|import ch\d", text)


# --- what a Markdown preview of the reports shows -------------------------------------

#: a crash note and a file name a notebook controls: an image that a preview would load,
#: a script link, bold text, raw HTML, backticks, pipes, a backslash and an escape code
HOSTILE_NOTE = (
    "![](http://evil/beacon.png) [x](javascript:alert(1)) **score 6/6** "
    "<img src=x onerror=alert(1)> `tick` ``two`` a|b C:\\temp \x1b[2K"
)
HOSTILE_NAME = "`![](http://evil/b.png)|**x**<b>y</b>\\.ipynb"


def _md_cells(text):
    """The cells of the one table in ``text`` as a GFM preview shows them: per row, the
    text of each cell, with the kinds of inline nodes it holds."""
    from markdown_it import MarkdownIt

    rows, row = [], None
    for tok in MarkdownIt("commonmark").enable("table").parse(text):
        if tok.type == "tr_open":
            row = []
        elif tok.type == "tr_close":
            rows.append(row)
        elif tok.type == "inline" and row is not None:
            kinds = {c.type for c in tok.children}
            row.append(("".join(c.content for c in tok.children), kinds))
    return rows


def _assert_inert(text, expected_rows):
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render(text)
    for tag in ("<img", "<a ", "<strong", "<em", "<b>", "<script"):
        assert tag not in html, (tag, html)
    rows = _md_cells(text)
    assert len({len(r) for r in rows}) == 1, rows  # every row keeps the header's cells
    assert all(kinds <= {"text", "code_inline"} for r in rows for _, kinds in r)
    shown = [[cell for cell, _ in r] for r in rows[1:]]
    assert shown == expected_rows


def test_markdown_reports_show_untrusted_text_as_inert_literal_text(tmp_path, report):
    note = HOSTILE_NOTE.replace("\x1b", "\\x1b")  # one backslash each: as written
    name = HOSTILE_NAME
    g = _g(
        name,
        name,
        {"03.1": "not reached", "03.5": "incorrect"},
        note=HOSTILE_NOTE,
        notes={"03.5": HOSTILE_NOTE},
        mistakes={"03.5": HOSTILE_NOTE},
    )
    per_exercise = [
        [name, "03.1", "not reached", note],
        [name, "03.5", "incorrect", note],
        [name, "SCORE", "0/2", note],
    ]
    _assert_inert(grade.to_markdown([g]), per_exercise)
    writer = grade.ResultWriter(markdown_path=tmp_path / "grades.md")
    writer.append(g)
    writer.close()
    _assert_inert((tmp_path / "grades.md").read_text(encoding="utf-8"), per_exercise)

    book = report.gradebook([g])
    verdicts = list(book[0].verdicts.values())
    _assert_inert(
        report.gradebook_markdown(book),
        [
            [
                name,
                "0/14",
                "10.0",
                *verdicts,
                f"{name} (10 s)",
                "; ".join(n.replace("\x1b", "\\x1b") for n in book[0].notes),
            ]
        ],
    )
    summary = report.summary_markdown(report.class_summary(book))
    rows = _md_cells(summary)
    _assert_inert(summary, [[c for c, _ in r] for r in rows[1:]])
    assert rows[1 + CH03.index("03.5")][-1][0] == f"{note} (1)"
    # an empty note stays an empty cell
    assert grade.to_markdown([_g("a.ipynb", "a", {"03.1": "correct"})]).endswith(
        "| SCORE | 1/1 |  |\n"
    )
