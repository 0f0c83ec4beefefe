"""The article's worked examples as data (sections 3.2–3.7, 4.2–4.5, 9), shared by the
chapters and the tests."""

from __future__ import annotations

import numpy as np

#: The article's section 3.7: two preference pairs (sequence log-probs); beta = 0.1.
DPO_PAIRS = {
    "policy_chosen": np.array([-2.2, -1.7]),
    "policy_rejected": np.array([-2.8, -2.1]),
    "ref_chosen": np.array([-2.0, -1.9]),
    "ref_rejected": np.array([-2.4, -2.0]),
}

#: Section 3.2: the chosen probability falls, yet the DPO loss falls (actions 0 =
#: chosen, 1 = rejected).
DPO_COUNTEREXAMPLE = {
    "ref": np.array([0.2, 0.3, 0.5]),
    "before": np.array([0.4, 0.4, 0.2]),
    "after": np.array([0.3, 0.15, 0.55]),
    "beta": 0.1,
}

#: Section 3.2: the objective identity J(p) = beta log Z - beta KL(p || pi*), over 200
#: random policies.
OBJECTIVE_IDENTITY = {
    "ref_policy": np.array([0.2, 0.3, 0.5]),
    "rewards": np.array([-0.5, 0.7, 1.1]),
    "beta": 0.6,
    "n_policies": 200,
    "seed": 17,
}

#: Sections 3.4 / 3.7 / 04: two prompts, four completions each ([prompt, generation] =
#: [2, 4]).
REWARD_GROUPS = np.array([[0.2, 0.8, 1.4, 0.6], [8.0, 9.0, 11.0, 12.0]])

#: Section 3.4: same ranking, different gaps, different advantages.
SAME_RANK_GROUPS = np.array([[0.0, 1.0, 2.0, 10.0], [0.0, 1.0, 9.0, 10.0]])

#: Section 3.4: three answers, G = 3, exact enumeration of the group-baseline gradient.
ENUMERATION = {
    "probs": np.array([0.2, 0.3, 0.5]),
    "rewards": np.array([-1.0, 0.2, 2.0]),
    "group_size": 3,
}

#: Section 3.5: k3 under the current policy p, the reference q, and the old sampling
#: policy.
KL_EXAMPLE = {
    "p": np.array([0.7, 0.2, 0.1]),
    "q": np.array([0.2, 0.3, 0.5]),
    "old": np.array([0.3, 0.3, 0.4]),
}

#: Section 09: the two-sample groups [0, d].
TWO_SAMPLE_GAPS = (1.0, 0.01, 1e-5)

#: Section 09: the five bandit configurations, each run for seeds 0..9.
BANDIT_CONFIGS = {
    "G=32 (original)": {},
    "G=2": {"group_size": 2},
    "all rewards 1": {"reward_table": [1.0, 1.0, 1.0, 1.0]},
    "best reward 0.31": {"reward_table": [-0.2, 0.3, 0.31, 0.0]},
    "beta=0.5": {"beta": 0.5},
}


def grpo_token_example():
    """The article's section 3.7 (the book's chapter 4): four completions of three
    tokens; every token of completion i has the same ratio.

    Returns keyword arguments for :func:`dpo_grpo.grpo_loss` (advantages: the first
    reward group, standardised).
    """
    from .advantages import group_advantages

    old = np.log(
        np.array(
            [
                [0.30, 0.25, 0.20],
                [0.18, 0.22, 0.20],
                [0.12, 0.16, 0.20],
                [0.25, 0.20, 0.18],
            ]
        )
    )
    shift = np.array([0.25, 0.10, -0.25, -0.10])[:, None] * np.ones((1, 3))
    return {
        "new_logps": old + shift,
        "old_logps": old,
        "ref_logps": old - 0.05,
        "advantages": group_advantages(REWARD_GROUPS[:1])[0],
        "mask": np.ones_like(old),
    }


def surrogate_gradient_example():
    """Section 09: a full 4-action softmax whose four tokens (ratios 2, 0.5, 4/3 and 1
    at epsilon 0.2) cover the upper platform (A > 0), the lower platform (A < 0), the
    wrong-direction case A < 0 with rho > 1 + epsilon, and the inside of the clip
    interval; the other wrong-direction case (A > 0, rho < 1 - epsilon) is not
    covered."""
    return {
        "actions": np.array([0, 1, 2, 3]),
        "old_probs": np.array([0.1, 0.4, 0.3, 0.2]),
        "ref_probs": np.full(4, 0.25),
        "new_probs": np.array([0.2, 0.2, 0.4, 0.2]),
        "advantages": np.array([1.2, -0.8, -1.1, 0.5]),
        "beta": 0.04,
    }


def random_grpo_batch(
    seed=0,
    batch=5,
    length=6,
    *,
    adv_2d=False,
    new_noise=0.3,
    ref_noise=0.2,
    min_length=1,
):
    """A random ragged GRPO batch: keyword arguments for
    :func:`dpo_grpo.trl_exact.grpo_loss` and :func:`dpo_grpo.torch_ops.grpo_loss` (and,
    without ``adv_2d``, for the readable :func:`dpo_grpo.grpo_loss`).

    Shapes: ``new_logps``, ``old_logps``, ``ref_logps``, ``mask`` (batch, length);
    ``advantages`` (batch,), or (batch, length) with ``adv_2d``.
    ``old = log U(0.05, 0.9)``, ``new = old + N(0, new_noise)``,
    ``ref = old + N(0, ref_noise)``; row 0 is full length, the others have
    ``U{min_length..length}`` valid tokens (a prefix mask); advantages are standard
    normal. The same ``seed`` gives the same batch.
    """
    from .. import _validation as v

    batch = v.integer(batch, "batch", minimum=1)
    length = v.integer(length, "length", minimum=1)
    min_length = v.integer(min_length, "min_length", minimum=1)
    if min_length > length:
        raise ValueError(f"min_length must be <= length ({length}), got {min_length}")
    if not isinstance(adv_2d, bool):
        raise TypeError(f"adv_2d must be a bool, got {type(adv_2d).__name__}")
    new_noise = v.scalar(new_noise, "new_noise", nonnegative=True)
    ref_noise = v.scalar(ref_noise, "ref_noise", nonnegative=True)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    old = np.log(rng.uniform(0.05, 0.9, (batch, length)))
    new = old + rng.normal(0, new_noise, (batch, length))
    ref = old + rng.normal(0, ref_noise, (batch, length))
    lengths = rng.integers(min_length, length + 1, batch)
    lengths[0] = length
    mask = (np.arange(length)[None, :] < lengths[:, None]).astype(float)
    adv = rng.normal(0, 1, (batch, length) if adv_2d else batch)
    return {
        "new_logps": new,
        "old_logps": old,
        "ref_logps": ref,
        "advantages": adv,
        "mask": mask,
    }


def exercise_batch():
    """Exercise 05.1's ragged batch: three answers of lengths 1, 3 and 6 in a (3, 6)
    array; max_completion_length 8."""
    rng = np.random.default_rng(505)
    lengths = np.array([1, 3, 6])
    mask = (np.arange(6)[None, :] < lengths[:, None]).astype(float)
    old = np.round(np.log(rng.uniform(0.1, 0.9, (3, 6))), 4)
    new = np.round(old + rng.normal(0.0, 0.2, (3, 6)), 4)
    ref = np.round(old + rng.normal(0.0, 0.2, (3, 6)), 4)
    return {
        "new_logps": new,
        "old_logps": old,
        "ref_logps": ref,
        "advantages": np.array([1.1, -0.3, 0.7]),
        "mask": mask,
        "max_completion_length": 8,
    }
