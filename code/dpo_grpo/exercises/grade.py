"""Grade filled student notebooks. Each notebook is untrusted and is treated as such:

- the exercise list is the instructor's: every exercise of the book's notebook that the
  submission is a copy of (:func:`graded_exercises`: the whole chapter, or for the
  chapters shipped as two notebooks, the part it holds), whatever the notebook still
  contains, so the denominator is the same for every copy of one notebook, and the
  gradebook (:mod:`.report`) counts every exercise of the chapter for every student;
- the notebook runs in a sandbox (:mod:`.sandbox`) and its kernel only *records answers
  as data*: the submitted values and, for a coding exercise, the outputs of the
  student's function on test inputs drawn at grading time. The grader reads them after
  the sandbox is dead and compares them with its own key (:func:`.core.judge`); nothing
  the kernel prints, logs or writes is a verdict;
- the batch cannot be broken: an unreadable or invalid file gets the verdict
  ``invalid notebook`` and the batch goes on; each notebook's rows are appended to the
  output files as soon as they are known;
- what the grader discards is not held against a notebook: outputs are dropped before
  the size limit applies and before validation (:func:`.reading.parse_notebook`), so
  missing ``outputs`` keys or a large plot do not fail it;
- untrusted bytes are parsed under limits, in a child process (:mod:`.reading`): the
  notebook, then the answers file; a batch keeps of each notebook only the exercise
  ids it checks (for the chapter vote), and the time spent parsing a notebook counts
  against its timeout.

Verdicts per exercise: ``correct``, ``incorrect``, ``error`` (the student's function
raised), ``not attempted`` (its check ran with ``None``, or no check of it is in the
notebook; a check with ``None`` never erases an answer given before it),
``not reached`` (the check is in the notebook but did not run: an earlier crash, a
deleted name), ``timeout`` and ``invalid notebook``. The note of an answer that is not
right is the self-check's diagnosis (:func:`.core.diagnose`).
"""

from __future__ import annotations

import csv
import io
import os
import re
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..tables import markdown_row
from ._wire import encode_value
from .core import (
    NOTEBOOKS,
    chapter_exercises,
    diagnose,
    grading_cases,
    notebook_exercises,
    registry,
)
from .feedback import Reply
from .names import ascii_name, confusable_with, display_name, mixed_scripts
from .reading import (  # noqa: F401  (MAX_NOTEBOOK_BYTES, exercises_in: re-exported)
    MAX_NOTEBOOK_BYTES,
    ParsedNotebook,
    exercises_in,
    ids_in_source,
    load_notebook,
    parse_notebook,
)
from .sandbox import Limits, RunResult, detect_mode, require_no_key, run_sandboxed


@dataclass
class NotebookGrade:
    """One submitted notebook: its name in the batch (``bob/03_derivations.ipynb``),
    the verdict of every exercise it is graded on, its note (a crash, a time-out, a
    look-alike name), the seconds it took, whose it is and of which chapter, and per
    exercise the diagnosis of an answer that is not right (``notes``) and the mistake
    recognised (``mistakes``)."""

    notebook: str
    verdicts: dict  # exercise id -> verdict, for every exercise it is graded on
    note: str = ""
    seconds: float = 0.0
    student: str = ""
    chapter: str = ""
    notes: dict = field(default_factory=dict)
    mistakes: dict = field(default_factory=dict)

    @property
    def correct(self) -> int:
        return sum(v == "correct" for v in self.verdicts.values())

    @property
    def score(self) -> float:
        return self.correct / max(len(self.verdicts), 1)


@dataclass
class GradingSession:
    """What one batch shares: the chapter, the drawn test inputs (one seed per batch)
    and the sandbox settings."""

    chapter: str
    timeout: float = 120.0
    seed: int | None = None
    limits: Limits = field(default_factory=Limits)
    mode: str | None = None
    cases: dict = field(init=False)

    def __post_init__(self):
        self.ids = chapter_exercises(self.chapter)
        if self.seed is None:
            self.seed = int.from_bytes(os.urandom(4), "little")
        rng = np.random.default_rng(self.seed)
        reg = registry()
        self.cases = {
            i: grading_cases(reg[i], rng) for i in self.ids if reg[i].kind == "code"
        }
        self.wire_cases = {
            i: [encode_value(tuple(c)) for c in cs] for i, cs in self.cases.items()
        }


