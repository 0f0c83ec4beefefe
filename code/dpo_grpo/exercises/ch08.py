"""Exercises of chapter 8 (common misconceptions; 08.1, 08.2 and 08.4 use the page
"Reading a TRL run")."""

import numpy as np

from ..reference.advantages import group_advantages

from ..trl_exact.advantages import reward_advantages
from ..trl_exact.grpo import grpo_loss
from .core import choice, code, numeric

#: Exercise 08.1: one group of four answers, on-policy (new = old), rewards and lengths
#: below, beta = 0.
_REWARDS = np.array([1.0, 0.0, 0.0, 1.0])
_LENGTHS = np.array([3, 5, 2, 6])


def _on_policy_batch(ddof=1):
    width = int(_LENGTHS.max())
    mask = (np.arange(width)[None, :] < _LENGTHS[:, None]).astype(float)
    logps = np.log(np.full(mask.shape, 0.3))
    adv = (
        reward_advantages(_REWARDS[:, None], 4).advantages
        if ddof == 1
        else group_advantages(_REWARDS[None])[0]
    )
    return logps, adv, mask


def _step0_loss(loss_type="dapo", ddof=1):
    logps, adv, mask = _on_policy_batch(ddof)
    return grpo_loss(logps, logps, None, adv, mask, beta=0.0, loss_type=loss_type).loss


numeric(
    "08.1",
    "On-policy step 0, beta = 0: TRL's default loss_type='dapo' loss for rewards [1, "
    "0, 0, 1] with lengths [3, 5, 2, 6] and TRL's advantages (sample std).",
    lambda: _step0_loss("dapo"),
    mistakes={
        "grpo loss type": (
            lambda: _step0_loss("grpo"),
            "That is the loss_type='grpo' value (per-answer means); the exercise asks "
            "for 'dapo', which averages over all valid tokens.",
        ),
        "population std": (
            lambda: _step0_loss("dapo", ddof=0),
            "You standardised with the population std (ddof=0); TRL divides by the "
            "sample std.",
        ),
        "sign": (
            lambda: -_step0_loss("dapo"),
            "Check the sign: the loss is minus the surrogate, and the surrogate is "
            "ratio x advantage.",
        ),
    },
)


def _zero_std_groups(rewards, group_size):
    r = np.asarray(rewards, dtype=float).reshape(-1, group_size)
    return np.isclose(r.std(axis=1), 0.0, rtol=1e-5, atol=1e-8)


def _draw_flat_groups(rng):
    """A flat batch of P consecutive groups of G rewards, some all equal, drawn at
    grading time."""
    g, p = int(rng.integers(2, 5)), int(rng.integers(1, 5))
    r = rng.integers(0, 2, (p, g)).astype(float)
    r[rng.random(p) < 0.5] = 1.0
    return (r.ravel(), g)


code(
    "08.2",
    "Implement zero_std_groups(rewards, group_size): rewards is a flat array of N = P "
    "x G rewards in consecutive groups; return a boolean array (P,) that is True "
    "where a group's rewards are all equal (std within 1e-8 of 0).",
    _zero_std_groups,
    cases=[
        (np.array([1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0]), 4),
        (np.array([0.0, 0.0, 0.5, 0.5, 2.0, 2.0]), 2),
        (np.array([0.5, 0.5, 0.5 + 1e-12, 0.25, 0.25, 0.25]), 3),
    ],
    mistakes={
        "whole batch": (
            lambda r, g: np.full(len(r) // g, np.isclose(np.std(r), 0.0)),
            "You tested the whole batch at once; each consecutive group of G rewards "
            "is tested on its own.",
        ),
        "strided groups": (
            lambda r, g: np.isclose(
                np.asarray(r, float).reshape(g, -1).T.std(axis=1),
                0.0,
                rtol=1e-5,
                atol=1e-8,
            ),
            "Your groups are strided (reshape(G, -1)); groups are consecutive blocks "
            "of G rows.",
        ),
        "exact equality": (
            lambda r, g: np.asarray(r, float).reshape(-1, g).std(axis=1) == 0.0,
            "Exact equality misses groups that differ only by rounding; compare with "
            "a tolerance.",
        ),
    },
    draw=_draw_flat_groups,
)

choice(
    "08.3",
    "A softmax toy: until the first clip every sampled token's ratio stays inside "
    "[0.8, 1.2], yet KL(pi || pi_old) over the whole vocabulary grows large because a "
    "rare, unsampled token gained probability. Which misconception does it refute?",
    {
        "a": "GRPO needs no reward model.",
        "b": "The group mean is an unbiased value function.",
        "c": "Clip keeps the KL small.",
        "d": "After normalisation the reward scale does not matter.",
    },
    "c",
    explanations={
        "a": (
            "The toy has a reward (two answers scored 1, two scored 0); it is about "
            "what the update does to tokens nobody sampled."
        ),
        "b": "No baseline is compared with a value function here.",
        "d": "The rewards are fixed 0/1 in the toy; nothing is rescaled.",
    },
)

choice(
    "08.4",
    "The k3 term exp(Delta) - Delta - 1, Delta = log pi_ref - log pi_theta, evaluated "
    "at tokens sampled from pi_theta, is an unbiased estimate of which quantity?",
    {
        "a": (
            "KL(pi_ref || pi_theta), summed over the whole vocabulary at every "
            "position."
        ),
        "b": (
            "KL(pi_theta || pi_ref) at the sampled prefix, estimated from the sampled "
            "token only."
        ),
        "c": "The squared log-ratio (log pi_theta - log pi_ref)^2 / 2.",
    },
    "b",
    explanations={
        "a": (
            "The expectation is taken under the sampling policy pi_theta, so pi_theta "
            "is the first argument; and nothing is summed over the vocabulary: only "
            "the sampled token enters."
        ),
        "c": "That is k2, a different (biased) estimator.",
    },
)
