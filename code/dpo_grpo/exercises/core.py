"""The instructor's side of the exercises: the registry with the full answer key, and
the comparisons the grader makes with it.

Three kinds: ``numeric`` (a number or array, compared with a tolerance), ``choice`` (one
option letter) and ``code`` (a function, run on test cases against a reference
implementation). Each chapter registers its exercises in ``chNN.py``; :func:`registry`
imports them all. Students never need this module: their ``check()`` lives in
:mod:`dpo_grpo.exercises.selfcheck` and reads only the hashed key
``_selfcheck_key.py``. The grader (:mod:`dpo_grpo.exercises.grade`) compares the
answers it extracts from a student's kernel with this key (:func:`judge`,
:func:`diagnose`), in its own process, by the self-check's own rule
(:mod:`.tolerance`) and with its messages (:mod:`.feedback`). :data:`NOTEBOOKS` says
which exercises each notebook of the book holds.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..i18n import tr
from ._wire import decode_array
from .feedback import CaseError, Reply, code_reply, numeric_reply
from .tolerance import close_tolerance, exponents, steps, within

EXERCISES: dict[str, "Exercise"] = {}


@dataclass
class Exercise:
    """One exercise. ``reference`` computes the answer (numeric/choice) or is the
    reference function (code)."""

    id: str
    prompt: str
    kind: str
    reference: Any
    rtol: float = 1e-4
    atol: float = 1e-6
    options: dict = field(default_factory=dict)  # choice: letter -> text
    explanations: dict = field(default_factory=dict)  # choice: wrong letter -> hint
    # label -> (value or callable giving it, hint)
    mistakes: dict = field(default_factory=dict)
    # code: list of argument tuples (shown to students' self-check)
    cases: list = field(default_factory=list)
    level: int | None = None  # difficulty 1 (routine) to 3 (hard); None when not rated
    # code: rng -> argument tuple, test inputs the grader draws at grading time
    draw: Callable | None = None

    @property
    def chapter(self) -> str:
        return self.id.split(".")[0]

    def solution(self):
        """The reference answer (for tests and instructors; never shown by
        ``check``)."""
        if self.kind == "code":
            return self.reference
        return self.reference() if callable(self.reference) else self.reference

    def tolerance(self) -> np.ndarray:
        """The tolerance of each value of a numeric exercise's answer (shaped like
        it): ``atol + rtol |reference|`` rounded down to a power of two, what ``check``
        and the grader accept and what their messages state (:mod:`.tolerance`)."""
        if self.kind != "numeric":
            raise ValueError(f"exercise {self.id} is {self.kind}, not numeric")
        sol = np.asarray(self.solution(), dtype=np.float64)
        return steps(exponents(sol, self.rtol, self.atol)).reshape(sol.shape)


@dataclass
class Feedback:
    exercise_id: str
    # "correct" | "incorrect" | "not attempted" | "error" | "recorded" (graded edition)
    status: str
    message: str

    def __bool__(self):
        return self.status == "correct"

    def __repr__(self):
        mark = {
            "correct": "✅",
            "incorrect": "❌",
            "not attempted": "…",
            "error": "⚠️",
            "recorded": "📝",
        }[self.status]
        return f"{mark} " + tr(
            "Exercise {id}: {message}", id=self.exercise_id, message=self.message
        )

    _repr_pretty_ = lambda self, p, cycle: p.text(repr(self))  # noqa: E731  (IPython display)


def _level(level):
    if level is not None and (isinstance(level, bool) or level not in (1, 2, 3)):
        raise ValueError(f"level must be 1, 2, 3 or None, got {level!r}")
    return level


def _register(ex: Exercise) -> Exercise:
    if ex.id in EXERCISES:
        raise ValueError(f"exercise id {ex.id!r} is registered twice")
    EXERCISES[ex.id] = ex
    return ex


def numeric(
    id, prompt, reference, *, rtol=1e-3, atol=1e-6, mistakes=None, level=None
) -> Exercise:
    """Register a numeric exercise; ``reference`` is a value or a zero-argument function
    computing it.

    The defaults accept every answer correctly rounded to four significant figures (the
    book asks for at least four): the tolerance, ``atol + rtol |ref|`` rounded down to a
    power of two, is then more than ``5e-4 |ref|``, at least half a unit of the fourth
    figure."""
    return _register(
        Exercise(
            id,
            prompt,
            "numeric",
            reference,
            rtol=rtol,
            atol=atol,
            mistakes=mistakes or {},
            level=_level(level),
        )
    )


def choice(id, prompt, options, correct, *, explanations=None, level=None) -> Exercise:
    """Register a multiple-choice exercise; ``options`` maps letters to texts,
    ``correct`` is a letter."""
    if correct not in options:
        raise ValueError(
            f"correct answer {correct!r} is not one of the options {sorted(options)}"
        )
    return _register(
        Exercise(
            id,
            prompt,
            "choice",
            correct,
            options=dict(options),
            explanations=explanations or {},
            level=_level(level),
        )
    )


def code(
    id,
    prompt,
    reference,
    cases,
    *,
    rtol=1e-9,
    atol=1e-12,
    mistakes=None,
    level=None,
    draw=None,
) -> Exercise:
    """Register a coding exercise: the student's function must match ``reference`` on
    every argument tuple.

    ``draw(rng)`` (optional) returns one more argument tuple from a
    ``numpy.random.Generator``: the grader adds such freshly drawn cases at grading
    time, so a function that only memorises ``cases`` fails.
    """
    if not callable(reference) or not cases:
        raise ValueError(
            "a code exercise needs a callable reference and at least one test case"
        )
    if draw is not None and not callable(draw):
        raise TypeError(
            f"draw must be a function of a numpy Generator, got {type(draw).__name__}"
        )
    return _register(
        Exercise(
            id,
            prompt,
            "code",
            reference,
            rtol=rtol,
            atol=atol,
            cases=list(cases),
            mistakes=mistakes or {},
            level=_level(level),
            draw=draw,
        )
    )


def registry() -> dict[str, Exercise]:
    """Every registered exercise (imports the chapter modules ``chNN.py`` and
    ``labs.py`` on first use)."""
    here = Path(__file__).parent
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if info.name.startswith("ch") or info.name == "labs":
            importlib.import_module(f"{__package__}.{info.name}")
    return EXERCISES


def _id_order(ex_id: str):
    """Sort key of an exercise id: ``"03.2"`` before ``"03.10"``."""
    return tuple(int(p) if p.isdigit() else p for p in ex_id.split("."))


def chapter_exercises(chapter: str) -> list[str]:
    """Ids of every registered exercise of ``chapter`` (e.g. ``"04"``), in order
    (``03.2`` before ``03.10``)."""
    ids = sorted(
        (k for k, e in registry().items() if e.chapter == chapter), key=_id_order
    )
    if not ids:
        known = sorted({e.chapter for e in registry().values()})
        raise ValueError(f"chapter must be one of {known}, got {chapter!r}")
    return ids


#: The notebooks of the book that hold exercises, and which: a whole chapter (its
#: number), or for the chapters shipped as several notebooks, the exercises of each part
#: that holds some (numbered on from where the previous one stops; chapter 3's
#: 03b_grpo_derivations holds none, its exercises close 03c_kl_term).
#: ``tests/exercises/test_grade_report.py`` and ``tests/exercises/test_numbering.py``
#: check this against ``book/``.
NOTEBOOKS = {
    "01_why": "01",
    "02_minimal_understanding": "02",
    "03_derivations": ("03.1", "03.2", "03.3", "03.4", "03.5"),
    "03c_kl_term": (
        "03.6",
        "03.7",
        "03.8",
        "03.9",
        "03.10",
        "03.11",
        "03.12",
        "03.13",
        "03.14",
    ),
    "04_code": "04",
    "05_production": ("05.1", "05.2", "05.3", "05.4", "05.5"),
    "05b_silent_pitfalls": ("05.6", "05.7"),
    "06_costs_and_limits": "06",
    "07_papers": "07",
    "08_misconceptions": "08",
    "09_hands_on": "09",
    "10_further_reading": "10",
}


def notebook_exercises(stem: str) -> list[str]:
    """Ids of the exercises the book's notebook ``stem`` (e.g. ``"03_derivations"``)
    holds, in the order of :func:`chapter_exercises`."""
    if stem not in NOTEBOOKS:
        raise ValueError(f"stem must be one of {sorted(NOTEBOOKS)}, got {stem!r}")
    held = NOTEBOOKS[stem]
    chapter = held if isinstance(held, str) else held[0].split(".")[0]
    return [i for i in chapter_exercises(chapter) if isinstance(held, str) or i in held]


def close(a, b, rtol, atol) -> bool:
    """Same shape, finite, and ``|a - b| <= atol + rtol |b|`` elementwise."""
    try:
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return (
        a.shape == b.shape
        and bool(np.all(np.isfinite(a)))
        and bool(np.allclose(a, b, rtol=rtol, atol=atol))
    )


def grading_cases(
    ex: Exercise, rng: np.random.Generator, n_drawn: int = 3
) -> list[tuple]:
    """The argument tuples a code exercise is graded on: its registered cases plus
    ``n_drawn`` drawn now."""
    cases = [tuple(c) for c in ex.cases]
    if ex.draw is not None:
        cases += [tuple(ex.draw(rng)) for _ in range(n_drawn)]
    return cases


def _copies(args):
    return [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]


def _value(fn):
    """``fn()`` as a float array, or None when it raises (a mistake undefined here)."""
    try:
        return np.asarray(fn(), dtype=np.float64)
    except Exception:  # noqa: BLE001  (a mistake that is undefined on a case has no value)
        return None


_VALUES: dict = {}  # (id(exercise), what) -> (exercise, value): computed once a batch


def _cached(ex: Exercise, what: str, fn):
    """``_value(fn)`` for exercise ``ex``, computed once (a reference or a mistake may
    run a simulation)."""
    key = (id(ex), what)
    if key not in _VALUES:
        _VALUES[key] = (ex, _value(fn))
    return _VALUES[key][1]


def _record_type(record) -> str:
    kind = record.get("kind")
    return str(record.get("type", "object")) if kind == "other" else str(kind)


def _numeric_reply(ex: Exercise, record) -> Reply:
    got = decode_array(record)
    if got is None:
        return Reply(
            "incorrect",
            tr(
                "expected a number or an array of numbers, got {type}",
                type=_record_type(record),
            ),
        )
    sol = _cached(ex, "solution", ex.solution)
    values = [
        (hint, _cached(ex, f"mistake {label}", v if callable(v) else lambda v=v: v))
        for label, (v, hint) in ex.mistakes.items()
    ]
    return numeric_reply(
        got,
        sol.shape,
        lambda a: within(a, sol, ex.rtol, ex.atol),
        [
            (hint, None if v is None else lambda a, v=v: _within_shaped(a, v, ex))
            for hint, v in values
        ],
        lambda a: within(a, sol, *close_tolerance(ex.rtol, ex.atol)),
        steps(exponents(sol, ex.rtol, ex.atol)),
    )


def _within_shaped(arr, value, ex) -> np.ndarray:
    if arr.shape != value.shape:
        return np.zeros(arr.size, dtype=bool)
    return within(arr, value, ex.rtol, ex.atol)


def _choice_reply(ex: Exercise, record) -> Reply:
    value = record.get("value") if record.get("kind") == "str" else None
    letter = value.strip().lower() if isinstance(value, str) else None
    if letter not in {k.lower() for k in ex.options}:
        return Reply(
            "incorrect",
            tr("answer with one of the letters {letters}", letters=sorted(ex.options)),
        )
    if letter == str(ex.reference).lower():
        return Reply("correct", tr("correct."))
    hint = {k.lower(): h for k, h in ex.explanations.items()}.get(letter)
    if hint is None:
        return Reply(
            "incorrect",
            tr("not this one. {hint}", hint=tr("Reread the section and try again.")),
        )
    return Reply("incorrect", tr("not this one. {hint}", hint=tr(hint)), tr(hint))


def _case_output(out):
    if isinstance(out, dict) and out.get("kind") == "error":
        error, _, message = str(out.get("message", "")).partition(": ")
        return CaseError(error, message)
    return decode_array(out)


def _output_matcher(ex: Exercise, fn, cases):
    """Whether an output is within tolerance of ``fn``'s on case ``j`` (never when
    ``fn`` is not a function or raises there)."""

    def matches(j, arr):
        want = _value(lambda: fn(*_copies(cases[j]))) if callable(fn) else None
        return (
            want is not None
            and arr.shape == want.shape
            and bool(within(arr, want, ex.rtol, ex.atol).all())
        )

    return matches


def _code_reply(ex: Exercise, record, cases) -> Reply:
    outputs = record.get("outputs") if record.get("kind") == "function" else None
    if record.get("kind") != "function":
        return Reply(
            "incorrect",
            tr("expected a function, got {type}", type=_record_type(record)),
        )
    if not isinstance(outputs, list) or cases is None or len(outputs) != len(cases):
        return Reply("incorrect")

    return code_reply(
        ((j, _case_output(o)) for j, o in enumerate(outputs)),
        len(cases),
        _output_matcher(ex, ex.reference, cases),
        [(hint, _output_matcher(ex, fn, cases)) for fn, hint in ex.mistakes.values()],
    )


def diagnose(ex: Exercise, record, cases=None) -> Reply:
    """The verdict, the self-check's message and the mistake recognised, for one answer
    record extracted from a kernel (see :mod:`._wire`), against the full key.

    ``cases`` (code exercises) are the argument tuples the record's outputs answer, in
    order. A malformed record is ``incorrect``; it never raises.
    """
    if not isinstance(record, dict) or record.get("kind") == "none":
        return Reply("not attempted")
    reply = {
        "numeric": lambda: _numeric_reply(ex, record),
        "choice": lambda: _choice_reply(ex, record),
        "code": lambda: _code_reply(ex, record, cases),
    }[ex.kind]
    return reply()


def judge(ex: Exercise, record, cases=None) -> str:
    """The verdict for one answer record extracted from a kernel (see :mod:`._wire`),
    against the full key (:func:`diagnose`'s status).

    ``cases`` (code exercises) are the argument tuples the record's outputs answer, in
    order. A malformed record is ``incorrect``; it never raises.
    """
    return diagnose(ex, record, cases).status
