"""A four-action bandit trained online with GRPO and no critic (section 04's experiment).

Protocol per step: snapshot ``pi_old``; draw one group of ``group_size`` actions from it; standardise their rewards
within the group (population std, eps 1e-4); take ``inner_steps`` gradient steps of size ``lr`` on the logits of
:func:`~dpo_grpo.grpo.grpo_loss` (clipped surrogate + ``beta`` x sampled k3 towards a uniform reference), with the
old log-probs fixed at the snapshot. Probabilities are tracked as arrays of shape ``(4,)``.
"""

from __future__ import annotations

import numpy as np

from . import _validation as v
from ._math import log_softmax, softmax
from .advantages import group_advantages
from .grpo import _grpo_from_valid

DEFAULT_REWARDS = (-0.2, 0.3, 1.0, 0.0)


def bandit_trajectory(steps=80, group_size=32, seed=7, reward_table=None, beta=0.02, lr=0.18, epsilon=0.2,
                      inner_steps=2):
    """Run the bandit; return the policy's probabilities after every step, shape ``(steps + 1, n_actions)``.

    Row 0 is the initial (uniform) policy, row ``k`` the policy after step ``k``.
    """
    steps = v.integer(steps, "steps", minimum=1)
    g = v.integer(group_size, "group_size", minimum=2)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    rewards_of = v.as_float_array(DEFAULT_REWARDS if reward_table is None else reward_table, "reward_table", ndim=1)
    if rewards_of.size < 2:
        raise ValueError(f"reward_table needs at least two actions, got {rewards_of.size}")
    beta = v.scalar(beta, "beta", nonnegative=True)
    lr = v.scalar(lr, "lr", positive=True)
    v.scalar(epsilon, "epsilon", open_unit=True)
    inner_steps = v.integer(inner_steps, "inner_steps", minimum=1)

    n_actions = rewards_of.size
    logits = np.zeros(n_actions)
    ref_logp = log_softmax(np.zeros(n_actions))
    ones = np.ones((g, 1))
    history = [softmax(logits)]
    for _ in range(steps):
        old_probs = softmax(logits)
        actions = rng.choice(n_actions, size=g, p=old_probs)
        advantages = group_advantages(rewards_of[actions][None, :])[0]
        old_logp = np.log(old_probs)[actions, None]
        score = np.eye(n_actions)[actions]  # d log pi(a_i) / d logits = e_{a_i} - p
        for _ in range(inner_steps):
            logp = log_softmax(logits)
            # the inputs are valid by construction: skip grpo_loss's per-call checks (same computation)
            out = _grpo_from_valid(logp[actions, None], old_logp, ref_logp[actions, None], advantages[:, None],
                                   ones, eps_low=epsilon, eps_high=epsilon, beta=beta, with_metrics=False)
            logits = logits - lr * (out.grad[:, 0] @ (score - np.exp(logp)))
        history.append(softmax(logits))
    return np.array(history)


def train_group_bandit(steps=80, group_size=32, seed=7, reward_table=None, beta=0.02, lr=0.18, epsilon=0.2):
    """Train the bandit; return ``[(step, probs)]`` at steps 1, 20, 40 and ``steps`` (those that exist)."""
    history = bandit_trajectory(steps, group_size, seed, reward_table, beta, lr, epsilon)
    steps = len(history) - 1
    marks = sorted({s for s in (1, 20, 40) if s <= steps} | {steps})
    return [(s, history[s]) for s in marks]


def bandit_seed_table(configs, seeds=range(10), steps=80, best_action=2):
    """Final probability of ``best_action`` over ``seeds`` for each named config (kwargs of the bandit).

    Returns ``{name: {"mean", "min", "max", "values"}}``.
    """
    if not isinstance(configs, dict) or not configs:
        raise TypeError("configs must be a non-empty dict of {name: keyword arguments}")
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds must not be empty")
    table = {}
    for name, kwargs in configs.items():
        finals = np.array([bandit_trajectory(steps=steps, seed=s, **kwargs)[-1][best_action] for s in seeds])
        table[name] = {"mean": float(finals.mean()), "min": float(finals.min()), "max": float(finals.max()),
                       "values": finals.tolist()}
    return table
