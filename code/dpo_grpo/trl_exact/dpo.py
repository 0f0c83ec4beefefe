"""Direct Preference Optimisation: the loss, its gradient, and the closed-form optimum it is derived from.

Shapes: every log-prob argument is a sequence log-prob array of one common shape ``(P,)`` (one entry per pair).
Formula: ``logits = beta * ((pi_c - pi_r) - (ref_c - ref_r))`` and, for ``loss_type="sigmoid"``,
``loss = mean(-log sigmoid(logits))``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validation as v

DPO_LOSS_TYPES = ("sigmoid", "hinge", "robust")


def log_sigmoid(x):
    """Numerically stable ``log(sigmoid(x)) = -log(1 + exp(-x))`` for any real array."""
    z = v.as_float_array(x, "x", finite=False)
    if np.isnan(z).any():
        raise ValueError("x must not contain NaN")
    return -np.logaddexp(0.0, -z)


def sigmoid(x):
    """Numerically stable logistic function ``1 / (1 + exp(-x))``."""
    return np.exp(log_sigmoid(x))


class DPOOutput(NamedTuple):
    """Result of :func:`dpo_loss`. The first two fields are ``loss, logits``."""

    loss: float
    logits: np.ndarray  #: beta * (policy gap - reference gap), shape (P,)
    chosen_rewards: np.ndarray  #: implicit reward beta * (pi_c - ref_c), shape (P,)
    rejected_rewards: np.ndarray  #: implicit reward beta * (pi_r - ref_r), shape (P,)
    grad_policy_chosen: np.ndarray  #: d loss / d policy_chosen, shape (P,)
    grad_policy_rejected: np.ndarray  #: d loss / d policy_rejected = -grad_policy_chosen

    @property
    def metrics(self) -> dict:
        """TRL's logged names: ``rewards/chosen``, ``rewards/rejected``, ``rewards/accuracies``, ``rewards/margins``."""
        margins = self.chosen_rewards - self.rejected_rewards
        return {
            "rewards/chosen": float(self.chosen_rewards.mean()),
            "rewards/rejected": float(self.rejected_rewards.mean()),
            "rewards/accuracies": float((self.chosen_rewards > self.rejected_rewards).mean()),
            "rewards/margins": float(margins.mean()),
        }


def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1, *,
             loss_type="sigmoid", label_smoothing=0.0) -> DPOOutput:
    """DPO loss on sequence log-probs, with TRL 1.16.0's ``sigmoid``, ``hinge`` and ``robust`` forms.

    With ``u = (pi_c - pi_r) - (ref_c - ref_r)`` and ``z = beta * u`` (returned as ``logits``):

    - ``sigmoid``: ``-log sigmoid(z)`` (the DPO paper's loss);
    - ``hinge``: ``max(0, 1 - z)`` (SLiC);
    - ``robust``: ``(-(1 - s) log sigmoid(z) + s log sigmoid(-z)) / (1 - 2s)`` with ``s = label_smoothing`` in
      [0, 0.5): an unbiased loss under labels flipped with probability ``s``.

    The loss is the mean over pairs. TRL 1.16.0 reads ``label_smoothing`` only for ``robust`` (and losses we do not
    implement); its ``sigmoid`` silently ignores it. Rather than ignore an argument, we raise ``ValueError``
    when ``label_smoothing != 0`` with ``sigmoid`` or ``hinge``.
    """
    pc = v.as_float_array(policy_chosen, "policy_chosen")
    pr = v.as_float_array(policy_rejected, "policy_rejected")
    rc = v.as_float_array(ref_chosen, "ref_chosen")
    rr = v.as_float_array(ref_rejected, "ref_rejected")
    v.same_shape(policy_chosen=pc, policy_rejected=pr, ref_chosen=rc, ref_rejected=rr)
    beta = v.scalar(beta, "beta", positive=True)
    v.choice(loss_type, "loss_type", DPO_LOSS_TYPES)
    s = v.scalar(label_smoothing, "label_smoothing", nonnegative=True)
    if loss_type == "robust" and not s < 0.5:
        raise ValueError(f"label_smoothing must lie in [0, 0.5) for loss_type='robust', got {s}")
    if loss_type != "robust" and s != 0.0:
        raise ValueError(
            f"label_smoothing={s} has no effect for loss_type={loss_type!r} in TRL 1.16.0; "
            "use loss_type='robust' for noisy labels, or label_smoothing=0"
        )

    chosen_rewards = beta * (pc - rc)
    rejected_rewards = beta * (pr - rr)
    logits = beta * ((pc - pr) - (rc - rr))
    n = logits.size
    if loss_type == "sigmoid":
        per_pair = -log_sigmoid(logits)
        dz = -sigmoid(-logits)  # d/dz of -log sigmoid(z)
    elif loss_type == "hinge":
        per_pair = np.maximum(0.0, 1.0 - logits)
        dz = np.where(logits < 1.0, -1.0, 0.0)
    else:  # robust
        per_pair = (-(1 - s) * log_sigmoid(logits) + s * log_sigmoid(-logits)) / (1 - 2 * s)
        dz = (-(1 - s) * sigmoid(-logits) - s * sigmoid(logits)) / (1 - 2 * s)
    grad_chosen = dz * beta / n
    return DPOOutput(
        loss=float(per_pair.mean()),
        logits=logits,
        chosen_rewards=chosen_rewards,
        rejected_rewards=rejected_rewards,
        grad_policy_chosen=grad_chosen,
        grad_policy_rejected=-grad_chosen,
    )


