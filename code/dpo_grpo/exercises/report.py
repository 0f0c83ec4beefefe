"""The grade report a teacher reads, built from a graded batch (:mod:`.grade`): the
gradebook (one row per student) and the class summary (one row per exercise).

- A student's notebooks (:attr:`.grade.NotebookGrade.student`: a folder per student, or
  file names such as ``alice_03_derivations.ipynb``) make one row over every exercise
  of the chapter, so a chapter handed in as its two notebooks is scored whole. An
  exercise that none of them holds is ``not attempted``; one answered in several counts
  at its lowest mark (handing in copies gains nothing), and the row's notes say so. The
  row gives the seconds each notebook took.
- The summary counts, per exercise, the students with each verdict and names the
  mistake diagnosed most often (a registered mistake's hint, or "close").

As in the grader's per-exercise table, names and notes are shown escaped
(:func:`.names.display_name`): in CSV, with a cell that a spreadsheet would run as a
formula quoted; in Markdown, as code spans that a preview shows as plain text
(:func:`.grade.as_written`). Nothing here reads the answer key.
"""

from __future__ import annotations

import csv
import io
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from ..tables import markdown_row
from .core import chapter_exercises
from .grade import NotebookGrade, as_written, csv_cell
from .names import display_name

#: Which verdict counts when several notebooks of a student hold an exercise: the
#: first in this order among those that answered it (the lowest mark), else the most
#: telling of the others.
RANK = (
    "error",
    "incorrect",
    "correct",
    "timeout",
    "not reached",
    "invalid notebook",
    "not attempted",
)
ANSWERED = ("error", "incorrect", "correct")
DID_NOT_RUN = ("not reached", "timeout", "invalid notebook")
SUMMARY_FIELDS = [
    "exercise",
    "correct",
    "incorrect",
    "error",
    "not attempted",
    "did not run",
    "most common mistake",
]


@dataclass
class StudentGrade:
    """One student: the verdict of every exercise of the chapter, the notebooks graded,
    the notes (each notebook's, and what the merge decided) and, per exercise, the
    mistake recognised in the answer that counts."""

    student: str
    verdicts: dict
    notebooks: list
    notes: list
    mistakes: dict

    @property
    def correct(self) -> int:
        return sum(v == "correct" for v in self.verdicts.values())

    @property
    def score(self) -> str:
        return f"{self.correct}/{len(self.verdicts)}"

    @property
    def seconds(self) -> float:
        return sum(g.seconds for g in self.notebooks)


def _chapter_ids(grades) -> list[str]:
    chapters = {g.chapter for g in grades if g.chapter}
    if len(chapters) > 1:
        raise ValueError(f"grades must be of one chapter, got {sorted(chapters)}")
    if chapters:
        return chapter_exercises(chapters.pop())
    return sorted({i for g in grades for i in g.verdicts})


def _rank(verdict: str) -> int:
    return RANK.index(verdict) if verdict in RANK else len(RANK)


def _student(student: str, notebooks: list, ids: list) -> StudentGrade:
    verdicts, mistakes, missing = {}, {}, []
    notes = [f"{g.notebook}: {g.note}" for g in notebooks if g.note]
    for ex_id in ids:
        held = [g for g in notebooks if ex_id in g.verdicts]
        answered = [g for g in held if g.verdicts[ex_id] in ANSWERED]
        if len(answered) > 1:
            names = ", ".join(g.notebook for g in answered)
            notes.append(
                f"{ex_id} answered in {len(answered)} notebooks ({names}): the lower "
                "mark counts"
            )
        if not held:
            verdicts[ex_id] = "not attempted"
            missing.append(ex_id)
            continue
        counted = min(answered or held, key=lambda g: _rank(g.verdicts[ex_id]))
        verdicts[ex_id] = counted.verdicts[ex_id]
        if ex_id in counted.mistakes:
            mistakes[ex_id] = counted.mistakes[ex_id]
    if missing:
        notes.append(f"no notebook holds {', '.join(missing)}")
    return StudentGrade(student, verdicts, notebooks, notes, mistakes)


def gradebook(grades) -> list[StudentGrade]:
    """One :class:`StudentGrade` per student of ``grades`` (the notebooks of one
    chapter), sorted by name."""
    grades = list(grades)
    if not all(isinstance(g, NotebookGrade) for g in grades):
        raise TypeError("grades must be NotebookGrade objects (grade.grade_path)")
    grades = sorted(grades, key=lambda g: g.notebook)
    ids = _chapter_ids(grades)
    by_student = defaultdict(list)
    for g in grades:
        by_student[g.student or g.notebook].append(g)
    return [_student(s, by_student[s], ids) for s in sorted(by_student)]


