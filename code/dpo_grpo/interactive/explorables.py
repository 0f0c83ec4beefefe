"""Pure data behind the book's original seven explorables (NumPy only: no plotly, no
ipywidgets).

Each ``*_data(...)`` function maps parameters to the arrays one explorable draws, by
calling the package's core functions (nothing is re-derived here). The explorable's own
module (:mod:`~dpo_grpo.interactive.clip_platform`,
:mod:`~dpo_grpo.interactive.zero_std`, ...) turns them into a plotly figure with
precomputed sliders (static book) and a live ipywidgets UI (Jupyter, Colab); the tests
check these functions against hand-computed values.

====================  ==================================================================
function              what it computes
====================  ==================================================================
clip_platform_data    per-token clipped objective and its gradient vs the ratio, for
                      A = +1 and A = -1
zero_std_data         P(a 0/1 group is all equal), Monte Carlo, batch fraction with a
                      difficulty spread
group_advantage_data  rewards after an affine map and their standardised advantages
                      (ddof 0 and 1)
dpo_data              DPO loss and gradient weight vs the log-ratio margin; the
                      four-log-prob split
kl_estimator_data     k1, k2, k3 vs Delta; biased vs ratio-corrected k3 expectation
                      off-policy
bandit_data           the group bandit's action probabilities after every step
memory_ledger_data    logical training state (bytes) per component for PPO, GRPO and DPO
====================  ==================================================================

Every random quantity takes a ``seed`` (default fixed), so the same parameters always
give the same arrays.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache

import numpy as np

from .. import _validation as v
from ..i18n import tr
from ..reference import examples as ex
from ..reference.advantages import group_advantages
from ..reference.bandit import BanditRun
from ..reference.dpo import dpo_gradient_weight, log_sigmoid
from ..trl_exact.dpo import dpo_loss
from ..reference.grpo import clip_region, clipped_objective, clipped_objective_grad
from ..reference.kl import exact_kl, k1, k2, k3, k3_expectation, k3_per_action
from ..reference.zero_std import (
    expected_zero_std_fraction,
    simulate_zero_std_fraction,
    two_sample_advantage,
    zero_std_monte_carlo,
    zero_std_probability,
)

from .memory_data import MEMORY_RECIPES, memory_ledger_data

__all__ = [
    "clip_platform_data",
    "zero_std_data",
    "group_advantage_data",
    "dpo_data",
    "kl_estimator_data",
    "bandit_data",
    "memory_ledger_data",
    "example_sequences",
    "DEFAULT_RHO",
    "MEMORY_RECIPES",
    "difficulty_spread",
]


def _readonly(*arrays):
    for a in arrays:
        a.setflags(write=False)
    return arrays if len(arrays) > 1 else arrays[0]


#: Ratio grid of the clip explorable: 0.4 ... 2.2 in steps of 0.005 (361 points).
DEFAULT_RHO = np.round(np.linspace(0.4, 2.2, 361), 6)


# --------------------------------------------------------------------------------------
# 1. Clip platforms
# --------------------------------------------------------------------------------------


def example_sequences():
    """The article's four completions (section 3.7 / chapter 4): first-token ratio,
    advantage, and a label.

    Ratios ``exp(new - old)`` = 1.2840, 1.1052, 0.7788, 0.9048 from
    :func:`dpo_grpo.reference.examples.grpo_token_example`; advantages from
    ``group_advantages(REWARD_GROUPS[:1])``.
    """
    inputs = ex.grpo_token_example()
    ratio = np.exp(inputs["new_logps"] - inputs["old_logps"])[:, 0]
    advantage = np.asarray(inputs["advantages"], dtype=np.float64)
    return {
        "ratio": ratio,
        "advantage": advantage,
        "label": [
            tr("answer {i} (r = {r:g})", i=i, r=r)  # numbered 1-4, as the chapters do
            for i, r in enumerate(ex.REWARD_GROUPS[0], start=1)
        ],
    }


def _delta_mask(rho, delta):
    return (
        np.zeros(np.shape(rho), dtype=bool)
        if delta is None
        else np.asarray(rho) > delta
    )


def clip_platform_data(epsilon=0.2, epsilon_high=None, delta=None):
    """Per-token objective ``min(rho A, clip(rho, 1-eps_low, 1+eps_high) A)`` and
    ``d/d rho`` for A = +1 and -1.

    ``epsilon`` is eps_low, ``epsilon_high=None`` means symmetric clipping, ``delta``
    caps the unclipped ratio (two-sided clipping; None = off). Returns ``rho`` (grid),
    ``objective_pos/neg``, ``grad_pos/neg``, ``region_pos/neg``
    (:func:`~dpo_grpo.reference.grpo.clip_region` labels), ``capped_pos/neg`` (where
    delta zeroes the gradient), ``bounds`` (``low = 1 - eps_low``,
    ``high = 1 + eps_high``, ``delta``) and ``examples``: the four article sequences
    with their objective per unit |A| (``objective_unit`` = objective at sign(A)), their
    true objective ``rho A`` clipped, gradient and region.
    """
    eps_low = v.scalar(epsilon, "epsilon", open_unit=True)
    eps_high = (
        eps_low
        if epsilon_high is None
        else v.scalar(epsilon_high, "epsilon_high", nonnegative=True)
    )
    delta = v.scalar(delta, "delta", allow_none=True)
    if delta is not None and delta <= 1.0:
        raise ValueError(f"delta must be > 1 (it caps ratios above 1), got {delta}")
    rho = DEFAULT_RHO
    kw = dict(epsilon=eps_low, epsilon_high=eps_high, delta=delta)
    out = {
        "rho": rho,
        "bounds": {"low": 1.0 - eps_low, "high": 1.0 + eps_high, "delta": delta},
        "params": {"epsilon": eps_low, "epsilon_high": eps_high, "delta": delta},
    }
    for name, a in (("pos", 1.0), ("neg", -1.0)):
        out[f"objective_{name}"] = clipped_objective(rho, a, **kw)
        out[f"grad_{name}"] = clipped_objective_grad(rho, a, **kw)
        out[f"region_{name}"] = clip_region(
            rho, a, epsilon=eps_low, epsilon_high=eps_high
        )
        out[f"capped_{name}"] = _delta_mask(rho, delta) & (
            out[f"region_{name}"] != "platform"
        )
    seq = example_sequences()
    r, adv = seq["ratio"], seq["advantage"]
    seq["objective"] = clipped_objective(r, adv, **kw)
    seq["objective_unit"] = clipped_objective(r, np.sign(adv), **kw)
    seq["grad"] = clipped_objective_grad(r, adv, **kw)
    seq["region"] = clip_region(r, adv, epsilon=eps_low, epsilon_high=eps_high)
    seq["capped"] = _delta_mask(r, delta) & (seq["region"] != "platform")
    out["examples"] = seq
    return out


# --------------------------------------------------------------------------------------
# 2. Zero-std groups
# --------------------------------------------------------------------------------------


def _unit_grid(x, name, ndim=None):
    """A grid of pass rates: finite values in [0, 1]."""
    arr = v.as_float_array(x, name, ndim=ndim)
    if ((arr < 0) | (arr > 1)).any():
        raise ValueError(f"{name} must lie in [0, 1]")
    return arr


def difficulty_spread(mean_pass_rate, n_prompts=256, concentration=2.0, seed=0):
    """Pass rates of a batch of ``n_prompts`` prompts: seeded draws from Beta(c m, c
    (1 - m)), mean ``m``.

    ``concentration`` c = 2 makes the spread wide (c m = c (1 - m) = 1 is the uniform
    distribution at m = 0.5).
    """
    m = v.scalar(mean_pass_rate, "mean_pass_rate")
    if not 0.0 < m < 1.0:
        raise ValueError(f"mean_pass_rate must lie in (0, 1), got {m}")
    n = v.integer(n_prompts, "n_prompts", minimum=1)
    c = v.scalar(concentration, "concentration", positive=True)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    return rng.beta(c * m, c * (1.0 - m), size=n)


def zero_std_data(
    group_size=8,
    pass_rate=0.8,
    eps=1e-4,
    *,
    p_grid=None,
    g_grid=None,
    n_groups=2000,
    n_prompts=256,
    seed=0,
):
    """Everything the zero-std explorable draws, for 0/1 rewards.

    - ``p``, ``prob_vs_p``: ``p**G + (1-p)**G`` over pass rates at the chosen
      ``group_size``; ``mc_p``, ``mc_vs_p``: seeded Monte-Carlo estimates (``n_groups``
      groups each) at a coarser set of p.
    - ``g``, ``prob_vs_g``, ``mc_vs_g``: the same against the group size at the chosen
      ``pass_rate``.
    - ``batch_pass_rates``: a batch of ``n_prompts`` pass rates spread around
      ``pass_rate`` (:func:`difficulty_spread`); ``batch_expected_vs_g`` (exact
      expectation) and ``batch_simulated_vs_g`` (one seeded draw) of the fraction of its
      prompts whose group carries no reward signal.
    - ``gap``, ``two_sample``: the advantage ``d / (d + 2 eps)`` of the group ``[0, d]``
      against the gap d, with ``gaps`` / ``two_sample_at_gaps`` at the article's three
      gaps (1, 0.01, 1e-5).
    """
    g = v.integer(group_size, "group_size", minimum=2)
    p = v.scalar(pass_rate, "pass_rate")
    if not 0.0 < p < 1.0:
        raise ValueError(f"pass_rate must lie in (0, 1), got {p}")
    eps = v.scalar(eps, "eps", positive=True)
    p_grid = (
        np.round(np.linspace(0.0, 1.0, 101), 6)
        if p_grid is None
        else _unit_grid(p_grid, "p_grid")
    )
    g_grid = (
        (2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64)
        if g_grid is None
        else v.sequence(g_grid, "g_grid")
    )
    mc_p = np.round(np.linspace(0.05, 0.95, 19), 6)
    gaps = np.array(ex.TWO_SAMPLE_GAPS, dtype=np.float64)
    g_key = tuple(v.integer(k, "g_grid", minimum=2) for k in g_grid)
    n_groups = v.integer(n_groups, "n_groups", minimum=1)
    n_prompts = v.integer(n_prompts, "n_prompts", minimum=1)
    seed = v.integer(seed, "seed", minimum=0)
    mc_vs_p = _zero_mc_vs_p(tuple(mc_p.tolist()), g, n_groups, seed)
    batch, prob_vs_g, mc_vs_g, expected_vs_g, simulated_vs_g = _zero_vs_g(
        p, g_key, n_groups, n_prompts, seed
    )
    gap, two_sample, at_gaps = _zero_two_sample(eps, tuple(gaps.tolist()))
    return {
        "params": {"group_size": g, "pass_rate": p, "eps": eps},
        "p": p_grid,
        "prob_vs_p": zero_std_probability(p_grid, g),
        "mc_p": mc_p,
        "mc_vs_p": mc_vs_p,
        "g": np.array(g_key),
        "prob_vs_g": prob_vs_g,
        "mc_vs_g": mc_vs_g,
        "batch_pass_rates": batch,
        "batch_expected_vs_g": expected_vs_g,
        "batch_simulated_vs_g": simulated_vs_g,
        "probability": zero_std_probability(p, g),
        "batch_expected": expected_zero_std_fraction(batch, g),
        "gap": gap,
        "two_sample": two_sample,
        "gaps": gaps,
        "two_sample_at_gaps": at_gaps,
        "n_groups": n_groups,
        "seed": seed,
    }


# The pieces of zero_std_data, memoised (pure and seeded, read-only results): a slider
# move recomputes one piece.


@lru_cache(maxsize=256)
def _zero_mc_vs_p(mc_p, g, n_groups, seed):
    return _readonly(
        np.array([zero_std_monte_carlo(q, g, n_groups, seed) for q in mc_p])
    )


@lru_cache(maxsize=256)
def _zero_vs_g(p, g_grid, n_groups, n_prompts, seed):
    batch = difficulty_spread(p, n_prompts, seed=seed)
    return _readonly(
        batch,
        np.array([zero_std_probability(p, k) for k in g_grid]),
        np.array([zero_std_monte_carlo(p, k, n_groups, seed) for k in g_grid]),
        np.array([expected_zero_std_fraction(batch, k) for k in g_grid]),
        np.array([simulate_zero_std_fraction(batch, k, seed) for k in g_grid]),
    )


@lru_cache(maxsize=256)
def _zero_two_sample(eps, gaps):
    gap = np.logspace(-7, 1, 161)
    return _readonly(
        gap,
        gap / (gap + 2.0 * eps),
        np.array([two_sample_advantage(d, eps) for d in gaps]),
    )


# --------------------------------------------------------------------------------------
# 3. Group advantages
# --------------------------------------------------------------------------------------


def group_advantage_data(
    rewards=None, scale=1.0, shift=0.0, eps=1e-4, *, eps_values=None
):
    """Advantages of one group of G rewards (2 <= G <= 16) after the affine map
    ``r -> scale * r + shift``.

    Returns ``rewards`` (as given), ``transformed``, ``advantages_ddof0`` /
    ``advantages_ddof1`` (:func:`~dpo_grpo.reference.advantages.group_advantages`), the
    transformed group's ``mean`` and ``std_ddof0/1``, and the invariance curve:
    ``scales`` (log grid) against ``best_advantage_vs_scale[eps]`` = the largest
    advantage (ddof 0) of ``s * r`` for each eps in ``eps_values``. Shifts never change
    the advantages; positive scales do not either until ``scale * std`` is comparable
    with eps; a negative scale flips their signs.
    """
    r = v.as_float_array(
        ex.REWARD_GROUPS[0] if rewards is None else rewards, "rewards", ndim=1
    )
    if not 2 <= r.size <= 16:
        raise ValueError(f"a group needs 2 to 16 rewards, got {r.size}")
    a = v.scalar(scale, "scale")
    b = v.scalar(shift, "shift")
    eps = v.scalar(eps, "eps", positive=True)
    t = a * r + b
    scales = np.logspace(-7, 2, 91)
    eps_values = (
        (1e-8, 1e-6, 1e-4, 1e-2)
        if eps_values is None
        else tuple(
            v.scalar(e, "eps_values", positive=True)
            for e in v.sequence(eps_values, "eps_values")
        )
    )
    best = int(np.argmax(r))
    curves = {
        e: group_advantages(scales[:, None] * r[None, :], eps=e)[:, best]
        for e in eps_values
    }
    return {
        "params": {"scale": a, "shift": b, "eps": eps},
        "rewards": r,
        "transformed": t,
        "advantages_ddof0": group_advantages(t[None, :], eps=eps, ddof=0)[0],
        "advantages_ddof1": group_advantages(t[None, :], eps=eps, ddof=1)[0],
        "mean": float(t.mean()),
        "std_ddof0": float(t.std()),
        "std_ddof1": float(t.std(ddof=1)),
        "scales": scales,
        "eps_values": eps_values,
        "best_index": best,
        "best_advantage_vs_scale": curves,
    }


# --------------------------------------------------------------------------------------
# 4. DPO
# --------------------------------------------------------------------------------------


def dpo_data(
    beta=0.1,
    policy_chosen=None,
    policy_rejected=None,
    ref_chosen=None,
    ref_rejected=None,
    *,
    betas=(0.05, 0.1, 0.5, 1.0),
):
    """DPO (sigmoid) loss ``-log sigmoid(beta u)`` and gradient weight
    ``sigmoid(-beta u)`` vs the log-ratio margin.

    ``u = [log pi(y_w) - log pi_ref(y_w)] - [log pi(y_l) - log pi_ref(y_l)]``; the
    implicit reward margin is ``beta u``. Curves for the chosen ``beta`` (``loss``,
    ``weight``) and for each of ``betas`` (``loss_by_beta``, ``weight_by_beta``). The
    four log-probs default to the article's first pair (section 3.7); for them:
    ``chosen_logratio``, ``rejected_logratio``, ``margin``, the implicit rewards
    ``chosen_reward`` / ``rejected_reward`` (``beta`` x log-ratio), ``logit`` = beta u,
    ``pair_loss`` and ``pair_weight`` (from :func:`~dpo_grpo.trl_exact.dpo.dpo_loss`).
    """
    beta = v.scalar(beta, "beta", positive=True)
    pair = ex.DPO_PAIRS
    logps = {}
    for name, value in (
        ("policy_chosen", policy_chosen),
        ("policy_rejected", policy_rejected),
        ("ref_chosen", ref_chosen),
        ("ref_rejected", ref_rejected),
    ):
        logps[name] = float(pair[name][0]) if value is None else v.scalar(value, name)
    m = np.round(np.linspace(-12.0, 12.0, 241), 6)
    betas = tuple(
        v.scalar(b, "betas", positive=True) for b in v.sequence(betas, "betas")
    )
    out = dpo_loss(**{k: np.array([x]) for k, x in logps.items()}, beta=beta)
    return {
        "params": {"beta": beta, **logps},
        "margin_grid": m,
        "loss": -log_sigmoid(beta * m),
        "weight": dpo_gradient_weight(beta * m),
        "betas": tuple(betas),
        "loss_by_beta": {b: -log_sigmoid(b * m) for b in betas},
        "weight_by_beta": {b: dpo_gradient_weight(b * m) for b in betas},
        "logps": logps,
        "chosen_logratio": logps["policy_chosen"] - logps["ref_chosen"],
        "rejected_logratio": logps["policy_rejected"] - logps["ref_rejected"],
        "margin": (logps["policy_chosen"] - logps["ref_chosen"])
        - (logps["policy_rejected"] - logps["ref_rejected"]),
        "chosen_reward": float(out.chosen_rewards[0]),
        "rejected_reward": float(out.rejected_rewards[0]),
        "logit": float(out.logits[0]),
        "pair_loss": out.loss,
        "pair_weight": float(dpo_gradient_weight(out.logits)[0]),
    }


# --------------------------------------------------------------------------------------
# 5. KL estimators
# --------------------------------------------------------------------------------------


def kl_estimator_data(delta=0.5, mix=1.0, p=None, q=None, old=None, *, mixes=None):
    """The three sampled KL estimators and the off-policy bias of k3 (section 3.5).

    ``Delta = log pi_ref - log pi_theta`` at a sampled token: curves ``k1 = -Delta``,
    ``k2 = Delta^2/2``, ``k3 = e^Delta - Delta - 1`` over ``deltas`` and their values at
    ``delta``. Off-policy part, with the current policy ``p``, reference ``q`` and old
    policy ``old`` (the article's [0.7, 0.2, 0.1], [0.2, 0.3, 0.5], [0.3, 0.3, 0.4]):
    the sampling distribution ``mu = (1 - mix) p + mix old`` (mix 1 = the old policy),
    ``biased`` = E_mu[k3] (what the bare estimator averages to), ``corrected`` =
    E_mu[(p/mu) k3] and ``exact`` = KL(p || q); the same two expectations over ``mixes``
    (``biased_vs_mix``, ``corrected_vs_mix``).
    """
    d = v.scalar(delta, "delta")
    t = v.scalar(mix, "mix")
    if not 0.0 <= t <= 1.0:
        raise ValueError(f"mix must lie in [0, 1], got {t}")
    p = v.probability_vector(ex.KL_EXAMPLE["p"] if p is None else p, "p")
    q = v.probability_vector(ex.KL_EXAMPLE["q"] if q is None else q, "q")
    old = v.probability_vector(ex.KL_EXAMPLE["old"] if old is None else old, "old")
    v.same_shape(p=p, q=q, old=old)
    deltas = np.round(np.linspace(-3.0, 3.0, 121), 6)
    mixes = (
        np.round(np.linspace(0.0, 1.0, 51), 6)
        if mixes is None
        else _unit_grid(mixes, "mixes", ndim=1)
    )

    def sampling(w):
        s = (1.0 - w) * p + w * old
        return s / s.sum()

    s = sampling(t)
    biased_vs_mix, corrected_vs_mix = _kl_vs_mix(
        tuple(p.tolist()), tuple(q.tolist()), tuple(old.tolist()), tuple(mixes.tolist())
    )
    return {
        "params": {"delta": d, "mix": t},
        "deltas": deltas,
        "k1": k1(deltas),
        "k2": k2(deltas),
        "k3": k3(deltas),
        "at_delta": {"k1": float(k1(d)), "k2": float(k2(d)), "k3": float(k3(d))},
        "p": p,
        "q": q,
        "old": old,
        "sampling": s,
        "k3_per_action": k3_per_action(p, q),
        "biased": k3_expectation(p, q, s),
        "corrected": k3_expectation(p, q, s, ratio_weighted=True),
        "exact": exact_kl(p, q),
        "mixes": mixes,
        "biased_vs_mix": biased_vs_mix,
        "corrected_vs_mix": corrected_vs_mix,
    }


@lru_cache(maxsize=64)
def _kl_vs_mix(p, q, old, mixes):
    """E_mu[k3] and E_mu[(p/mu) k3] along mu = (1 - tau) p + tau old for tau in
    ``mixes`` (memoised)."""
    p, q, old = np.array(p), np.array(q), np.array(old)

    def sampling(w):
        s = (1.0 - w) * p + w * old
        return s / s.sum()

    return _readonly(
        np.array([k3_expectation(p, q, sampling(w)) for w in mixes]),
        np.array(
            [k3_expectation(p, q, sampling(w), ratio_weighted=True) for w in mixes]
        ),
    )


# --------------------------------------------------------------------------------------
# 6. The bandit
# --------------------------------------------------------------------------------------

_BANDIT_RUNS: "OrderedDict[tuple, BanditRun]" = OrderedDict()
_BANDIT_RUNS_MAX = 128


def _kept_bandit_run(**params) -> BanditRun:
    """The :class:`~dpo_grpo.reference.bandit.BanditRun` for these parameters, kept
    (least recently used out) so that a longer ``steps`` only runs the new steps. The
    parameters are validated on every call."""
    run = BanditRun(**params)
    run = _BANDIT_RUNS.pop(run.key, run)
    _BANDIT_RUNS[run.key] = run
    if len(_BANDIT_RUNS) > _BANDIT_RUNS_MAX:
        _BANDIT_RUNS.popitem(last=False)
    return run


def bandit_data(
    group_size=32, beta=0.02, lr=0.18, epsilon=0.2, seed=7, steps=80, reward_table=None
):
    """One seeded run of the four-action group bandit
    (:func:`~dpo_grpo.reference.bandit.bandit_trajectory`, through a kept
    :class:`~dpo_grpo.reference.bandit.BanditRun`).

    Returns ``step`` (0..steps), ``probs`` of shape ``(steps + 1, n_actions)``, the
    ``rewards`` table and the index of the ``best`` action.
    """
    run = _kept_bandit_run(
        group_size=group_size,
        seed=seed,
        reward_table=reward_table,
        beta=beta,
        lr=lr,
        epsilon=epsilon,
    )
    probs, rewards = run.trajectory(steps), run.rewards.copy()
    return {
        "params": {
            "group_size": group_size,
            "beta": beta,
            "lr": lr,
            "epsilon": epsilon,
            "seed": seed,
            "steps": steps,
        },
        "step": np.arange(probs.shape[0]),
        "probs": probs,
        "rewards": rewards,
        "best": int(np.argmax(rewards)),
    }
