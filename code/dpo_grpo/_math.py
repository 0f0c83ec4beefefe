"""Small numerical helpers: softmax and log-softmax over the last axis."""

import numpy as np


def softmax(logits):
    """``exp(z - max z) / sum exp(z - max z)`` over the last axis."""
    z = np.asarray(logits, dtype=np.float64)
    shifted = np.exp(z - z.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def log_softmax(logits):
    """``z - logsumexp(z)`` over the last axis."""
    z = np.asarray(logits, dtype=np.float64)
    return z - np.logaddexp.reduce(z, axis=-1, keepdims=True)