def _parts(chapter: str) -> dict:
    """The book's notebooks that hold part of ``chapter``: stem -> exercise ids."""
    return {
        stem: notebook_exercises(stem)
        for stem, held in NOTEBOOKS.items()
        if not isinstance(held, str) and held[0].split(".")[0] == chapter
    }


def _named_part(name: str, parts: dict) -> str | None:
    base = name.rsplit("/", 1)[-1]
    for stem in sorted(parts, key=len, reverse=True):
        if re.search(re.escape(stem), base, re.IGNORECASE):
            return stem
    return None


def _checked(nb) -> list:
    """The exercise ids notebook ``nb`` checks: a notebook, or what
    :func:`.reading.parse_notebook` kept of one."""
    return list(nb.ids) if isinstance(nb, ParsedNotebook) else ids_in_source(nb)


def graded_exercises(nb, name: str, chapter: str) -> list[str]:
    """The exercises a submitted notebook ``nb`` (a notebook, what
    :func:`.reading.parse_notebook` kept of one, or None: unreadable) named ``name`` is
    graded on, in chapter order: those of the book's notebook it is a copy of. For a
    chapter shipped as two notebooks (:data:`.core.NOTEBOOKS`) that is the part all its
    checks of the chapter belong to, or without such checks the part its file name
    names; otherwise, or when its checks span both parts, the whole chapter. Deleting
    check cells does not shrink the list."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    ids, parts = chapter_exercises(chapter), _parts(chapter)
    held = set(_checked(nb)) & set(ids) if nb is not None else set()
    if held:
        return next((p for p in parts.values() if held <= set(p)), ids)
    stem = _named_part(name, parts)
    return parts[stem] if stem else ids


def student_of(name: str, folder: str = "") -> str:
    """Whose submission ``name`` (its path in the batch) is: the folder it is in
    (``bob/03_derivations.ipynb``: ``bob``), or its file name without ``.ipynb`` and
    without the name of the book's notebook in it (``alice_03c_kl_term.ipynb``:
    ``alice``); ``folder`` (the batch folder's name) when nothing else is left."""
    if not isinstance(name, str) or not isinstance(folder, str):
        raise TypeError(
            f"name and folder must be str, got {type(name).__name__} and "
            f"{type(folder).__name__}"
        )
    head, sep, base = name.rpartition("/")
    if sep:
        return head.split("/")[0]
    stem = base.removesuffix(".ipynb")
    book = _named_part(stem, {s: None for s in NOTEBOOKS})
    if book is not None:
        m = re.search(re.escape(book), stem, re.IGNORECASE)
        stem = stem[: m.start()] + stem[m.end() :]
    return stem.strip(" _-.") or folder or base


def last_answers(records) -> tuple[dict, set]:
    """``(answers, untouched)`` from an answers file's records: for each exercise the
    answer of its last check that gave one (a check with ``None`` never erases it), and
    the exercises whose checks gave none (``None``, or a record without an answer)."""
    answers, seen = {}, set()
    for rec in records:
        ex_id = rec.get("id") if isinstance(rec, dict) else None
        if not isinstance(ex_id, str):
            continue
        seen.add(ex_id)
        answer = rec.get("answer")
        if isinstance(answer, dict) and answer.get("kind") != "none":
            answers[ex_id] = answer
    return answers, seen - set(answers)


def _chapter_voted(nb):
    counts = Counter(
        ex_id.split(".")[0] for ex_id in _checked(nb) if ex_id in registry()
    )
    ranked = counts.most_common(2)
    if not ranked or (len(ranked) == 2 and ranked[0][1] == ranked[1][1]):
        return None  # checks no known exercise, or as many of two chapters
    return ranked[0][0]


def chapter_of(notebooks) -> str:
    """The chapter of a batch of validated notebooks (each a notebook or what
    :func:`.reading.parse_notebook` kept of one: its checked ids): each notebook votes
    for the chapter most of its checks belong to, and a strict majority of the voting
    notebooks decides. ValueError (asking for ``--chapter``) when no notebook checks a
    known exercise or no chapter has a majority."""
    votes = Counter(c for c in map(_chapter_voted, notebooks) if c is not None)
    if not votes:
        raise ValueError(
            "no notebook checks a known exercise: pass the chapter explicitly "
            "(--chapter NN)"
        )
    (top, n), *rest = votes.most_common()
    if rest and n * 2 <= sum(votes.values()):
        tally = ", ".join(f"{c}: {k}" for c, k in sorted(votes.items()))
        raise ValueError(
            f"the notebooks disagree on the chapter (notebooks per chapter: {tally}): "
            "pass the chapter explicitly (--chapter NN)"
        )
    return top


@dataclass
class Submission:
    """A file of the batch: its path, its name in the batch (``bob/x.ipynb``) and whose
    it is."""

    path: Path
    name: str
    student: str


def _verdicts(ids, answers, untouched, in_source, result, session):
    """``(verdicts, notes, mistakes)`` of the exercises ``ids`` from the answers the
    sandbox recorded (:func:`last_answers`)."""
    reg, verdicts, notes, mistakes = registry(), {}, {}, {}
    for ex_id in ids:
        if ex_id in answers:
            try:
                reply = diagnose(reg[ex_id], answers[ex_id], session.cases.get(ex_id))
            except Exception:  # noqa: BLE001  (a reference that cannot digest a record: the answer is wrong)
                reply = Reply("incorrect")
            verdicts[ex_id] = reply.status
            if reply.status != "correct" and reply.message:
                notes[ex_id] = reply.message
            if reply.mistake:
                mistakes[ex_id] = reply.mistake
        elif ex_id in untouched:
            verdicts[ex_id] = "not attempted"
        elif ex_id in in_source:
            verdicts[ex_id] = "timeout" if result.timed_out else "not reached"
        else:
            verdicts[ex_id] = "not attempted"
    return verdicts, notes, mistakes


def _grade(
    sub: Submission, session: GradingSession, slot: int = 0, voted=None
) -> NotebookGrade:
    """Grade ``sub``: parse it (:func:`.reading.parse_notebook`), run it in a sandbox
    for what is left of the session's timeout once parsing is counted, judge the
    answers. ``voted``: what the chapter vote made of it (a :class:`ParsedNotebook`
    whose seconds count, or the ValueError that refused it), or None."""
    start = time.monotonic()
    if isinstance(voted, ParsedNotebook):
        start -= voted.seconds
    try:
        if isinstance(voted, ValueError):
            raise voted
        nb = parse_notebook(sub.path)
    except ValueError as exc:
        return NotebookGrade(
            sub.name,
            {
                i: "invalid notebook"
                for i in graded_exercises(None, sub.name, session.chapter)
            },
            f"invalid notebook: {exc}",
            time.monotonic() - start,
            sub.student,
            session.chapter,
        )
    ids = graded_exercises(nb, sub.name, session.chapter)
    left = session.timeout - (time.monotonic() - start)
    if left < 1:
        took = f"{time.monotonic() - start:.0f} s"
        result = RunResult(timed_out=True, note=f"timeout: parsing took {took}")
    else:
        result = run_sandboxed(
            nb.text,
            session.wire_cases,
            left,
            slot=slot,
            limits=session.limits,
            mode=session.mode,
        )
    answers, untouched = last_answers(result.answers)
    verdicts, notes, mistakes = _verdicts(
        ids, answers, untouched, set(nb.ids), result, session
    )
    return NotebookGrade(
        sub.name,
        verdicts,
        result.note,
        time.monotonic() - start,
        sub.student,
        session.chapter,
        notes,
        mistakes,
    )


def _vote(subs, jobs: int) -> dict:
    """What the chapter vote keeps of each submission, ``jobs`` at a time: name ->
    its checked ids (a :class:`ParsedNotebook` without text) or the ValueError that
    refused it."""

    def parsed(sub):
        try:
            return parse_notebook(sub.path, text=False)
        except ValueError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return dict(zip((s.name for s in subs), pool.map(parsed, subs)))


def notebooks_in(path) -> list[Path]:
    """The notebooks ``path`` names: itself, or every ``*.ipynb`` in the folder and in
    its sub-folders one level down (one per student), sorted by their path in the
    folder. Hidden folders (Jupyter's ``.ipynb_checkpoints``) and links to folders are
    left out; a file is taken as it is (:func:`.reading.parse_notebook` refuses what
    is not a regular file)."""
    path = Path(path)
    if path.is_dir():
        found = [p for p in path.iterdir() if p.name.endswith(".ipynb")]
        for sub in sorted(path.iterdir()):
            if sub.name.startswith(".") or sub.name.endswith(".ipynb"):
                continue
            if sub.is_dir() and not sub.is_symlink():
                found += [p for p in sub.iterdir() if p.name.endswith(".ipynb")]
        return sorted(found, key=lambda p: p.relative_to(path).as_posix())
    if path.name.endswith(".ipynb") and os.path.lexists(path):
        return [path]
    raise ValueError(
        f"path must be a notebook (.ipynb) or a folder of notebooks, got {path}"
    )


def submissions(paths, root) -> list[Submission]:
    """The :class:`Submission` of each notebook path found under folder ``root``: its
    path there, and whose it is (:func:`student_of`)."""
    root = Path(root)
    out = []
    for p in paths:
        name = p.relative_to(root).as_posix() if p.parent != root else p.name
        out.append(Submission(p, name, student_of(name, root.resolve().name)))
    return out


class BatchProgress:
    """Progress of a batch on ``stream`` (stderr): a ``tqdm`` bar (count, elapsed time,
    rate, time left) redrawn in place on a terminal; elsewhere (a log file, a pipe) one
    plain line per graded notebook. Names are escaped."""

    def __init__(self, total: int, stream=None):
        from tqdm import tqdm

        if not isinstance(total, int) or total < 0:
            raise ValueError(f"total must be a non-negative int, got {total!r}")
        self.stream = stream if stream is not None else sys.stderr
        self.total, self.done = total, 0
        self.bar = tqdm(
            total=total,
            unit="notebook",
            file=self.stream,
            dynamic_ncols=True,
            disable=not (hasattr(self.stream, "isatty") and self.stream.isatty()),
        )

    def step(self, grade: NotebookGrade):
        self.done += 1
        name = display_name(grade.notebook)
        if self.bar.disable:
            print(
                f"[{self.done}/{self.total}] {name}: {_score(grade)}",
                file=self.stream,
                flush=True,
            )
        else:
            self.bar.set_postfix_str(name[:40], refresh=False)
            self.bar.update(1)

    def close(self):
        self.bar.close()


def grade_path(
    path,
    timeout: float = 120.0,
    *,
    chapter: str | None = None,
    seed: int | None = None,
    jobs: int = 1,
    limits: Limits | None = None,
    csv_path=None,
    markdown_path=None,
    progress: bool = False,
    on_result=None,
    unisolated: bool = False,
) -> list[NotebookGrade]:
    """Grade one notebook or every ``*.ipynb`` in a folder and its students' sub-folders
    (:func:`notebooks_in`), each in its own sandbox, ``jobs`` at a time.

    Every notebook of the batch is graded against the same chapter (given, or the one
    most of the batch's checks belong to), on the exercises of the book's notebook it is
    a copy of (:func:`graded_exercises`), with the same drawn test inputs. Rows are
    appended to ``csv_path``/``markdown_path`` as each notebook finishes; the returned
    list is sorted by name in the batch (:func:`.report.gradebook` makes one row per
    student of it).

    Before anything is graded, a probe runs in a sandbox made as a notebook's
    (:func:`.sandbox.require_no_key`); if a notebook there could read an answer or the
    key, the batch is refused (:class:`.sandbox.KeyInSandbox`, naming what it found),
    unless ``unisolated`` (``--unisolated``: the teacher accepts marks that are not
    protected, e.g. practice on macOS).
    """
    notebooks = notebooks_in(path)
    if not isinstance(unisolated, bool):
        raise TypeError(f"unisolated must be a bool, got {type(unisolated).__name__}")
    detect_mode()  # once, before any thread starts
    if not unisolated:
        require_no_key(limits=limits)
    root = Path(path) if Path(path).is_dir() else Path(path).parent
    subs = submissions(notebooks, root)
    voted = {}
    if chapter is None:
        voted = _vote(subs, jobs)
        chapter = chapter_of(v for v in voted.values() if not isinstance(v, Exception))
    session = GradingSession(chapter, timeout, seed, limits or Limits())
    writer = ResultWriter(csv_path, markdown_path)
    bar = BatchProgress(len(notebooks)) if progress else None
    lookalikes = confusable_with([s.name for s in subs])
    lock = threading.Lock()
    slots = list(range(max(1, jobs)))
    grades = []

    def work(sub):
        with lock:
            slot = slots.pop()
        try:
            g = _grade(sub, session, slot, voted.get(sub.name))
        except Exception as exc:  # noqa: BLE001  (a grader fault on one file must not stop the batch)
            g = NotebookGrade(
                sub.name,
                {i: "not reached" for i in session.ids},
                f"grader error: {type(exc).__name__}",
                student=sub.student,
                chapter=session.chapter,
            )
        finally:
            with lock:
                slots.append(slot)
        flags = [g.note] if g.note else []
        if sub.name in lookalikes:
            flags.append(
                f"name {ascii_name(sub.name)} looks like "
                f"{', '.join(map(ascii_name, lookalikes[sub.name]))}"
            )
        if scripts := mixed_scripts(sub.name):
            flags.append(
                f"name {ascii_name(sub.name)} mixes scripts: {', '.join(scripts)}"
            )
        g.note = "; ".join(flags)
        return g

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(work, sub): sub for sub in subs}
        for fut in as_completed(futures):
            g = fut.result()
            with lock:
                grades.append(g)
                writer.append(g)
                if on_result:
                    on_result(g)
                if bar:
                    bar.step(g)
    writer.close()
    if bar:
        bar.close()
    return sorted(grades, key=lambda g: g.notebook)


