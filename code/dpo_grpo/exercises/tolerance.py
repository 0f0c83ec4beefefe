"""When a submitted number is right: the one tolerance rule of the self-check
(:mod:`.selfcheck`, against its hashed key) and of the grader (:func:`.core.judge`,
against the full key).

Each value ``ref`` of a reference answer (a number, or each element of an array) has the
tolerance

    w = 2 ** e,   e = floor(log2(atol + rtol * |ref|)),

the exercise's ``atol + rtol |ref|`` rounded down to a power of two: at least half of it
and at most all of it, and a key that stores ``e`` reveals only the order of magnitude
of ``ref``. On the grid of step ``w`` through ``ref`` (offset ``o = fmod(ref, w)``,
computed exactly), ``ref`` sits at the integer ``n = (ref - o) / w``. A submitted value
``x`` sits at ``y = (x - o) / w`` and is *within* the tolerance when ``|y - n| <= 1``
in floating point (``|x - ref| <= w``, up to the rounding of ``x - o``). A value that
is not finite, or with ``|y| >= 2**52``, is never within. An answer is right when every
value is within its tolerance; it is "close" when every value is within the looser
tolerance of :func:`close_tolerance`, by the same rule.

The self-check keeps ``e``, ``o`` and a hash of ``n``; the grader computes ``n`` from
the reference. Both evaluate ``y`` and ``|y - n|`` with the same floating-point
operations, so they agree on every answer, edges included.
"""

from __future__ import annotations

import numpy as np

#: The "close" tier: the tolerance of ``atol * CLOSE_ATOL_FACTOR`` and
#: ``max(10 rtol, CLOSE_RTOL)``.
CLOSE_RTOL, CLOSE_ATOL_FACTOR = 5e-3, 10.0
#: Past this many steps from the grid's origin a value is never within (the cell index
#: would not be an exact integer in double precision).
MAX_STEPS = 2.0**52


def _values(x) -> np.ndarray:
    return np.ravel(np.asarray(x, dtype=np.float64))


def exponents(ref, rtol: float, atol: float) -> np.ndarray:
    """``floor(log2(atol + rtol |ref|))`` of every value of ``ref`` (flattened), exact
    (read from the binary exponent, not from a logarithm)."""
    tol = atol + rtol * np.abs(_values(ref))
    if not np.all(np.isfinite(tol) & (tol > 0)):
        raise ValueError(
            "ref must be finite and atol + rtol |ref| positive, got "
            f"atol={atol!r}, rtol={rtol!r}"
        )
    return np.frexp(tol)[1].astype(np.int64) - 1


def steps(exps) -> np.ndarray:
    """``2 ** e`` of every exponent: the tolerances."""
    return np.ldexp(1.0, np.asarray(exps, dtype=np.int32))


def grid(ref, rtol: float, atol: float):
    """``(e, o, n)`` of every value of ``ref`` (flattened): the tolerance's exponent,
    the grid's offset and the value's step index (integers, as floats)."""
    r = _values(ref)
    e = exponents(r, rtol, atol)
    w = steps(e)
    o = np.fmod(r, w)
    return e, o, (r - o) / w


def positions(x, exps, offsets) -> np.ndarray:
    """``y = (x - o) / 2**e`` of every value of ``x`` (flattened)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return (_values(x) - np.asarray(offsets, dtype=np.float64)) / steps(exps)


def near(y, n) -> np.ndarray:
    """Whether each position ``y`` is within one step of the integer ``n``."""
    y = np.asarray(y, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return (
            np.isfinite(y)
            & (np.abs(y) < MAX_STEPS)
            & (np.abs(y - np.asarray(n, dtype=np.float64)) <= 1)
        )


def within(x, ref, rtol: float, atol: float) -> np.ndarray:
    """Per value (flattened): whether ``x`` is within the tolerance of ``ref``. ``x``
    and ``ref`` must have the same number of values."""
    e, o, n = grid(ref, rtol, atol)
    y = positions(x, e, o)
    if y.shape != n.shape:
        raise ValueError(f"x has {y.size} values, ref has {n.size}")
    return near(y, n)


def close_tolerance(rtol: float, atol: float) -> tuple[float, float]:
    """``(rtol, atol)`` of the "close" tier of an exercise of tolerance ``rtol``,
    ``atol``: ``max(10 rtol, CLOSE_RTOL)`` and ``CLOSE_ATOL_FACTOR atol``."""
    return max(10 * rtol, CLOSE_RTOL), CLOSE_ATOL_FACTOR * atol
