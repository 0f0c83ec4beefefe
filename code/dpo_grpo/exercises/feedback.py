"""What is said about an answer: one verdict, one message and one named mistake, the
same whether the self-check (:mod:`.selfcheck`, hashed key) or the grader
(:func:`.core.diagnose`, full key) looks at it. Each passes its own matchers (hashes, or
the reference values) to the functions below, which apply the tolerance rule of
:mod:`.tolerance` in the same order: the answer, then each registered mistake, then the
"close" tier.

A message states only what is true of the answer: it names the values that are not
within their tolerance and that tolerance, never a tolerance the answer meets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..i18n import N_, tr

#: the named mistake of an answer in the "close" tier (the class summary counts it)
CLOSE = N_("close, but not within the tolerance: keep more significant figures")


@dataclass(frozen=True)
class Reply:
    """``status`` (``correct``, ``incorrect``, ``error``, ``not attempted``), the
    ``message`` a student or a teacher reads, and the ``mistake`` recognised (a
    registered mistake's hint, :data:`CLOSE`, or empty)."""

    status: str
    message: str = ""
    mistake: str = ""


def _tolerances(widths, which) -> str:
    return ", ".join(f"±{widths[i]:.3g}" for i in which)


def outside_message(ok, widths, close: bool) -> str:
    """The message for a numeric answer whose values ``ok`` says are (not) within their
    tolerance ``widths`` (both flattened); ``close``: within the "close" tier."""
    bad = [int(i) for i in np.flatnonzero(~np.asarray(ok, dtype=bool))]
    if len(ok) == 1 and close:
        return tr(
            "close, but not within the tolerance ({tols}): keep more significant "
            "figures.",
            tols=_tolerances(widths, bad),
        )
    if len(ok) == 1:
        return tr(
            "not within the tolerance ({tols}). Recheck your computation.",
            tols=_tolerances(widths, bad),
        )
    fields = {
        "which": ", ".join(str(i + 1) for i in bad),
        "n": len(ok),
        "tols": _tolerances(widths, bad),
    }
    if close:
        return tr(
            "close, but not within the tolerance at positions {which} of {n} "
            "({tols}): keep more significant figures.",
            **fields,
        )
    return tr(
        "not within the tolerance at positions {which} of {n} ({tols}). Recheck your "
        "computation.",
        **fields,
    )


def numeric_reply(answer, shape, exact, mistakes, close, widths) -> Reply:
    """The reply to ``answer`` for a numeric exercise whose reference has ``shape``.

    ``exact(arr)`` and ``close(arr)`` say, per value, whether ``arr`` is within the
    tolerance (within the "close" tier); ``mistakes`` lists ``(hint, matches)`` with
    ``matches(arr)`` the same for a registered mistake (None when it has no value);
    ``widths`` are the tolerances (flattened)."""
    try:
        arr = np.asarray(answer, dtype=np.float64)
    except (TypeError, ValueError):
        return Reply(
            "incorrect",
            tr(
                "expected a number or an array of numbers, got {type}",
                type=type(answer).__name__,
            ),
        )
    if arr.shape != tuple(shape):
        return Reply(
            "incorrect",
            tr("expected shape {want}, got {got}", want=tuple(shape), got=arr.shape),
        )
    if not np.all(np.isfinite(arr)):
        return Reply("incorrect", tr("your answer contains NaN or inf"))
    ok = exact(arr)
    if ok.all():
        return Reply("correct", tr("correct."))
    for hint, matches in mistakes:
        if matches is not None and matches(arr).all():
            return Reply("incorrect", tr("not quite. {hint}", hint=tr(hint)), tr(hint))
    is_close = bool(close(arr).all())
    return Reply(
        "incorrect",
        outside_message(ok, widths, is_close),
        tr(CLOSE) if is_close else "",
    )


@dataclass(frozen=True)
class CaseError:
    """What a student's function raised on a test case: the exception's type name and
    message."""

    error: str
    message: str


def code_reply(outputs, n: int, exact, mistakes) -> Reply:
    """The reply for a coding exercise from ``outputs``: ``(j, output)`` in case order,
    ``output`` an array, None (not numbers) or a :class:`CaseError`; consumed only up to
    the first failing case. ``exact(j, arr)`` says whether ``arr`` is right on case
    ``j``; ``mistakes`` lists ``(hint, matches)`` with ``matches(j, arr)`` the same for
    a registered mistake."""
    for j, out in outputs:
        if isinstance(out, CaseError):
            return Reply(
                "error",
                tr(
                    "your function raised {error} on test case {j}: {exc}",
                    error=out.error,
                    j=j + 1,
                    exc=out.message,
                ),
            )
        if out is not None and exact(j, out):
            continue
        for hint, matches in mistakes:
            if out is not None and matches(j, out):
                return Reply(
                    "incorrect",
                    tr("test case {j} fails. {hint}", j=j + 1, hint=tr(hint)),
                    tr(hint),
                )
        return Reply(
            "incorrect",
            tr("test case {j} of {n} gives a different result.", j=j + 1, n=n),
        )
    return Reply("correct", tr("correct on all {n} test cases.", n=n))
