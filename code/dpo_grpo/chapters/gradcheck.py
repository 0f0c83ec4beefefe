"""Central finite differences, to check analytic gradients."""

from __future__ import annotations

import numpy as np

from .. import _validation as v


def finite_difference(fn, x, h=1e-6):
    """``(fn(x + h e_i) - fn(x - h e_i)) / 2h`` for every entry of ``x``; same shape as
    ``x``; ``fn`` -> float."""
    if not callable(fn):
        raise TypeError("fn must be callable")
    x = v.as_float_array(x, "x")
    h = v.scalar(h, "h", positive=True)
    out = np.empty_like(x)
    for idx in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[idx] += h
        minus[idx] -= h
        out[idx] = (_value(fn(plus)) - _value(fn(minus))) / (2 * h)
    return out


def _value(y) -> float:
    """``fn``'s result as a finite float."""
    if isinstance(y, (bool, np.bool_)) or np.ndim(y) != 0:
        raise TypeError(
            f"fn must return one real number, got {type(y).__name__} of shape "
            f"{np.shape(y)}"
        )
    try:
        y = float(y)
    except (TypeError, ValueError):
        raise TypeError(
            f"fn must return one real number, got {type(y).__name__}"
        ) from None
    if not np.isfinite(y):
        raise ValueError(f"fn returned a non-finite value ({y}) near x")
    return y


def max_abs_error(a, b):
    """``max |a - b|`` over two same-shaped arrays."""
    a = v.as_float_array(a, "a")
    b = v.as_float_array(b, "b")
    v.same_shape(a=a, b=b)
    return float(np.max(np.abs(a - b)))
