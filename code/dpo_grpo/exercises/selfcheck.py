"""Students' ``check(exercise_id, answer)``: feedback and hints for common mistakes,
without the answer key.

This module never imports the chapter registries (``chNN.py``, which hold the reference
answers). It reads only the hashed key in ``_selfcheck_key.py``, generated from the
registry by ``python -m dpo_grpo.exercises selfcheck-key``:

- a number or array is quantised elementwise on a grid whose step (a power of two) is at
  most the exercise's tolerance, ``atol + rtol |reference|``; the key stores the step's
  exponent, a half-step offset chosen so that the reference sits in the middle half of
  its cell, and a salted SHA-256 of the cells. An answer passes when its cells hash to
  the same digest: anything within a quarter step (at least an eighth of the tolerance)
  of the reference passes, and anything that passes is within the tolerance. The same
  fingerprint, with looser tolerances, says "close", and each registered common mistake
  has its own fingerprint, so its hint still shows;
- a multiple-choice answer is a salted hash of the letter, and each wrong letter's hint
  is keyed by its hash;
- a coding exercise stores its test inputs and the fingerprints of the reference's
  outputs on them.

What this does not hide (``book/teaching.md`` says it plainly): the order of magnitude
of each number (the step), shapes, and anything a student can recover by trying
candidates against the hashes or against ``check`` itself.

When the grader runs a notebook (the environment variables below are set in its
sandbox), ``check`` also appends the submitted answer as data to the grader's answer
file; for a coding exercise it runs the student's function on the test inputs the grader
drew and records the outputs. The grader, not this function, decides the verdicts.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np

from ._wire import decode_value, encode_answer, encode_value
from ..i18n import tr
from .core import Feedback

# the file check() appends answers to, inside the grader's sandbox
ANSWERS_ENV = "DPO_GRPO_ANSWERS"
# the grader's test inputs for coding exercises (JSON), inside the sandbox
CASES_ENV = "DPO_GRPO_CASES"
_CLOSE_RTOL, _CLOSE_ATOL_FACTOR = 5e-3, 10.0


def _salt(exercise_id: str) -> str:
    return hashlib.sha256(f"dpo_grpo selfcheck {exercise_id}".encode()).hexdigest()[:16]


def _digest(salt: str, tier: str, values) -> str:
    return hashlib.sha256(f"{salt}|{tier}|{values}".encode()).hexdigest()


def _cells(arr, exps, offs):
    cells = np.floor(
        arr.ravel() / np.exp2(np.asarray(exps, dtype=np.float64))
        + 0.5 * np.asarray(offs)
    )
    return f"{list(arr.shape)}:" + ",".join(repr(float(c)) for c in cells)


def fingerprint(value, rtol: float, atol: float, salt: str, tier: str) -> dict:
    """The hashed form of ``value`` at tolerance ``atol + rtol |value|`` (see the module
    docstring)."""
    arr = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("value must be finite to be fingerprinted")
    tol = atol + rtol * np.abs(arr.ravel())
    exps = np.floor(np.log2(tol)).astype(int)
    frac = np.mod(arr.ravel() / np.exp2(exps.astype(np.float64)), 1.0)
    offs = np.where((frac >= 0.25) & (frac < 0.75), 0, 1)
    return {
        "shape": list(arr.shape),
        "e": exps.tolist(),
        "o": offs.tolist(),
        "h": _digest(salt, tier, _cells(arr, exps, offs)),
    }


def matches(arr, fp, salt: str, tier: str) -> bool:
    """Whether float array ``arr`` falls in the cells fingerprinted by ``fp``."""
    if fp is None or list(arr.shape) != fp["shape"] or not np.all(np.isfinite(arr)):
        return False
    return _digest(salt, tier, _cells(arr, fp["e"], fp["o"])) == fp["h"]


def _try_fingerprint(fn, rtol, atol, salt, tier):
    try:
        return fingerprint(fn(), rtol, atol, salt, tier)
    except Exception:  # noqa: BLE001  (a mistake that is undefined on this case simply has no fingerprint)
        return None


def key_entry(ex) -> dict:
    """The hashed self-check entry of a registered
    :class:`~dpo_grpo.exercises.core.Exercise`."""
    salt = _salt(ex.id)
    entry = {"kind": ex.kind, "rtol": ex.rtol, "atol": ex.atol}
    if ex.kind == "choice":
        entry.update(
            options=sorted(ex.options),
            answer=_digest(salt, "choice", ex.reference.lower()),
            hints={
                _digest(salt, "choice", k.lower()): h
                for k, h in ex.explanations.items()
            },
        )
        return entry
    close_rtol, close_atol = (
        max(10 * ex.rtol, _CLOSE_RTOL),
        _CLOSE_ATOL_FACTOR * ex.atol,
    )
    if ex.kind == "numeric":
        sol = ex.solution()
        entry.update(
            exact=fingerprint(sol, ex.rtol, ex.atol, salt, "exact"),
            close=fingerprint(sol, close_rtol, close_atol, salt, "close"),
            mistakes=[
                {
                    "hint": hint,
                    "fp": _try_fingerprint(
                        value if callable(value) else (lambda v=value: v),
                        ex.rtol,
                        ex.atol,
                        salt,
                        f"mistake{i}",
                    ),
                }
                for i, (value, hint) in enumerate(ex.mistakes.values())
            ],
        )
        return entry

    def _copies(args):
        return [
            np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args
        ]

    entry.update(
        cases=[encode_value(tuple(c)) for c in ex.cases],
        outputs=[
            fingerprint(ex.reference(*_copies(c)), ex.rtol, ex.atol, salt, f"case{j}")
            for j, c in enumerate(ex.cases)
        ],
        mistakes=[
            {
                "hint": hint,
                "outputs": [
                    _try_fingerprint(
                        lambda c=c: fn(*_copies(c)),
                        ex.rtol,
                        ex.atol,
                        salt,
                        f"mistake{i}case{j}",
                    )
                    if callable(fn)
                    else None
                    for j, c in enumerate(ex.cases)
                ],
            }
            for i, (fn, hint) in enumerate(ex.mistakes.values())
        ],
    )
    return entry


def build_key(exercises) -> dict:
    """The hashed key of every exercise in ``exercises`` (id -> Exercise)."""
    return {ex_id: key_entry(exercises[ex_id]) for ex_id in sorted(exercises)}


def key_module_source(key: dict) -> str:
    """Python source of ``_selfcheck_key.py`` holding ``key`` (one line per
    exercise)."""
    lines = [
        '"""Generated by ``python -m dpo_grpo.exercises selfcheck-key``: the hashed '
        "self-check key (no answers).",
        "",
        'Regenerate it after adding or changing an exercise in ``chNN.py``."""',
        "",
        "import json",
        "",
        "KEY = {}",
    ]
    for ex_id, entry in key.items():
        lines.append(
            f"KEY[{ex_id!r}] = json.loads({json.dumps(entry, ensure_ascii=False)!r})"
        )
    return "\n".join(lines) + "\n"