def _score(g: NotebookGrade) -> str:
    return f"{g.correct}/{len(g.verdicts)}"


#: verdicts whose row takes the notebook's note (why the check gave no answer)
NOTEBOOK_FAULTS = ("not reached", "timeout", "invalid notebook")


def to_rows(grades, *, shown=display_name):
    """One row per exercise (its note: the diagnosis of an answer that is not right, or
    why its check gave none) and a SCORE row per notebook (its note); names and notes
    as ``shown`` shows them (escaped: :func:`.names.display_name`)."""
    rows = []
    for g in grades:
        name, note = shown(g.notebook), shown(g.note)
        for ex_id, verdict in g.verdicts.items():
            why = g.notes.get(ex_id) or (g.note if verdict in NOTEBOOK_FAULTS else "")
            rows.append(
                {
                    "notebook": name,
                    "exercise": ex_id,
                    "verdict": verdict,
                    "note": shown(why),
                }
            )
        rows.append(
            {"notebook": name, "exercise": "SCORE", "verdict": _score(g), "note": note}
        )
    return rows


def csv_cell(value) -> str:
    """A CSV cell a spreadsheet shows as text: a leading ``= + - @`` (or tab/CR) gets a
    quote in front."""
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


CSV_FIELDS = ["notebook", "exercise", "verdict", "note"]
MD_HEADER = "| notebook | exercise | verdict | note |\n|---|---|---|---|\n"
#: the Markdown cells a notebook writes (its name, the notes), set as code spans
MD_UNTRUSTED = (0, 3)


