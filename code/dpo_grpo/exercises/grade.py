"""Grade filled student notebooks. Each notebook is untrusted and is treated as such:

- the exercise list is the instructor's: every exercise the registry holds for the
  chapter, whatever the notebook contains, so the denominator is the same for every
  student;
- the notebook runs in a sandbox (:mod:`.sandbox`) and its kernel only *records answers
  as data*: the submitted values and, for a coding exercise, the outputs of the
  student's function on test inputs drawn at grading time. The grader reads them after
  the sandbox is dead and compares them with its own key (:func:`.core.judge`); nothing
  the kernel prints, logs or writes is a verdict;
- the batch cannot be broken: an unreadable or invalid file gets the verdict
  ``invalid notebook`` and the batch goes on; each notebook's rows are appended to the
  output files as soon as they are known.

Verdicts per exercise: ``correct``, ``incorrect``, ``error`` (the student's function
raised), ``not attempted`` (no answer, or no check of it in the notebook),
``not reached`` (the check is in the notebook but did not run: an earlier crash, a
deleted name), ``timeout`` and ``invalid notebook``.
"""

from __future__ import annotations

import csv
import io
import os
import re
import stat
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
from .core import chapter_exercises, grading_cases, judge, registry
from .names import ascii_name, confusable_with, display_name
from .sandbox import Limits, detect_mode, run_sandboxed

CHECK_CALL = re.compile(r"""check\(\s*["']([0-9A-Za-z_.\-]+)["']""")
MAX_NOTEBOOK_BYTES = 32 << 20


@dataclass
class NotebookGrade:
    notebook: str
    verdicts: dict  # exercise id -> verdict, for every exercise of the chapter
    note: str = ""
    seconds: float = 0.0

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


def _ids_in_source(nb) -> list[str]:
    ids = []
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            for ex_id in CHECK_CALL.findall(cell.get("source", "")):
                if ex_id not in ids:
                    ids.append(ex_id)
    return ids


def exercises_in(nb_path) -> list[str]:
    """Exercise ids checked in a notebook, in order of appearance (from
    ``check("id", ...)`` calls)."""
    import nbformat

    return _ids_in_source(nbformat.read(nb_path, as_version=4))


def load_notebook(path):
    """The validated notebook at ``path``, or raise ValueError saying why it cannot be
    graded."""
    import nbformat

    path = Path(path)
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise ValueError(f"cannot read the file ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("not a regular file")
    if st.st_size > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"larger than {MAX_NOTEBOOK_BYTES >> 20} MiB")
    try:
        with open(path, "rb") as fh:
            text = fh.read(MAX_NOTEBOOK_BYTES + 1).decode("utf-8")
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # noqa: BLE001  (any parse or schema failure: the file is not a notebook)
        raise ValueError(f"{type(exc).__name__}") from None
    return nb


def _chapter_voted(nb):
    counts = Counter(
        ex_id.split(".")[0] for ex_id in _ids_in_source(nb) if ex_id in registry()
    )
    ranked = counts.most_common(2)
    if not ranked or (len(ranked) == 2 and ranked[0][1] == ranked[1][1]):
        return None  # checks no known exercise, or as many of two chapters
    return ranked[0][0]


def chapter_of(notebooks) -> str:
    """The chapter of a batch of validated notebooks: each notebook votes for the
    chapter most of its checks belong to, and a strict majority of the voting notebooks
    decides. ValueError (asking for ``--chapter``) when no notebook checks a known
    exercise or no chapter has a majority."""
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


def _grade(path: Path, session: GradingSession, slot: int = 0) -> NotebookGrade:
    import nbformat

    start = time.monotonic()
    try:
        nb = load_notebook(path)
    except ValueError as exc:
        return NotebookGrade(
            path.name,
            {i: "invalid notebook" for i in session.ids},
            f"invalid notebook: {exc}",
            time.monotonic() - start,
        )
    in_source = set(_ids_in_source(nb))
    result = run_sandboxed(
        nbformat.writes(nb),
        session.wire_cases,
        session.timeout,
        slot=slot,
        limits=session.limits,
        mode=session.mode,
    )
    last = {}
    for rec in result.answers:
        if rec.get("id") in session.ids:
            last[rec["id"]] = rec.get("answer")  # the last check of an exercise counts
    reg = registry()
    verdicts = {}
    for ex_id in session.ids:
        if ex_id in last:
            try:
                verdicts[ex_id] = judge(
                    reg[ex_id], last[ex_id], session.cases.get(ex_id)
                )
            except Exception:  # noqa: BLE001  (a reference that cannot digest a record: the answer is wrong)
                verdicts[ex_id] = "incorrect"
        elif ex_id in in_source:
            verdicts[ex_id] = "timeout" if result.timed_out else "not reached"
        else:
            verdicts[ex_id] = "not attempted"
    return NotebookGrade(path.name, verdicts, result.note, time.monotonic() - start)


