"""Softmax and log-softmax over the last axis (sections 3.5 and 4.5: the policies of the
KL example and the bandit)."""

import numpy as np

from .. import _validation as v


def _logits(logits):
    """``logits`` as a float array; -inf is allowed (a masked-out entry), NaN and +inf
    are not."""
    z = v.as_float_array(logits, "logits", finite=False)
    if np.isnan(z).any() or np.isposinf(z).any():
        raise ValueError("logits must not contain NaN or +inf")
    if np.isneginf(z.max(axis=-1)).any():
        raise ValueError(
            "logits must have at least one entry > -inf along the last axis"
        )
    return z


def softmax(logits):
    """``exp(z - max z) / sum exp(z - max z)`` over the last axis."""
    return _softmax_valid(_logits(logits))


def log_softmax(logits):
    """``z - logsumexp(z)`` over the last axis."""
    return _log_softmax_valid(_logits(logits))


def _softmax_valid(z):
    """:func:`softmax` of an already valid float array (for hot loops such as the
    bandit)."""
    shifted = np.exp(z - z.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def _log_softmax_valid(z):
    """:func:`log_softmax` of an already valid float array (for hot loops such as the
    bandit)."""
    return z - np.logaddexp.reduce(z, axis=-1, keepdims=True)