def _key() -> dict:
    from ._selfcheck_key import KEY

    return KEY


def _check_numeric(entry, salt, answer):
    try:
        arr = np.asarray(answer, dtype=np.float64)
    except (TypeError, ValueError):
        return (
            "incorrect",
            tr(
                "expected a number or an array of numbers, got {type}",
                type=type(answer).__name__,
            ),
        )
    shape = tuple(entry["exact"]["shape"])
    if arr.shape != shape:
        return "incorrect", tr(
            "expected shape {want}, got {got}", want=shape, got=arr.shape
        )
    if not np.all(np.isfinite(arr)):
        return "incorrect", tr("your answer contains NaN or inf")
    if matches(arr, entry["exact"], salt, "exact"):
        return "correct", tr("correct.")
    for i, m in enumerate(entry["mistakes"]):
        if matches(arr, m["fp"], salt, f"mistake{i}"):
            return "incorrect", tr("not quite. {hint}", hint=tr(m["hint"]))
    rtol, atol = entry["rtol"], entry["atol"]
    if matches(arr, entry["close"], salt, "close"):
        return "incorrect", tr(
            "close, but not within tolerance (rtol={rtol:g}, atol={atol:g}). If you "
            "rounded, keep at least five significant figures.",
            rtol=rtol,
            atol=atol,
        )
    return (
        "incorrect",
        tr(
            "not within tolerance (rtol={rtol:g}, atol={atol:g}). Recheck your "
            "computation.",
            rtol=rtol,
            atol=atol,
        ),
    )


