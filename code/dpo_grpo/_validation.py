"""Input checks shared by every public function.

Each helper raises ``TypeError`` (wrong kind of object) or ``ValueError`` (right kind,
bad value) with a message that names the argument and says what was expected, so bad
input never turns into a silent NaN.
"""

from __future__ import annotations

import math
import numbers
from typing import Iterable

import numpy as np


def as_float_array(
    x, name: str, *, ndim: int | Iterable[int] | None = None, finite: bool = True
) -> np.ndarray:
    """Return ``x`` as a non-empty float64 array; check its number of dimensions and
    (optionally) finiteness."""
    if x is None or isinstance(x, (str, bytes, dict, bool, np.bool_)):
        raise TypeError(f"{name} must be an array of numbers, got {type(x).__name__}")
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of numbers ({exc})") from None
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in allowed:
            want = " or ".join(f"{d}-D" for d in allowed)
            raise ValueError(f"{name} must be {want}, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {arr.shape}")
    if finite and not np.isfinite(arr).all():
        raise ValueError(f"{name} must contain only finite values (found NaN or inf)")
    return arr


def integer_array(
    x, name: str, *, ndim: int | None = None, allow_empty: bool = False
) -> np.ndarray:
    """``x`` as an int64 array (non-empty unless ``allow_empty``); floats must be whole
    numbers (no silent truncation)."""
    if x is None or isinstance(x, (str, bytes, dict, bool, np.bool_)):
        raise TypeError(f"{name} must be an array of integers, got {type(x).__name__}")
    try:
        arr = np.asarray(x)
    except ValueError as exc:
        raise TypeError(f"{name} must be an array of integers ({exc})") from None
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    if arr.size == 0:
        if allow_empty:
            return arr.astype(np.int64)
        raise ValueError(f"{name} must not be empty")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating):
            raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
        if not np.all(np.isfinite(arr) & (arr == np.round(arr))):
            raise ValueError(
                f"{name} must hold whole numbers (token ids / indices), got "
                f"{arr.ravel()[:5].tolist()}"
            )
    return arr.astype(np.int64)


def same_shape(**arrays: np.ndarray) -> tuple[int, ...]:
    """Check that all keyword arrays share one shape; return it."""
    items = list(arrays.items())
    first_name, first = items[0]
    for other_name, other in items[1:]:
        if other.shape != first.shape:
            raise ValueError(
                f"{other_name} must have the same shape as {first_name}: "
                f"{other.shape} != {first.shape}"
            )
    return first.shape


def arrays(**named) -> tuple[np.ndarray, ...]:
    """The keyword arguments as finite float arrays of one common shape, in order (for
    one-line checks)."""
    out = {name: as_float_array(x, name) for name, x in named.items()}
    same_shape(**out)
    return tuple(out.values())


def scalar(
    x,
    name: str,
    *,
    positive: bool = False,
    nonnegative: bool = False,
    open_unit: bool = False,
    allow_none: bool = False,
    maximum: float | None = None,
) -> float | None:
    """Return ``x`` as a finite float, checking the requested range (``maximum``:
    ``x <= maximum``)."""
    if x is None and allow_none:
        return None
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(x).__name__}")
    value = float(x)
    if not math.isfinite(
        value
    ):  # math, not NumPy: torch_ops reuses this under torch.compile
        raise ValueError(f"{name} must be finite, got {value}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    if nonnegative and value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    if open_unit and not 0 < value < 1:
        raise ValueError(f"{name} must lie in the open interval (0, 1), got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def integer(
    x, name: str, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """Return ``x`` as an int (bools rejected), checking ``minimum <= x <= maximum``."""
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(x).__name__}")
    value = int(x)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def boolean(x, name: str) -> bool:
    """Return ``x`` as a bool; only ``True``/``False`` (Python or NumPy) are
    accepted."""
    if not isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(x).__name__}")
    return bool(x)


def sequence(x, name: str) -> list:
    """Return the items of ``x`` (a list, tuple, array or other non-string iterable) as
    a list."""
    if x is None or isinstance(x, (str, bytes, dict)):
        raise TypeError(f"{name} must be a sequence, got {type(x).__name__}")
    try:
        return list(x)
    except TypeError:
        raise TypeError(f"{name} must be a sequence, got {type(x).__name__}") from None


def choice(x, name: str, options: Iterable) -> object:
    """Check that ``x`` is one of ``options``."""
    options = tuple(options)
    if not any(x is opt or (type(x) is type(opt) and x == opt) for opt in options):
        raise ValueError(f"{name} must be one of {options!r}, got {x!r}")
    return x


def binary_mask(mask, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """Return a 0/1 mask of ``shape`` as a boolean array; every row needs at least one
    valid (1) entry."""
    arr = as_float_array(mask, name, ndim=len(shape))
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
    if not np.isin(arr, (0.0, 1.0)).all():
        raise ValueError(f"{name} must contain only 0 and 1")
    active = arr.astype(bool)
    if arr.ndim == 2:
        empty = np.flatnonzero(~active.any(axis=1))
        if empty.size:
            raise ValueError(
                f"{name} has rows with no valid token (rows {empty.tolist()[:5]})"
            )
    return active


def probability_vector(p, name: str, *, strictly_positive: bool = True) -> np.ndarray:
    """Return a 1-D probability vector (entries > 0 unless told otherwise, summing to 1
    within 1e-9)."""
    arr = as_float_array(p, name, ndim=1)
    if strictly_positive and (arr <= 0).any():
        raise ValueError(
            f"{name} must have strictly positive entries, got {arr.tolist()}"
        )
    if (arr < 0).any():
        raise ValueError(f"{name} must have non-negative entries, got {arr.tolist()}")
    if abs(arr.sum() - 1.0) > 1e-9:
        raise ValueError(f"{name} must sum to 1, got sum {arr.sum()!r}")
    return arr
