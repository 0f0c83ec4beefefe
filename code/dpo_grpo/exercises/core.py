"""The instructor's side of the exercises: the registry with the full answer key, and
the comparisons the grader makes with it.

Three kinds: ``numeric`` (a number or array, compared with a tolerance), ``choice`` (one
option letter) and ``code`` (a function, run on test cases against a reference
implementation). Each chapter registers its exercises in ``chNN.py``; :func:`registry`
imports them all. Students never need this module: their ``check()`` lives in
:mod:`dpo_grpo.exercises.selfcheck` and reads only the hashed key
``selfcheck_key.json``. The grader (:mod:`dpo_grpo.exercises.grade`) compares the
answers it extracts from a student's kernel with this key (:func:`judge`), in its own
process.
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

EXERCISES: dict[str, "Exercise"] = {}
VERDICTS = (
    "correct",
    "incorrect",
    "error",
    "not attempted",
    "not reached",
    "timeout",
    "invalid notebook",
)


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
    id, prompt, reference, *, rtol=5e-4, atol=5e-5, mistakes=None, level=None
) -> Exercise:
    """Register a numeric exercise; ``reference`` is a value or a zero-argument function
    computing it."""
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


def chapter_exercises(chapter: str) -> list[str]:
    """Ids of every registered exercise of ``chapter`` (e.g. ``"04"``), in order."""
    ids = sorted(k for k, e in registry().items() if e.chapter == chapter)
    if not ids:
        known = sorted({e.chapter for e in registry().values()})
        raise ValueError(f"chapter must be one of {known}, got {chapter!r}")
    return ids


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


def judge(ex: Exercise, record, cases=None) -> str:
    """The verdict for one answer record extracted from a kernel (see :mod:`._wire`),
    against the full key.

    ``cases`` (code exercises) are the argument tuples the record's outputs answer, in
    order. A malformed record is ``incorrect``; it never raises.
    """
    if not isinstance(record, dict) or record.get("kind") == "none":
        return "not attempted"
    if ex.kind == "numeric":
        got = decode_array(record)
        return (
            "correct"
            if got is not None and close(got, ex.solution(), ex.rtol, ex.atol)
            else "incorrect"
        )
    if ex.kind == "choice":
        value = record.get("value") if record.get("kind") == "str" else None
        ok = (
            isinstance(value, str)
            and value.strip().lower() == str(ex.reference).lower()
        )
        return "correct" if ok else "incorrect"
    outputs = record.get("outputs") if record.get("kind") == "function" else None
    if not isinstance(outputs, list) or cases is None or len(outputs) != len(cases):
        return "incorrect"
    if any(isinstance(o, dict) and o.get("kind") == "error" for o in outputs):
        return "error"
    for args, out in zip(cases, outputs):
        want = ex.reference(
            *[np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
        )
        got = decode_array(out)
        if got is None or not close(got, want, ex.rtol, ex.atol):
            return "incorrect"
    return "correct"