def dpo_gradient_weight(logits):
    """Per-pair weight ``sigmoid(-z)`` that scales DPO's gradient: large when the pair is ranked wrongly."""
    return sigmoid(-v.as_float_array(logits, "logits"))


# --- The closed-form optimum of the KL-regularised objective (section 3.2) -------------------------------------------

def kl_regularised_objective(policy, rewards, ref_policy, beta):
    """``sum_y p_y r_y - beta * KL(p || q)`` for one prompt with a finite answer set; all arrays shape (Y,)."""
    p = v.probability_vector(policy, "policy", strictly_positive=False)
    r = v.as_float_array(rewards, "rewards", ndim=1)
    q = v.probability_vector(ref_policy, "ref_policy")
    v.same_shape(policy=p, rewards=r, ref_policy=q)
    beta = v.scalar(beta, "beta", positive=True)
    support = p > 0
    kl = float(np.sum(p[support] * np.log(p[support] / q[support])))
    return float(p @ r) - beta * kl


def optimal_policy(ref_policy, rewards, beta):
    """The maximiser ``pi*(y) = pi_ref(y) exp(r(y)/beta) / Z`` and ``log Z``; arrays shape (Y,)."""
    q = v.probability_vector(ref_policy, "ref_policy")
    r = v.as_float_array(rewards, "rewards", ndim=1)
    v.same_shape(ref_policy=q, rewards=r)
    beta = v.scalar(beta, "beta", positive=True)
    logits = np.log(q) + r / beta
    log_z = float(np.logaddexp.reduce(logits))
    return np.exp(logits - log_z), log_z


def objective_identity_gap(policy, rewards, ref_policy, beta):
    """``|J(p) - (beta log Z - beta KL(p || pi*))|``: zero (to rounding) for every p, which proves pi* is optimal."""
    p = v.probability_vector(policy, "policy")
    pi_star, log_z = optimal_policy(ref_policy, rewards, beta)
    identity = beta * log_z - beta * float(np.sum(p * np.log(p / pi_star)))
    return abs(kl_regularised_objective(p, rewards, ref_policy, beta) - identity)


def implicit_reward(policy_logp, ref_logp, beta, log_z=0.0):
    """Reward recovered from a policy: ``r = beta * (log pi - log pi_ref) + beta * log Z``."""
    pl = v.as_float_array(policy_logp, "policy_logp")
    rl = v.as_float_array(ref_logp, "ref_logp")
    v.same_shape(policy_logp=pl, ref_logp=rl)
    beta = v.scalar(beta, "beta", positive=True)
    return beta * (pl - rl) + beta * v.scalar(log_z, "log_z")


def bradley_terry_probability(reward_chosen, reward_rejected):
    """``P(y_w > y_l) = sigmoid(r_w - r_l)`` (Bradley–Terry), elementwise."""
    rw = v.as_float_array(reward_chosen, "reward_chosen")
    rl = v.as_float_array(reward_rejected, "reward_rejected")
    v.same_shape(reward_chosen=rw, reward_rejected=rl)
    return sigmoid(rw - rl)


def max_objective_identity_error(ref_policy, rewards, beta, n_policies=200, seed=17):
    """Largest :func:`objective_identity_gap` over ``n_policies`` random policies (seeded Dirichlet(1) draws)."""
    n = v.integer(n_policies, "n_policies", minimum=1)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    q = v.probability_vector(ref_policy, "ref_policy")
    return max(objective_identity_gap(p, rewards, q, beta) for p in rng.dirichlet(np.ones(q.size), size=n))
