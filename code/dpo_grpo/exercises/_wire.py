"""Answers and test inputs as plain JSON data, the only thing that crosses between the
grader and a kernel.

The grader encodes the test inputs it draws (:func:`encode_value`); the kernel decodes
them (:func:`decode_value`), and encodes what a student submitted
(:func:`encode_answer`). The grader parses the kernel's records with :func:`json.loads`
only (never pickle), so a record is data, never code, and decides nothing by itself: the
grader compares it with its own key.
"""

from __future__ import annotations

import numpy as np

MAX_NUMBERS = (
    1_000_000  # an answer with more numbers than this is recorded as "too large"
)


def encode_value(value):
    """JSON-able form of a test-input value (arrays, numbers, strings, lists and tuples
    of those)."""
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return {"__tuple__": [encode_value(v) for v in value]}
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(
        "value must be an array, number, string, list or tuple, got "
        f"{type(value).__name__}"
    )


def decode_value(data):
    """Inverse of :func:`encode_value`."""
    if isinstance(data, dict):
        if "__ndarray__" in data:
            return np.asarray(data["__ndarray__"], dtype=data["dtype"])
        if "__tuple__" in data:
            return tuple(decode_value(v) for v in data["__tuple__"])
        raise ValueError("data holds an unknown object")
    if isinstance(data, list):
        return [decode_value(v) for v in data]
    return data


def encode_answer(value) -> dict:
    """A submitted value as data: ``{"kind": "none"}``,
    ``{"kind": "str", "value": ...}``,
    ``{"kind": "array", "shape": [...], "data": [...]}`` or
    ``{"kind": "other", "type": name}``."""
    if value is None or value is Ellipsis:
        return {"kind": "none"}
    if isinstance(value, str):
        return {"kind": "str", "value": value[:1000]}
    try:
        arr = np.asarray(value, dtype=np.float64)
    except Exception:  # noqa: BLE001  (any object a student passes: it is only described, never trusted)
        return {"kind": "other", "type": type(value).__name__[:100]}
    if arr.size > MAX_NUMBERS:
        return {"kind": "other", "type": "too large"}
    return {"kind": "array", "shape": list(arr.shape), "data": arr.ravel().tolist()}


def decode_array(record):
    """The float array of an ``{"kind": "array"}`` record, or None when the record is
    malformed."""
    if not isinstance(record, dict) or record.get("kind") != "array":
        return None
    shape, data = record.get("shape"), record.get("data")
    if not isinstance(shape, list) or not isinstance(data, list) or len(shape) > 32:
        return None
    if not all(
        isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_NUMBERS
        for n in shape
    ):
        return None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in data):
        return None
    try:
        return np.asarray(data, dtype=np.float64).reshape(shape)
    except ValueError:
        return None
