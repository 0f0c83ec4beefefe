"""Statistics over seeds: the exact two-sided sign test of paired differences, and
Holm's correction of a family of p-values.

One home for the test the book uses wherever it says how often one setting beat
another over seeds (the lab's sweep, the ``num_iterations`` drift on the TRL page).
Pure Python (``math.comb``): exact for any number of seeds, no SciPy needed.
"""

from __future__ import annotations

import math

import numpy as np

from . import _validation as v


def sign_test(differences) -> dict:
    """The exact two-sided sign test of paired ``differences`` (n,): ``ahead`` (> 0),
    ``behind`` (< 0), ``ties`` (dropped) and ``sign_p``, the probability under
    "ahead and behind equally likely" of a split at least as uneven:
    ``min(1, 2 * sum_{i >= max(k, n - k)} C(n, i) / 2^n)`` with ``k = ahead``,
    ``n = ahead + behind`` (1 when every difference is a tie)."""
    d = v.as_float_array(differences, "differences", ndim=1)
    ahead, behind = int(np.sum(d > 0)), int(np.sum(d < 0))
    n = ahead + behind
    tail = sum(math.comb(n, i) for i in range(max(ahead, behind), n + 1)) / 2.0**n
    p = min(1.0, 2.0 * tail) if n else 1.0
    return {"ahead": ahead, "behind": behind, "ties": len(d) - n, "sign_p": p}


def holm(p_values) -> list:
    """Holm's step-down adjusted p-values of ``p_values`` (n,), in their order: sort
    them ascending, multiply the i-th smallest (i = 0, 1, ...) by ``n - i``, carry the
    running maximum forward and cap at 1. Rejecting every hypothesis whose adjusted p
    is at most ``alpha`` keeps the family-wise error rate at ``alpha``."""
    p = v.as_float_array(p_values, "p_values", ndim=1)
    if np.any((p < 0) | (p > 1)):
        raise ValueError(f"p_values must lie in [0, 1], got {p.tolist()}")
    n = len(p)
    out = [0.0] * n
    running = 0.0
    for i, k in enumerate(np.argsort(p, kind="stable")):
        running = max(running, min(1.0, (n - i) * float(p[k])))
        out[int(k)] = running
    return out
