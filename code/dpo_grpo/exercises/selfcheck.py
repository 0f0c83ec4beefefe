"""Students' ``check(exercise_id, answer)``: feedback and hints for common mistakes,
without the answer key.

This module never imports the chapter registries (``chNN.py``, which hold the reference
answers). It reads only the hashed key in ``_selfcheck_key.py``, generated from the
registry by ``python -m dpo_grpo.exercises selfcheck-key --out`` :data:`KEY_MODULE`
(without ``--out`` it writes into the working directory). The grader
(:func:`.core.judge`) applies the same rule to the full key, so the two agree on every
answer (:mod:`.tolerance`).

**The key.** ``KEY[id]`` is JSON data. Its ``salt`` is not stored: it is the first 16
hexadecimal digits of ``sha256("dpo_grpo selfcheck " + id)``. Every hash below is the
first 16 hexadecimal digits of the SHA-256 of the UTF-8 string ``salt|tier|i|k``:
``tier`` names what is hashed, ``i`` is a value's index in the array flattened in C
order (0 for a number), ``k`` a step index written as a decimal integer (``-3``, ``0``,
``1024``).

- A *fingerprint* ``{"shape": [...], "e": [...], "o": [...], "h": [...]}`` holds, per
  value of a reference (a number, or each element of an array), the exponent ``e`` of
  its tolerance ``w = 2**e`` (the exercise's ``atol + rtol |ref|`` rounded down to a
  power of two), the offset ``o = fmod(ref, w)`` and the hash ``h`` of its step index
  ``n = (ref - o) / w``. A value ``x`` is *within* it when, with
  ``y = (x - o) / w`` computed in double precision, ``x`` and ``y`` are finite,
  ``|y| < 2**52``, and one of the integers ``k = floor(y) - 2, ..., floor(y) + 2`` has
  ``|y - k| <= 1`` and the hash of ``k`` equal to ``h``: then ``|x - ref| <= w`` (up to
  the rounding of ``x - o``). An answer *matches* a fingerprint when it has its shape
  and every value is within it.
- A numeric exercise: ``exact`` is the answer's fingerprint (tier ``exact``), ``close``
  its fingerprint at the looser tolerance of the "close" tier (tier ``close``:
  ``max(10 rtol, 0.005)`` and ``10 atol``), and ``mistakes`` lists ``{"hint", "fp"}``,
  the fingerprint of each registered mistake at the exercise's tolerance (tier
  ``mistake0``, ``mistake1``, ...; null where the mistake has no value). The reply:
  correct if the answer matches ``exact``; otherwise the hint of the first mistake it
  matches; otherwise "close" if it matches ``close``, or not; both name the values that
  are not within ``exact`` and their ``w``.
- A multiple-choice exercise: ``answer`` is the hash of the correct letter, lower case,
  with tier ``choice`` and nothing for ``i`` and ``k`` (``salt|choice|b``); ``hints``
  maps the hash of each explained wrong letter to its hint.
- A coding exercise: ``cases`` are the test inputs (:mod:`._wire`), ``outputs`` the
  fingerprints of the reference's outputs on them (tier ``case0``, ``case1``, ...), and
  each mistake's ``outputs`` the fingerprints of its outputs (tier ``mistake0case1``,
  ...).

What this does not hide (``book/teaching.md`` says it plainly): the order of magnitude
of each value (``e``), its digits below the tolerance (``o``), shapes, and anything a
student can recover by trying candidates against the hashes, value by value, or against
``check`` itself.

When the grader runs a notebook (the environment variables below are set in its
sandbox, whose copy of the package holds no key), ``check`` gives no feedback: it
appends the submitted answer as data to the grader's answer file (``None`` too: it
marks the exercise untouched, and never replaces an answer); for a coding exercise it
runs the student's function on the test inputs the grader drew and records the
outputs. The grader, not this function, decides the verdicts.
"""

from __future__ import annotations

import hashlib
import json
import math
import os

import numpy as np

from ..i18n import tr
from ._wire import decode_value, encode_answer, encode_value
from .core import Feedback
from .feedback import CaseError, Reply, code_reply, numeric_reply
from .tolerance import MAX_STEPS, close_tolerance, grid, positions, steps

#: the package's hashed key, as a maintainer names it (``--out``) from the checkout
KEY_MODULE = "code/dpo_grpo/exercises/_selfcheck_key.py"
# the file check() appends answers to, inside the grader's sandbox
ANSWERS_ENV = "DPO_GRPO_ANSWERS"
# the grader's test inputs for coding exercises (JSON), inside the sandbox
CASES_ENV = "DPO_GRPO_CASES"


def _salt(exercise_id: str) -> str:
    return hashlib.sha256(f"dpo_grpo selfcheck {exercise_id}".encode()).hexdigest()[:16]


