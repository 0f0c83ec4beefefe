"""When a group gives no reward signal: all-equal groups for 0/1 rewards (sections 3.4
and 06).

With pass rate ``p`` and group size ``G``, a group is all-correct or all-wrong with
probability ``p**G + (1 - p)**G``; its standardised advantages are then all zero.
"""

from __future__ import annotations

import numpy as np

from .. import _validation as v
from .advantages import group_advantages


def _pass_rates(p, name="pass_rate"):
    arr = v.as_float_array(p, name)
    if ((arr < 0) | (arr > 1)).any():
        raise ValueError(f"{name} must lie in [0, 1]")
    return arr


def zero_std_probability(pass_rate, group_size):
    """``p**G + (1-p)**G``: probability that G Bernoulli(p) rewards are all equal
    (elementwise in p)."""
    p = _pass_rates(pass_rate)
    g = v.integer(group_size, "group_size", minimum=2)
    out = p**g + (1 - p) ** g
    return float(out) if out.ndim == 0 else out


def zero_std_monte_carlo(pass_rate, group_size, n_groups=20000, seed=0):
    """Fraction of ``n_groups`` simulated groups (seeded) whose 0/1 rewards are all
    equal; estimates the above."""
    p = _pass_rates(pass_rate)
    if p.ndim != 0:
        raise ValueError(f"pass_rate must be a single number, got shape {p.shape}")
    p = float(p)
    g = v.integer(group_size, "group_size", minimum=2)
    n = v.integer(n_groups, "n_groups", minimum=1)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    wins = rng.random((n, g)) < p
    return float(np.mean(wins.all(axis=1) | ~wins.any(axis=1)))


def expected_zero_std_fraction(pass_rates, group_size):
    """Expected fraction of prompts in a batch (pass rates shape (P,)) whose group has
    zero reward std."""
    return float(
        np.mean(zero_std_probability(_pass_rates(pass_rates, "pass_rates"), group_size))
    )


def simulate_zero_std_fraction(pass_rates, group_size, seed=0):
    """One seeded draw of a batch: the observed fraction of prompts whose G rewards are
    all equal."""
    p = _pass_rates(pass_rates, "pass_rates").ravel()
    g = v.integer(group_size, "group_size", minimum=2)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    wins = rng.random((p.size, g)) < p[:, None]
    return float(np.mean(wins.all(axis=1) | ~wins.any(axis=1)))


def two_sample_advantage(gap, eps=1e-4):
    """Positive advantage of the group ``[0, gap]`` (population std):
    ``gap / (gap + 2 eps)``, via the real formula."""
    d = v.scalar(gap, "gap", positive=True)
    return float(group_advantages([[0.0, d]], eps=eps)[0, 1])
