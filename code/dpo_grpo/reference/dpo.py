"""Direct Preference Optimisation as the article derives it (chapter 3, sections
3.1–3.2).

Shapes: sequence log-probs, one entry per preference pair, arrays of shape ``(P,)``;
answer sets of one prompt (policies, rewards) shape ``(Y,)``. :func:`dpo_loss` here is
the readable one the chapters print (``dpo_grpo.dpo_loss``). The TRL-exact loss with
every ``DPOConfig.loss_type`` is :func:`dpo_grpo.trl_exact.dpo.dpo_loss`
(``dpo_grpo.trl_exact.dpo_loss``), equal to :func:`dpo_loss` here at its defaults
(``loss_type="sigmoid"``).
"""

from __future__ import annotations

import numpy as np

from .. import _validation as v


def log_sigmoid(x):
    """``log σ(x) = -log(1 + e^{-x})``, computed without overflow for any real array."""
    z = v.as_float_array(x, "x", finite=False)
    if np.isnan(z).any():
        raise ValueError("x must not contain NaN")
    return -np.logaddexp(0.0, -z)


def sigmoid(x):
    """The logistic function ``σ(x) = 1 / (1 + e^{-x})``."""
    return np.exp(log_sigmoid(x))


def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    """DPO loss (section 3.2), the mean over pairs of -log σ(β u), with the margin
    u = (π_w - π_l) - (ref_w - ref_l) of sequence log-probs; every input has shape (P,).

    Returns (loss, logits), logits = β u per pair.
    """
    pc, pr, rc, rr = v.arrays(
        policy_chosen=policy_chosen,
        policy_rejected=policy_rejected,
        ref_chosen=ref_chosen,
        ref_rejected=ref_rejected,
    )
    beta = v.scalar(beta, "beta", positive=True)
    logits = beta * ((pc - pr) - (rc - rr))
    return float(np.mean(-log_sigmoid(logits))), logits


def dpo_gradient_weight(logits):
    """Per-pair weight ``σ(-z)`` that scales DPO's gradient (section 3.2): near 1 when
    the pair is ranked wrongly."""
    return sigmoid(-v.as_float_array(logits, "logits"))


# --- The closed-form optimum of the KL-regularised objective (section 3.2) ------------


def kl_regularised_objective(policy, rewards, ref_policy, beta):
    """The KL-regularised objective (section 3.1)
    ``J(p) = Σ_y p_y r_y - β KL(p ‖ π_ref)`` for one prompt with a finite answer set;
    arrays shape (Y,)."""
    p = v.probability_vector(policy, "policy", strictly_positive=False)
    r = v.as_float_array(rewards, "rewards", ndim=1)
    q = v.probability_vector(ref_policy, "ref_policy")
    v.same_shape(policy=p, rewards=r, ref_policy=q)
    beta = v.scalar(beta, "beta", positive=True)
    support = p > 0
    kl = float(np.sum(p[support] * np.log(p[support] / q[support])))
    return float(p @ r) - beta * kl


def optimal_policy(ref_policy, rewards, beta):
    """The maximiser of :func:`kl_regularised_objective` (section 3.2):
    ``π*(y) = π_ref(y) e^{r(y)/β} / Z``.

    Returns ``(π*, log Z)``; arrays shape (Y,).
    """
    q = v.probability_vector(ref_policy, "ref_policy")
    r = v.as_float_array(rewards, "rewards", ndim=1)
    v.same_shape(ref_policy=q, rewards=r)
    beta = v.scalar(beta, "beta", positive=True)
    logits = np.log(q) + r / beta
    log_z = float(np.logaddexp.reduce(logits))
    return np.exp(logits - log_z), log_z


def objective_identity_gap(policy, rewards, ref_policy, beta):
    """``|J(p) - (β log Z - β KL(p ‖ π*))|``: zero (to rounding) for every p, which
    proves π* is optimal."""
    p = v.probability_vector(policy, "policy")
    pi_star, log_z = optimal_policy(ref_policy, rewards, beta)
    identity = beta * log_z - beta * float(np.sum(p * np.log(p / pi_star)))
    return abs(kl_regularised_objective(p, rewards, ref_policy, beta) - identity)


def implicit_reward(policy_logp, ref_logp, beta, log_z=0.0):
    """The reward a policy implies (section 3.2, inverted):
    ``r = β (log π - log π_ref) + β log Z``."""
    pl, rl = v.arrays(policy_logp=policy_logp, ref_logp=ref_logp)
    beta = v.scalar(beta, "beta", positive=True)
    return beta * (pl - rl) + beta * v.scalar(log_z, "log_z")


def bradley_terry_probability(reward_chosen, reward_rejected):
    """Bradley–Terry (section 3.2): ``P(y_w ≻ y_l) = σ(r_w - r_l)``, elementwise."""
    rw, rl = v.arrays(reward_chosen=reward_chosen, reward_rejected=reward_rejected)
    return sigmoid(rw - rl)


def max_objective_identity_error(ref_policy, rewards, beta, n_policies=200, seed=17):
    """Largest :func:`objective_identity_gap` over ``n_policies`` random policies
    (seeded Dirichlet(1) draws)."""
    n = v.integer(n_policies, "n_policies", minimum=1)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    q = v.probability_vector(ref_policy, "ref_policy")
    return max(
        objective_identity_gap(p, rewards, q, beta)
        for p in rng.dirichlet(np.ones(q.size), size=n)
    )