def class_summary(students) -> list[dict]:
    """One row per exercise of the gradebook ``students``: how many students got each
    verdict, and the mistake diagnosed most often (with its count)."""
    students = list(students)
    ids = list(students[0].verdicts) if students else []
    rows = []
    for ex_id in ids:
        got = Counter(s.verdicts[ex_id] for s in students)
        mistakes = Counter(s.mistakes[ex_id] for s in students if ex_id in s.mistakes)
        common = mistakes.most_common(1)
        rows.append(
            {
                "exercise": ex_id,
                "correct": f"{got['correct']}/{len(students)}",
                "incorrect": got["incorrect"],
                "error": got["error"],
                "not attempted": got["not attempted"],
                "did not run": sum(got[v] for v in DID_NOT_RUN),
                "most common mistake": f"{common[0][0]} ({common[0][1]})"
                if common
                else "",
            }
        )
    return rows


#: the columns of the gradebook and of the summary that show untrusted text (names,
#: notes, and the hints next to them), set as code spans in Markdown
GRADEBOOK_UNTRUSTED = ("student", "notebooks", "notes")
SUMMARY_UNTRUSTED = ("most common mistake",)


def _gradebook_rows(students, shown=display_name) -> tuple[list, list[dict]]:
    ids = list(students[0].verdicts) if students else []
    fields = ["student", "score", "seconds", *ids, "notebooks", "notes"]
    rows = []
    for s in students:
        notebooks = ", ".join(
            f"{shown(g.notebook)} ({g.seconds:.0f} s)" for g in s.notebooks
        )
        rows.append(
            {
                "student": shown(s.student),
                "score": s.score,
                "seconds": f"{s.seconds:.1f}",
                **s.verdicts,
                "notebooks": notebooks,
                "notes": shown("; ".join(s.notes)),
            }
        )
    return fields, rows


def _csv(fields, rows) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields)
    writer.writeheader()
    writer.writerows({k: csv_cell(v) for k, v in r.items()} for r in rows)
    return buf.getvalue()


def _markdown(fields, rows, untrusted) -> str:
    code = [i for i, f in enumerate(fields) if f in untrusted]
    lines = [markdown_row(fields), "|" + "---|" * len(fields)]
    lines += [markdown_row([r[f] for f in fields], untrusted=code) for r in rows]
    return "\n".join(lines) + "\n"


def gradebook_csv(students) -> str:
    """The gradebook as CSV: a header, then one row per student."""
    return _csv(*_gradebook_rows(list(students)))


def gradebook_markdown(students) -> str:
    """The gradebook as a Markdown table: names and notes as code spans."""
    return _markdown(*_gradebook_rows(list(students), as_written), GRADEBOOK_UNTRUSTED)


def _summary_cells(rows, shown=display_name) -> list[dict]:
    return [{**r, "most common mistake": shown(r["most common mistake"])} for r in rows]


def summary_csv(rows) -> str:
    """The class summary (:func:`class_summary`) as CSV."""
    return _csv(SUMMARY_FIELDS, _summary_cells(rows))


def summary_markdown(rows) -> str:
    """The class summary (:func:`class_summary`) as a Markdown table: the mistakes as
    code spans."""
    return _markdown(
        SUMMARY_FIELDS, _summary_cells(rows, as_written), SUMMARY_UNTRUSTED
    )


def report_paths(paths, what: str) -> list[Path]:
    """``paths`` as a list of Paths, each ending in ``.csv`` or ``.md``; ValueError
    naming ``what`` otherwise."""
    paths = [Path(p) for p in paths or []]
    for p in paths:
        if p.suffix.lower() not in (".csv", ".md"):
            raise ValueError(f"{what} must be a .csv or .md file, got {p}")
    return paths


def _is_csv(path: Path) -> bool:
    return path.suffix.lower() == ".csv"


def write_reports(grades, *, gradebook_paths=(), summary_paths=()) -> list:
    """Write the gradebook of ``grades`` to each of ``gradebook_paths`` and the class
    summary to each of ``summary_paths`` (CSV or Markdown by the suffix); return the
    gradebook. The paths are checked before anything is written."""
    book_paths = report_paths(gradebook_paths, "gradebook")
    rows_paths = report_paths(summary_paths, "summary")
    book = gradebook(grades)
    rows = class_summary(book)
    for p in book_paths:
        text = gradebook_csv(book) if _is_csv(p) else gradebook_markdown(book)
        p.write_text(text, encoding="utf-8")
    for p in rows_paths:
        text = summary_csv(rows) if _is_csv(p) else summary_markdown(rows)
        p.write_text(text, encoding="utf-8")
    return book