def _digest(salt: str, tier: str, *parts) -> str:
    text = "|".join([salt, tier, *map(str, parts)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def fingerprint(value, rtol: float, atol: float, salt: str, tier: str) -> dict:
    """The hashed form of ``value`` at its tolerance (see the module docstring)."""
    arr = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("value must be finite to be fingerprinted")
    e, o, n = grid(arr, rtol, atol)
    return {
        "shape": list(arr.shape),
        "e": e.tolist(),
        "o": o.tolist(),
        "h": [_digest(salt, tier, i, int(k)) for i, k in enumerate(n)],
    }


def within_fingerprint(arr, fp, salt: str, tier: str) -> np.ndarray:
    """Per value of float array ``arr`` (flattened): whether it is within the
    fingerprint ``fp``'s tolerance; all False when ``fp`` is None or has another
    shape."""
    arr = np.asarray(arr, dtype=np.float64)
    if fp is None or list(arr.shape) != fp["shape"]:
        return np.zeros(arr.size, dtype=bool)
    out = np.zeros(arr.size, dtype=bool)
    for i, (y, h) in enumerate(zip(positions(arr, fp["e"], fp["o"]), fp["h"])):
        if math.isfinite(y) and abs(y) < MAX_STEPS:
            f = math.floor(y)
            out[i] = any(
                abs(y - k) <= 1 and _digest(salt, tier, i, k) == h
                for k in range(f - 2, f + 3)
            )
    return out


def matches(arr, fp, salt: str, tier: str) -> bool:
    """Whether float array ``arr`` matches the fingerprint ``fp``: its shape, every
    value within."""
    return fp is not None and bool(within_fingerprint(arr, fp, salt, tier).all())


def _try_fingerprint(fn, rtol, atol, salt, tier):
    try:
        return fingerprint(fn(), rtol, atol, salt, tier)
    except Exception:  # noqa: BLE001  (a mistake that is undefined on this case simply has no fingerprint)
        return None


def _copies(args):
    return [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]


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
    if ex.kind == "numeric":
        sol = ex.solution()
        entry.update(
            exact=fingerprint(sol, ex.rtol, ex.atol, salt, "exact"),
            close=fingerprint(sol, *close_tolerance(ex.rtol, ex.atol), salt, "close"),
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
                        lambda c=c, fn=fn: fn(*_copies(c)),
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
        (
            '"""Generated by ``python -m dpo_grpo.exercises selfcheck-key --out '
            f"{KEY_MODULE}``: the hashed self-check key (no answers)."
        ),
        "",
        (
            "Its format and the rule that reads it: the docstring of "
            "``dpo_grpo.exercises.selfcheck``."
        ),
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
    exact = entry["exact"]
    return numeric_reply(
        answer,
        exact["shape"],
        lambda a: within_fingerprint(a, exact, salt, "exact"),
        [
            (
                m["hint"],
                lambda a, i=i, fp=m["fp"]: within_fingerprint(
                    a, fp, salt, f"mistake{i}"
                ),
            )
            for i, m in enumerate(entry["mistakes"])
        ],
        lambda a: within_fingerprint(a, entry["close"], salt, "close"),
        steps(exact["e"]),
    )


def _check_choice(entry, salt, answer):
    if not isinstance(answer, str) or answer.strip().lower() not in {
        k.lower() for k in entry["options"]
    }:
        return Reply(
            "incorrect",
            tr("answer with one of the letters {letters}", letters=entry["options"]),
        )
    h = _digest(salt, "choice", answer.strip().lower())
    if h == entry["answer"]:
        return Reply("correct", tr("correct."))
    hint = entry["hints"].get(h)
    if hint is None:
        return Reply(
            "incorrect",
            tr("not this one. {hint}", hint=tr("Reread the section and try again.")),
        )
    return Reply("incorrect", tr("not this one. {hint}", hint=tr(hint)), tr(hint))


def _outputs(answer, cases):
    """``(j, output)`` of the student's function on each case, run lazily."""
    for j, args in enumerate(cases):
        try:
            got = answer(*args)
        except Exception as exc:  # noqa: BLE001  (the student's code raised: report it)
            yield j, CaseError(type(exc).__name__, str(exc))
            return
        try:
            yield j, np.asarray(got, dtype=np.float64)
        except (TypeError, ValueError):
            yield j, None


def _check_code(entry, salt, answer):
    if not callable(answer):
        return Reply(
            "incorrect",
            tr("expected a function, got {type}", type=type(answer).__name__),
        )
    cases = [decode_value(c) for c in entry["cases"]]
    return code_reply(
        _outputs(answer, cases),
        len(cases),
        lambda j, a: matches(a, entry["outputs"][j], salt, f"case{j}"),
        [
            (
                m["hint"],
                lambda j, a, i=i, m=m: matches(
                    a, m["outputs"][j], salt, f"mistake{i}case{j}"
                ),
            )
            for i, m in enumerate(entry["mistakes"])
        ],
    )


def record_answer(exercise_id: str, answer) -> None:
    """Inside the grader's sandbox: append the submitted answer, as data, to the
    grader's answer file (``None`` as ``{"kind": "none"}``: untouched)."""
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

    ``answer=None`` (or ``...``) means "not attempted yet" (the grader still counts an
    answer this exercise was given before). Feedback never contains the expected
    answer. In the grader's sandbox, which holds no key, it only records the answer
    (as the graded edition's :func:`.record.check` does).
    """
    if os.environ.get(ANSWERS_ENV):
        from .record import check as record_only

        return record_only(exercise_id, answer)
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
            reply = checker(entry, salt, answer)
            status, message = reply.status, reply.message
        except Exception as exc:  # noqa: BLE001  (a checker never crashes a notebook)
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
