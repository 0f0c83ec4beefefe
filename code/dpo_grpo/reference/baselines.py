"""Exact expected policy gradients of group baselines, by enumerating every group
(section 3.4).

One prompt, a softmax policy over A whole answers with probabilities ``p`` (A,) and
rewards ``r`` (A,); a group is G i.i.d. draws. The score of answer a w.r.t. the logits
is ``e_a - p``. The true gradient of ``J = p . r`` is ``p * (r - p . r)``. Enumeration
sums over all ``A**G`` groups, weighting each by its probability.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

from .. import _validation as v
from .advantages import centered_advantages, group_advantages, leave_one_out_advantages


class BaselineGradients(NamedTuple):
    """Expected gradient (A,) of each advantage estimator, averaged over the G samples
    of a group."""

    exact: np.ndarray
    centered: np.ndarray
    leave_one_out: np.ndarray
    standardised: np.ndarray
    n_groups: int


def true_gradient(probs, rewards):
    """``d (p . r) / d logits = p * (r - p . r)``, shape (A,)."""
    p = v.probability_vector(probs, "probs")
    r = v.as_float_array(rewards, "rewards", ndim=1)
    v.same_shape(probs=p, rewards=r)
    return p * (r - p @ r)


def enumerate_group_gradients(
    probs, rewards, group_size, *, eps=1e-4, ddof=0
) -> BaselineGradients:
    """Exact ``E[(1/G) sum_i A_i (e_{a_i} - p)]`` for centred, leave-one-out and
    standardised advantages A."""
    p = v.probability_vector(probs, "probs")
    r = v.as_float_array(rewards, "rewards", ndim=1)
    v.same_shape(probs=p, rewards=r)
    g = v.integer(group_size, "group_size", minimum=2)
    n_actions = p.size
    if n_actions**g > 2_000_000:
        raise ValueError(
            f"enumerating {n_actions}**{g} groups is too many; use a smaller group_size"
        )
    # (n_groups, G)
    groups = np.array(list(itertools.product(range(n_actions), repeat=g)))
    weights = np.prod(p[groups], axis=1)  # probability of each ordered group
    group_rewards = r[groups]
    scores = np.eye(n_actions)[groups] - p  # (n_groups, G, A)

    def expected(adv):
        return np.einsum("n,ng,nga->a", weights, adv, scores) / g

    return BaselineGradients(
        exact=true_gradient(p, r),
        centered=expected(centered_advantages(group_rewards)),
        leave_one_out=expected(leave_one_out_advantages(group_rewards)),
        standardised=expected(group_advantages(group_rewards, eps=eps, ddof=ddof)),
        n_groups=len(groups),
    )


def score_function_variance(probs, rewards, baseline=0.0, n_samples=20000, seed=0):
    """Monte-Carlo mean and total variance of the single-sample estimator
    ``(r_a - b)(e_a - p)``, a ~ p.

    Returns ``(mean (A,), variance)``: the mean is the same for every constant baseline
    ``b``; the variance is not.
    """
    p = v.probability_vector(probs, "probs")
    r = v.as_float_array(rewards, "rewards", ndim=1)
    v.same_shape(probs=p, rewards=r)
    b = v.scalar(baseline, "baseline")
    n = v.integer(n_samples, "n_samples", minimum=2)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    actions = rng.choice(p.size, size=n, p=p)
    est = (r[actions] - b)[:, None] * (np.eye(p.size)[actions] - p)
    return est.mean(axis=0), float(est.var(axis=0).sum())
