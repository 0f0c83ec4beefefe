"""A four-action bandit trained online with GRPO and no critic (section 04's
experiment).

Protocol per step: snapshot ``pi_old``; draw one group of ``group_size`` actions from
it; standardise their rewards within the group (population std, eps 1e-4); take
``inner_steps`` gradient steps of size ``lr`` on the logits of
:func:`~dpo_grpo.reference.grpo.grpo_loss` (clipped surrogate + ``beta`` x sampled k3
towards a uniform reference), with the old log-probs fixed at the snapshot.
Probabilities are tracked as arrays of shape ``(4,)``.
"""

from __future__ import annotations

import numpy as np

from .. import _validation as v
from .softmax import log_softmax, softmax
from .advantages import group_advantages
from .grpo import grpo_loss

DEFAULT_REWARDS = (-0.2, 0.3, 1.0, 0.0)


class BanditRun:
    """One seeded bandit run that can be extended: ``run.trajectory(steps)`` runs only
    the steps not yet run.

    A run's step ``k`` does not depend on how many steps follow it (each step draws its
    group from the same generator, in order), so the first 80 steps of a 200-step run
    are the 80-step run, bit for bit. The live widget keeps runs keyed by their other
    parameters, so moving the ``steps`` slider only runs the new steps.
    """

    def __init__(
        self,
        group_size=32,
        seed=7,
        reward_table=None,
        beta=0.02,
        lr=0.18,
        epsilon=0.2,
        inner_steps=2,
    ):
        self.group_size = v.integer(group_size, "group_size", minimum=2)
        self.rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
        rewards = v.as_float_array(
            DEFAULT_REWARDS if reward_table is None else reward_table,
            "reward_table",
            ndim=1,
        )
        if rewards.size < 2:
            raise ValueError(
                f"reward_table needs at least two actions, got {rewards.size}"
            )
        self.rewards = rewards
        self.beta = v.scalar(beta, "beta", nonnegative=True)
        self.lr = v.scalar(lr, "lr", positive=True)
        self.epsilon = v.scalar(epsilon, "epsilon", open_unit=True)
        self.inner_steps = v.integer(inner_steps, "inner_steps", minimum=1)
        #: the validated parameters: equal keys give equal runs
        self.key = (
            self.group_size,
            int(seed),
            rewards.tobytes(),
            self.beta,
            self.lr,
            self.epsilon,
            self.inner_steps,
        )
        self.logits = np.zeros(rewards.size)
        # history[k]: the policy after step k (row 0: uniform)
        self.history = [softmax(self.logits)]

    @property
    def steps_run(self) -> int:
        return len(self.history) - 1

    def trajectory(self, steps) -> np.ndarray:
        """The policy's probabilities after steps ``0..steps``, shape
        ``(steps + 1, n_actions)`` (a new array)."""
        steps = v.integer(steps, "steps", minimum=1)
        self._advance(steps - self.steps_run)
        return np.array(self.history[: steps + 1])

    def _advance(self, n):
        """n GRPO steps (section 4.5): sample a group from π_old, score it, step."""
        n_actions, logits = self.rewards.size, self.logits
        ref_logp = log_softmax(np.zeros(n_actions))  # uniform reference policy
        one_hot = np.eye(n_actions)
        mask = np.ones((self.group_size, 1))  # each answer is one token
        for _ in range(n):
            old_probs = softmax(logits)  # snapshot π_old
            actions = self.rng.choice(n_actions, size=self.group_size, p=old_probs)
            advantages = group_advantages(self.rewards[actions][None, :])[0]
            old_logp = np.log(old_probs)[actions, None]
            for _ in range(self.inner_steps):
                logp = log_softmax(logits)
                _, grad = grpo_loss(
                    logp[actions, None],
                    old_logp,
                    ref_logp[actions, None],
                    advantages,
                    mask,
                    epsilon=self.epsilon,
                    beta=self.beta,
                )
                # chain rule through log-softmax: d log π(a) / d logits = e_a - π
                score = one_hot[actions] - np.exp(logp)
                logits = logits - self.lr * (grad[:, 0] @ score)
            self.history.append(softmax(logits))
        self.logits = logits


def bandit_trajectory(
    steps=80,
    group_size=32,
    seed=7,
    reward_table=None,
    beta=0.02,
    lr=0.18,
    epsilon=0.2,
    inner_steps=2,
):
    """Run the bandit; return the policy's probabilities after every step, shape
    ``(steps + 1, n_actions)``.

    Row 0 is the initial (uniform) policy, row ``k`` the policy after step ``k``.
    """
    steps = v.integer(steps, "steps", minimum=1)
    return BanditRun(
        group_size, seed, reward_table, beta, lr, epsilon, inner_steps
    ).trajectory(steps)


def train_group_bandit(
    steps=80, group_size=32, seed=7, reward_table=None, beta=0.02, lr=0.18, epsilon=0.2
):
    """Train the bandit; return ``[(step, probs)]`` at steps 1, 20, 40 and ``steps``
    (those that exist)."""
    history = bandit_trajectory(
        steps, group_size, seed, reward_table, beta, lr, epsilon
    )
    steps = len(history) - 1
    marks = sorted({s for s in (1, 20, 40) if s <= steps} | {steps})
    return [(s, history[s]) for s in marks]


def bandit_seed_table(configs, seeds=range(10), steps=80, best_action=2):
    """Final probability of ``best_action`` over ``seeds`` for each named config (kwargs
    of the bandit).

    Returns ``{name: {"mean", "min", "max", "values"}}``.
    """
    if not isinstance(configs, dict) or not configs:
        raise TypeError("configs must be a non-empty dict of {name: keyword arguments}")
    seeds = [v.integer(s, "seeds", minimum=0) for s in v.sequence(seeds, "seeds")]
    if not seeds:
        raise ValueError("seeds must not be empty")
    best_action = v.integer(best_action, "best_action", minimum=0)
    table = {}
    for name, kwargs in configs.items():
        if not isinstance(kwargs, dict):
            raise TypeError(
                f"configs[{name!r}] must be a dict of keyword arguments, got "
                f"{type(kwargs).__name__}"
            )
        runs = [bandit_trajectory(steps=steps, seed=s, **kwargs) for s in seeds]
        if best_action >= runs[0].shape[1]:
            raise ValueError(
                f"best_action must be < the number of actions ({runs[0].shape[1]}) of "
                f"config {name!r}, got {best_action}"
            )
        finals = np.array([run[-1][best_action] for run in runs])
        table[name] = {
            "mean": float(finals.mean()),
            "min": float(finals.min()),
            "max": float(finals.max()),
            "values": finals.tolist(),
        }
    return table
