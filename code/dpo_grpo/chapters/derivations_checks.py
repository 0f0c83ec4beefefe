"""Exact checks behind chapter 3's derivations that the other modules do not already
provide.

1. Constant baselines for the score-function gradient (section 3.3): exact mean and
   variance of the one-sample estimator ``(r_a - b)(e_a - p)``, ``a ~ p``, and the
   variance-minimising constant ``b``.
2. Prefix occupancy (section 3.5): why a per-token ratio-corrected k3 is exact for one
   token but not for a sequence.

A two-token "language model" over a vocabulary of V tokens: first-token distributions
``p1, q1, old1`` (V,) for the current policy, the reference and the sampling snapshot,
and second-token conditionals ``p2, q2, old2`` (V, V) whose row ``a`` is the
distribution of the second token after first token ``a``. The exact sequence KL is
``KL(p1 || q1) + sum_a p1_a KL(p2[a] || q2[a])``; the second term weights each prefix by
the *current* policy.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validation as v

#: A two-token example whose first step is the article's three-action KL example (p, q,
#: old of section 3.5).
PREFIX_EXAMPLE = {
    "p1": np.array([0.7, 0.2, 0.1]),
    "q1": np.array([0.2, 0.3, 0.5]),
    "old1": np.array([0.3, 0.3, 0.4]),
    "p2": np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.1, 0.8]]),
    "q2": np.array([[0.3, 0.3, 0.4], [0.3, 0.4, 0.3], [0.4, 0.3, 0.3]]),
    "old2": np.array([[0.5, 0.3, 0.2], [0.3, 0.4, 0.3], [0.2, 0.2, 0.6]]),
}


class BaselineMoments(NamedTuple):
    """Exact moments of the one-sample score-function estimator with a constant
    baseline."""

    #: E[(r_a - b)(e_a - p)], shape (A,); equals p * (r - p.r) for every b
    mean: np.ndarray
    variance: float  #: total variance E|g - mean|^2 (sum over the A logit components)


def _probs_rewards(probs, rewards):
    p = v.probability_vector(probs, "probs")
    r = v.as_float_array(rewards, "rewards", ndim=1)
    v.same_shape(probs=p, rewards=r)
    return p, r


def constant_baseline_moments(probs, rewards, baseline=0.0) -> BaselineMoments:
    """Enumerate the A actions: mean and total variance of ``g_a = (r_a - b)(e_a - p)``
    under ``a ~ p``.

    ``probs`` and ``rewards`` have shape (A,); ``baseline`` is a float. The mean does
    not depend on ``b`` because ``sum_a p_a (e_a - p) = 0``; the variance
    ``sum_a p_a (r_a - b)^2 |e_a - p|^2 - |mean|^2`` does.
    """
    p, r = _probs_rewards(probs, rewards)
    b = v.scalar(baseline, "baseline")
    scores = np.eye(p.size) - p  # row a: e_a - p
    g = (r - b)[:, None] * scores
    mean = p @ g
    variance = float(p @ np.sum((g - mean) ** 2, axis=1))
    return BaselineMoments(mean=mean, variance=variance)


def optimal_constant_baseline(probs, rewards) -> float:
    """The constant ``b`` minimising :func:`constant_baseline_moments`' variance:
    ``E[r |s|^2] / E[|s|^2]``.

    ``|s|^2 = |e_a - p|^2`` weights each reward, so ``b*`` is in general not the mean
    reward ``p . r``.
    """
    p, r = _probs_rewards(probs, rewards)
    sq = np.sum((np.eye(p.size) - p) ** 2, axis=1)
    return float(np.sum(p * r * sq) / np.sum(p * sq))


class PrefixShiftKL(NamedTuple):
    """Expected k3 sums over two-token sequences drawn from ``old``, with three
    weightings (all floats)."""

    exact: float  #: the true sequence KL(p || q)
    bare: float  #: E_old[k3_1 + k3_2], no importance weight
    #: E_old[w_1 k3_1 + w_2 k3_2], w_t = p_t / old_t (one token's ratio; what GRPO/TRL
    #: use)
    token_ratio: float
    #: E_old[w_1 k3_1 + w_1 w_2 k3_2], the ratio of the whole prefix up to t
    prefix_ratio: float
    #: KL(p1||q1) + sum_a old1_a KL(p2[a]||q2[a]): the prefix is weighted by old
    token_ratio_formula: float


def _conditionals(x, name, size):
    arr = v.as_float_array(x, name, ndim=2)
    if arr.shape != (size, size):
        raise ValueError(
            f"{name} must have shape ({size}, {size}) (one row per first token), got "
            f"{arr.shape}"
        )
    for row in arr:
        v.probability_vector(row, name)
    return arr


def _kl(p, q):
    return float(np.sum(p * np.log(p / q)))


def _k3(p, q):
    return q / p - np.log(q / p) - 1


def prefix_shift_kl(p1, q1, old1, p2, q2, old2) -> PrefixShiftKL:
    """Enumerate all ``V**2`` two-token sequences drawn from ``old`` and average k3 with
    each weighting.

    ``p1, q1, old1``: shape (V,), strictly positive, summing to 1. ``p2, q2, old2``:
    shape (V, V), each row a strictly positive distribution (the second token's law
    after first token ``a``). Only ``prefix_ratio`` equals ``exact`` in general;
    ``token_ratio`` does when ``old1 == p1``.
    """
    p1 = v.probability_vector(p1, "p1")
    q1 = v.probability_vector(q1, "q1")
    old1 = v.probability_vector(old1, "old1")
    v.same_shape(p1=p1, q1=q1, old1=old1)
    size = p1.size
    p2 = _conditionals(p2, "p2", size)
    q2 = _conditionals(q2, "q2", size)
    old2 = _conditionals(old2, "old2", size)

    k1 = _k3(p1, q1)  # (V,)
    k2 = _k3(p2, q2)  # (V, V)
    w1 = p1 / old1  # (V,)
    w2 = p2 / old2  # (V, V)
    prob = old1[:, None] * old2  # probability of each sequence (a, b) under old
    bare = float(np.sum(prob * (k1[:, None] + k2)))
    token = float(np.sum(prob * (w1[:, None] * k1[:, None] + w2 * k2)))
    prefix = float(np.sum(prob * (w1[:, None] * k1[:, None] + w1[:, None] * w2 * k2)))
    second = np.array([_kl(p2[a], q2[a]) for a in range(size)])
    return PrefixShiftKL(
        exact=_kl(p1, q1) + float(p1 @ second),
        bare=bare,
        token_ratio=token,
        prefix_ratio=prefix,
        token_ratio_formula=_kl(p1, q1) + float(old1 @ second),
    )
