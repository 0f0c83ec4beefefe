"""Auto-checked exercises: a registry of exercises and ``check(exercise_id, answer)``.

Three kinds: ``numeric`` (a number or array, compared with a tolerance), ``choice`` (one option letter) and
``code`` (a function, run on test cases against a reference implementation). Feedback never reveals the expected
answer; it names common mistakes (ddof 1 vs 0, a forgotten reference gap...) when an answer matches one.
When the environment variable ``DPO_GRPO_GRADE_LOG`` names a file, every check appends one JSON line to it: this
is how :mod:`dpo_grpo.exercises.grade` collects verdicts from a notebook it executes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

GRADE_LOG_ENV = "DPO_GRPO_GRADE_LOG"
EXERCISES: dict[str, "Exercise"] = {}


@dataclass
class Exercise:
    """One exercise. ``reference`` computes the answer (numeric/choice) or is the reference function (code)."""

    id: str
    prompt: str
    kind: str
    reference: Any
    rtol: float = 1e-4
    atol: float = 1e-6
    options: dict = field(default_factory=dict)  # choice: letter -> text
    explanations: dict = field(default_factory=dict)  # choice: wrong letter -> hint
    mistakes: dict = field(default_factory=dict)  # label -> (value or callable giving it, hint)
    cases: list = field(default_factory=list)  # code: list of argument tuples
    level: int | None = None  # 1 = recall/compute, 2 = apply, 3 = derive

    def solution(self):
        """The reference answer (for tests and instructors; never shown by :func:`check`)."""
        if self.kind == "code":
            return self.reference
        return self.reference() if callable(self.reference) else self.reference


@dataclass
class Feedback:
    exercise_id: str
    status: str  # "correct" | "incorrect" | "not attempted" | "error"
    message: str

    def __bool__(self):
        return self.status == "correct"

    def __repr__(self):
        mark = {"correct": "✅", "incorrect": "❌", "not attempted": "…", "error": "⚠️"}[self.status]
        return f"{mark} Exercise {self.exercise_id}: {self.message}"

    _repr_pretty_ = lambda self, p, cycle: p.text(repr(self))  # noqa: E731  (IPython display)


def _register(ex: Exercise) -> Exercise:
    if ex.id in EXERCISES:
        raise ValueError(f"exercise id {ex.id!r} is registered twice")
    EXERCISES[ex.id] = ex
    return ex


def _level(level):
    if level is not None and (isinstance(level, bool) or level not in (1, 2, 3)):
        raise ValueError(f"level must be 1 (recall/compute), 2 (apply), 3 (derive) or None, got {level!r}")
    return level


def numeric(id, prompt, reference, *, rtol=5e-4, atol=5e-5, mistakes=None, level=None) -> Exercise:
    """Register a numeric exercise; ``reference`` is a value or a zero-argument function computing it."""
    return _register(Exercise(id, prompt, "numeric", reference, rtol=rtol, atol=atol, mistakes=mistakes or {},
                              level=_level(level)))


def choice(id, prompt, options, correct, *, explanations=None, level=None) -> Exercise:
    """Register a multiple-choice exercise; ``options`` maps letters to texts, ``correct`` is a letter."""
    if correct not in options:
        raise ValueError(f"correct answer {correct!r} is not one of the options {sorted(options)}")
    return _register(Exercise(id, prompt, "choice", correct, options=dict(options),
                              explanations=explanations or {}, level=_level(level)))


def code(id, prompt, reference, cases, *, rtol=1e-9, atol=1e-12, mistakes=None, level=None) -> Exercise:
    """Register a coding exercise: the student's function must match ``reference`` on every argument tuple."""
    if not callable(reference) or not cases:
        raise ValueError("a code exercise needs a callable reference and at least one test case")
    return _register(Exercise(id, prompt, "code", reference, rtol=rtol, atol=atol, cases=list(cases),
                              mistakes=mistakes or {}, level=_level(level)))