def grade_notebook(
    nb_path,
    timeout: float = 120.0,
    *,
    chapter: str | None = None,
    seed: int | None = None,
    limits: Limits | None = None,
) -> NotebookGrade:
    """Execute one notebook in a sandbox and return the verdict of every exercise of its
    chapter.

    ``chapter`` defaults to the one the notebook's checks belong to; a notebook that
    checks no known exercise and has no ``chapter`` gets no verdicts.
    """
    nb_path = Path(nb_path)
    if chapter is None:
        try:
            chapter = chapter_of([load_notebook(nb_path)])
        except ValueError as exc:
            return NotebookGrade(nb_path.name, {}, str(exc))
    session = GradingSession(chapter, timeout, seed, limits or Limits())
    return _grade(nb_path, session)


def notebooks_in(path) -> list[Path]:
    path = Path(path)
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.name.endswith(".ipynb"))
    if path.name.endswith(".ipynb") and os.path.lexists(path):
        return [path]
    raise ValueError(
        f"path must be a notebook (.ipynb) or a folder of notebooks, got {path}"
    )


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
) -> list[NotebookGrade]:
    """Grade one notebook or every ``*.ipynb`` in a folder, each in its own sandbox,
    ``jobs`` at a time.

    Every notebook of the batch is graded against the same chapter (given, or the one
    most of the batch's checks belong to) and the same drawn test inputs. Rows are
    appended to ``csv_path``/``markdown_path`` as each notebook finishes; the returned
    list is sorted by file name.
    """
    notebooks = notebooks_in(path)
    if chapter is None:
        valid = []
        for p in notebooks:
            try:
                valid.append(load_notebook(p))
            except ValueError:
                pass
        chapter = chapter_of(valid)
    session = GradingSession(chapter, timeout, seed, limits or Limits())
    detect_mode()  # probe once, before the threads start
    writer = ResultWriter(csv_path, markdown_path)
    bar = BatchProgress(len(notebooks)) if progress else None
    lookalikes = confusable_with([p.name for p in notebooks])
    lock = threading.Lock()
    slots = list(range(max(1, jobs)))
    grades = []

    def work(p):
        with lock:
            slot = slots.pop()
        try:
            g = _grade(p, session, slot)
        except Exception as exc:  # noqa: BLE001  (a grader fault on one file must not stop the batch)
            g = NotebookGrade(
                p.name,
                {i: "not reached" for i in session.ids},
                f"grader error: {type(exc).__name__}",
            )
        finally:
            with lock:
                slots.append(slot)
        if p.name in lookalikes:
            flag = (
                f"name {ascii_name(p.name)} looks like "
                f"{', '.join(map(ascii_name, lookalikes[p.name]))}"
            )
            g.note = f"{g.note}; {flag}" if g.note else flag
        return g

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(work, p): p for p in notebooks}
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


def to_rows(grades):
    """One row per exercise and a SCORE row per notebook; names shown escaped
    (:func:`.names.display_name`)."""
    rows = []
    for g in grades:
        name, note = display_name(g.notebook), display_name(g.note)
        for ex_id, verdict in g.verdicts.items():
            rows.append(
                {"notebook": name, "exercise": ex_id, "verdict": verdict, "note": note}
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


def _csv_lines(rows, header=False) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
    if header:
        writer.writeheader()
    writer.writerows({k: csv_cell(v) for k, v in r.items()} for r in rows)
    return buf.getvalue()


def _md_lines(rows) -> str:
    return "".join(
        markdown_row([r[k] for k in CSV_FIELDS], untrusted=True) + "\n" for r in rows
    )


def to_csv(grades) -> str:
    return _csv_lines(to_rows(grades), header=True)


def to_markdown(grades) -> str:
    return MD_HEADER + _md_lines(to_rows(grades))


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
        rows = to_rows([grade])
        for fh, kind in self.files:
            self._write(fh, _csv_lines(rows) if kind == "csv" else _md_lines(rows))

    def close(self):
        for fh, _ in self.files:
            fh.close()
