"""Statistics over seeds: the exact two-sided sign test of paired differences.

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