def _check_choice(entry, salt, answer):
    if not isinstance(answer, str) or answer.strip().lower() not in {
        k.lower() for k in entry["options"]
    }:
        return "incorrect", tr(
            "answer with one of the letters {letters}", letters=entry["options"]
        )
    h = _digest(salt, "choice", answer.strip().lower())
    if h == entry["answer"]:
        return "correct", tr("correct.")
    hint = entry["hints"].get(h)
    return "incorrect", tr(
        "not this one. {hint}",
        hint=tr("Reread the section and try again.") if hint is None else tr(hint),
    )


def _check_code(entry, salt, answer):
    if not callable(answer):
        return "incorrect", tr(
            "expected a function, got {type}", type=type(answer).__name__
        )
    cases = [decode_value(c) for c in entry["cases"]]
    for j, args in enumerate(cases):
        try:
            got = answer(*args)
        except (
            Exception
        ) as exc:  # the student's code raised: report it, don't crash the notebook
            return (
                "error",
                tr(
                    "your function raised {error} on test case {j}: {exc}",
                    error=type(exc).__name__,
                    j=j + 1,
                    exc=exc,
                ),
            )
        try:
            arr = np.asarray(got, dtype=np.float64)
        except (TypeError, ValueError):
            arr = None
        if arr is not None and matches(arr, entry["outputs"][j], salt, f"case{j}"):
            continue
        for i, m in enumerate(entry["mistakes"]):
            if arr is not None and matches(
                arr, m["outputs"][j], salt, f"mistake{i}case{j}"
            ):
                return "incorrect", tr(
                    "test case {j} fails. {hint}", j=j + 1, hint=tr(m["hint"])
                )
        return (
            "incorrect",
            tr("test case {j} of {n} gives a different result.", j=j + 1, n=len(cases)),
        )
    return "correct", tr("correct on all {n} test cases.", n=len(cases))


def record_answer(exercise_id: str, answer) -> None:
    """Inside the grader's sandbox: append the submitted answer, as data, to the
    grader's answer file."""
    path = os.environ.get(ANSWERS_ENV)
    if not path:
        return
    if callable(answer) and os.environ.get(CASES_ENV):
        with open(os.environ[CASES_ENV], encoding="utf-8") as fh:
            cases = [decode_value(c) for c in json.load(fh).get(exercise_id, [])]
        outputs = []
        for args in cases:
            try:
                outputs.append(encode_answer(answer(*args)))
            except Exception as exc:  # noqa: BLE001  (recorded as an error verdict by the grader)
                outputs.append(
                    {"kind": "error", "message": f"{type(exc).__name__}: {exc}"[:300]}
                )
        record = {"kind": "function", "outputs": outputs}
    else:
        record = encode_answer(answer)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": exercise_id, "answer": record}) + "\n")


def check(exercise_id: str, answer) -> Feedback:
    """Check ``answer`` for exercise ``exercise_id`` (e.g. ``"03.2"``); returns (and
    displays) a :class:`Feedback`.

    ``answer=None`` (or ``...``) means "not attempted yet". Feedback never contains the
    expected answer.
    """
    key = _key()
    if not isinstance(exercise_id, str) or exercise_id not in key:
        raise ValueError(
            f"unknown exercise id {exercise_id!r}; known ids: {', '.join(sorted(key))}"
        )
    entry, salt = key[exercise_id], _salt(exercise_id)
    if answer is None or answer is Ellipsis:
        status, message = (
            "not attempted",
            tr("replace None with your answer and run the cell again."),
        )
    else:
        checker = {
            "numeric": _check_numeric,
            "choice": _check_choice,
            "code": _check_code,
        }[entry["kind"]]
        try:
            status, message = checker(entry, salt, answer)
        except Exception as exc:  # never let a checker crash a student's notebook
            status, message = (
                "error",
                tr(
                    "could not check this answer ({error}: {exc})",
                    error=type(exc).__name__,
                    exc=exc,
                ),
            )
    record_answer(exercise_id, answer)
    return Feedback(exercise_id, status, message)