def _csv_lines(rows, header=False) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
    if header:
        writer.writeheader()
    writer.writerows({k: csv_cell(v) for k, v in r.items()} for r in rows)
    return buf.getvalue()


def as_written(text: str) -> str:
    """Untrusted text for a Markdown code span, which shows it as written: control and
    invisible characters escaped, a backslash kept as one
    (:func:`.names.display_name`)."""
    return display_name(text, escape_backslash=False)


def _md_lines(grades) -> str:
    return "".join(
        markdown_row([r[k] for k in CSV_FIELDS], untrusted=MD_UNTRUSTED) + "\n"
        for r in to_rows(grades, shown=as_written)
    )


def to_csv(grades) -> str:
    """The per-exercise table (:func:`to_rows`) as CSV, with a header."""
    return _csv_lines(to_rows(grades), header=True)


def to_markdown(grades) -> str:
    """The per-exercise table as Markdown: names and notes as code spans
    (:func:`as_written`), which a preview shows as plain text."""
    return MD_HEADER + _md_lines(grades)


class ResultWriter:
    """Appends each notebook's rows to the CSV and Markdown files as soon as it is
    graded (flushed, fsynced)."""

    def __init__(self, csv_path=None, markdown_path=None):
        self.files = []
        if csv_path:
            self.files.append(
                (open(csv_path, "w", encoding="utf-8", newline=""), "csv")
            )
            self._write(self.files[-1][0], _csv_lines([], header=True))
        if markdown_path:
            self.files.append((open(markdown_path, "w", encoding="utf-8"), "md"))
            self._write(self.files[-1][0], MD_HEADER)

    @staticmethod
    def _write(fh, text):
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())

    def append(self, grade: NotebookGrade):
        for fh, kind in self.files:
            text = _csv_lines(to_rows([grade])) if kind == "csv" else _md_lines([grade])
            self._write(fh, text)

    def close(self):
        for fh, _ in self.files:
            fh.close()