def _close(a, b, rtol, atol) -> bool:
    try:
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return a.shape == b.shape and bool(np.all(np.isfinite(a))) and bool(np.allclose(a, b, rtol=rtol, atol=atol))


def _mistake_hint(ex: Exercise, answer) -> str | None:
    """The hint of the first registered mistake that ``answer`` matches (numeric exercises)."""
    for value, hint in ex.mistakes.values():
        target = value() if callable(value) else value
        if _close(answer, target, ex.rtol, ex.atol):
            return hint
    return None


def _check_numeric(ex, answer):
    try:
        arr = np.asarray(answer, dtype=np.float64)
    except (TypeError, ValueError):
        return "incorrect", f"expected a number or an array of numbers, got {type(answer).__name__}"
    expected = np.asarray(ex.solution(), dtype=np.float64)
    if arr.shape != expected.shape:
        return "incorrect", f"expected shape {expected.shape}, got {arr.shape}"
    if not np.all(np.isfinite(arr)):
        return "incorrect", "your answer contains NaN or inf"
    if _close(arr, expected, ex.rtol, ex.atol):
        return "correct", "correct."
    hint = _mistake_hint(ex, arr)
    if hint:
        return "incorrect", f"not quite. {hint}"
    if _close(arr, expected, max(10 * ex.rtol, 5e-3), 10 * ex.atol):
        return "incorrect", (f"close, but not within tolerance (rtol={ex.rtol:g}, atol={ex.atol:g}). If you rounded, "
                             "keep at least four significant figures.")
    return "incorrect", f"not within tolerance (rtol={ex.rtol:g}, atol={ex.atol:g}). Recheck your computation."


def _check_choice(ex, answer):
    if not isinstance(answer, str) or answer.strip().upper() not in {k.upper() for k in ex.options}:
        return "incorrect", f"answer with one of the letters {sorted(ex.options)}"
    letter = next(k for k in ex.options if k.upper() == answer.strip().upper())
    if letter == ex.reference:
        return "correct", "correct."
    return "incorrect", "not this one. " + ex.explanations.get(letter, "Reread the section and try again.")


def _check_code(ex, answer):
    if not callable(answer):
        return "incorrect", f"expected a function, got {type(answer).__name__}"
    for i, args in enumerate(ex.cases):
        copies = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
        try:
            got = answer(*copies)
        except Exception as exc:  # the student's code raised: report it, don't crash the notebook
            return "error", f"your function raised {type(exc).__name__} on test case {i + 1}: {exc}"
        want = ex.reference(*args)
        if not _close(got, want, ex.rtol, ex.atol):
            for label, (wrong_fn, hint) in ex.mistakes.items():
                if callable(wrong_fn) and _close(got, wrong_fn(*args), ex.rtol, ex.atol):
                    return "incorrect", f"test case {i + 1} fails. {hint}"
            return "incorrect", f"test case {i + 1} of {len(ex.cases)} gives a different result."
    return "correct", f"correct on all {len(ex.cases)} test cases."


def check(exercise_id: str, answer) -> Feedback:
    """Check ``answer`` for exercise ``exercise_id`` (e.g. ``"03.2"``); returns (and displays) a :class:`Feedback`.

    ``answer=None`` (or ``...``) means "not attempted yet".
    """
    if exercise_id not in EXERCISES:
        raise ValueError(f"unknown exercise id {exercise_id!r}; known ids: {', '.join(sorted(EXERCISES))}")
    ex = EXERCISES[exercise_id]
    if answer is None or answer is Ellipsis:
        status, message = "not attempted", "replace None with your answer and run the cell again."
    else:
        checker = {"numeric": _check_numeric, "choice": _check_choice, "code": _check_code}[ex.kind]
        try:
            status, message = checker(ex, answer)
        except Exception as exc:  # never let a checker crash a student's notebook
            status, message = "error", f"could not check this answer ({type(exc).__name__}: {exc})"
    fb = Feedback(exercise_id, status, message)
    log = os.environ.get(GRADE_LOG_ENV)
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"id": exercise_id, "status": status, "message": message}) + "\n")
    return fb
