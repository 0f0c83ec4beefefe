"""Counter-examples to common misconceptions (chapter 8) and the trainer logs of the
page "Troubleshooting a run", as functions on the four-action bandit and small softmax
policies: what a sampled group's gradient is, the group mean as a baseline, reward
scale, the clip that does not bound the KL, what a GRPO trainer logs, and the KL that
pulls back a group whose rewards are all equal.
"""

from __future__ import annotations

import numpy as np

from .. import _validation as v
from ..reference.advantages import group_advantages
from ..reference.bandit import DEFAULT_REWARDS, bandit_trajectory
from ..reference.kl import exact_kl, k3
from ..reference.softmax import log_softmax, softmax
from ..reference.grpo import clip_region
from ..trl_exact.grpo import grpo_loss
from ..stats import sign_test
from .gradcheck import max_abs_error


def bandit_clip_activity(
    steps=80, group_size=32, seed=7, beta=0.02, lr=0.18, epsilon=0.2, inner_steps=2
) -> dict:
    """Replay the bandit of :func:`~dpo_grpo.reference.bandit.bandit_trajectory` and
    record every ratio its updates see.

    Same protocol and random stream as the package's run (``trajectory`` is compared
    with it in ``max_error``), but each inner update goes through the public
    :func:`~dpo_grpo.trl_exact.grpo.grpo_loss` and logs the sampled tokens' ratios ``pi
    / pi_old`` and their clip regions. Returns ``ratio_min``, ``ratio_max``,
    ``n_token_updates`` (steps x inner_steps x group_size), ``n_platform`` (token
    updates on a clip platform, i.e. with zero surrogate gradient), ``n_outside``
    (ratios outside ``[1 - epsilon, 1 + epsilon]``), ``trajectory`` and ``max_error``.
    """
    steps = v.integer(steps, "steps", minimum=1)
    g = v.integer(group_size, "group_size", minimum=2)
    inner = v.integer(inner_steps, "inner_steps", minimum=1)
    eps_clip = v.scalar(epsilon, "epsilon", open_unit=True)
    lr = v.scalar(lr, "lr", positive=True)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    r = np.asarray(DEFAULT_REWARDS, dtype=float)
    z = np.zeros(r.size)
    ref_logp = log_softmax(z)
    ones = np.ones((g, 1))
    ratios, n_platform, history = [], 0, [softmax(z)]
    for _ in range(steps):
        old = softmax(z)
        acts = rng.choice(r.size, size=g, p=old)
        adv = group_advantages(r[acts][None, :])[0]
        for _ in range(inner):
            lp = log_softmax(z)
            out = grpo_loss(
                lp[acts, None],
                np.log(old)[acts, None],
                ref_logp[acts, None],
                adv,
                ones,
                epsilon=eps_clip,
                beta=beta,
            )
            rho = out.ratio[:, 0]
            ratios.append(rho)
            n_platform += int(
                np.sum(clip_region(rho, adv, epsilon=eps_clip) == "platform")
            )
            z = z - lr * (out.grad[:, 0] @ (np.eye(r.size)[acts] - np.exp(lp)))
        history.append(softmax(z))
    ratios = np.concatenate(ratios)
    trajectory = np.array(history)
    package = bandit_trajectory(
        steps=steps,
        group_size=g,
        seed=seed,
        beta=beta,
        lr=lr,
        epsilon=eps_clip,
        inner_steps=inner,
    )
    return dict(
        ratio_min=float(ratios.min()),
        ratio_max=float(ratios.max()),
        n_token_updates=int(ratios.size),
        n_platform=n_platform,
        n_outside=int(np.sum(np.abs(ratios - 1.0) > eps_clip)),
        trajectory=trajectory,
        max_error=max_abs_error(trajectory, package),
    )


def kl_pull_back(
    start_logits=(2.0, 0.0, 0.0, 0.0),
    steps=40,
    group_size=32,
    beta=0.5,
    lr=0.18,
    seed=0,
) -> np.ndarray:
    """All-equal rewards (zero advantages) from a policy that is *not* the uniform
    reference: only the sampled k3 term acts, and it pulls the policy back. Returns the
    probabilities after each step, shape ``(steps + 1, A)``.
    """
    z = v.as_float_array(start_logits, "start_logits", ndim=1).copy()
    steps = v.integer(steps, "steps", minimum=1)
    g = v.integer(group_size, "group_size", minimum=2)
    lr = v.scalar(lr, "lr", positive=True)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    ref_logp = log_softmax(np.zeros(z.size))
    history = [softmax(z)]
    for _ in range(steps):
        lp = log_softmax(z)
        acts = rng.choice(z.size, size=g, p=np.exp(lp))
        out = grpo_loss(
            lp[acts, None],
            lp[acts, None],
            ref_logp[acts, None],
            np.zeros(g),
            np.ones((g, 1)),
            beta=beta,
        )
        z = z - lr * (out.grad[:, 0] @ (np.eye(z.size)[acts] - np.exp(lp)))
        history.append(softmax(z))
    return np.array(history)


def sampled_group_gradient(logits, reward_table, group_size, seed, beta=0.0):
    """One on-policy GRPO gradient w.r.t. the logits of a one-step softmax policy, from
    one sampled group.

    Returns ``(gradient (A,), actions (G,))``. Different seeds give different gradients:
    the update is a random variable of the sampled group (unlike DPO's, which is a
    function of a fixed data set).
    """
    z = v.as_float_array(logits, "logits", ndim=1)
    r = v.as_float_array(reward_table, "reward_table", ndim=1)
    v.same_shape(logits=z, reward_table=r)
    g = v.integer(group_size, "group_size", minimum=2)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    lp = log_softmax(z)
    acts = rng.choice(z.size, size=g, p=np.exp(lp))
    adv = group_advantages(r[acts][None, :])[0]
    out = grpo_loss(
        lp[acts, None], lp[acts, None], lp[acts, None], adv, np.ones((g, 1)), beta=beta
    )
    return out.grad[:, 0] @ (np.eye(z.size)[acts] - np.exp(lp)), acts


def group_mean_spread(
    logits,
    reward_table,
    group_sizes=(2, 4, 16, 64),
    temperatures=(0.5, 1.0, 2.0),
    n_groups=4000,
    seed=0,
) -> list:
    """The group mean as a Monte-Carlo baseline: its mean and spread over ``n_groups``
    groups per (G, T).

    Sampling at temperature T draws from ``softmax(logits / T)``, whose value is ``V_T =
    softmax(logits/T) . r``. Rows: ``{G, T, V_T, mean, std, min, max}``; the spread
    shrinks like ``1/sqrt(G)``, the centre moves with T.
    """
    z = v.as_float_array(logits, "logits", ndim=1)
    r = v.as_float_array(reward_table, "reward_table", ndim=1)
    v.same_shape(logits=z, reward_table=r)
    n = v.integer(n_groups, "n_groups", minimum=2)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    rows = []
    group_sizes = v.sequence(group_sizes, "group_sizes")
    for t in v.sequence(temperatures, "temperatures"):
        t = v.scalar(t, "temperatures", positive=True)
        p = softmax(z / t)
        for g in group_sizes:
            g = v.integer(g, "group_sizes", minimum=1)
            means = r[rng.choice(z.size, size=(n, g), p=p)].mean(axis=1)
            rows.append(
                dict(
                    G=g,
                    T=t,
                    V_T=float(p @ r),
                    mean=float(means.mean()),
                    std=float(means.std()),
                    min=float(means.min()),
                    max=float(means.max()),
                )
            )
    return rows


def scale_effects(rewards=(0.2, 0.8, 1.4, 0.6), eps=1e-4) -> dict:
    """How reward transformations change group advantages (hence on-policy gradients,
    which are linear in them).

    Keys: ``shift`` (max change under r + 100: rounding only), ``scale`` (``{a: max
    change under a*r}``: exact only as ``eps/a -> 0``), ``rank_error`` (two answers
    swapped by a faulty scorer), ``ties`` (two answers tied), ``outlier`` (one reward
    replaced by an outlier: the others' advantages are squeezed), ``negative`` (``-r``
    reverses every advantage).
    """
    r = v.as_float_array(rewards, "rewards", ndim=1)
    base = group_advantages(r[None, :], eps=eps)[0]
    scale = {}
    for a in (10.0, 1.0e-2, 1.0e-3, 1.0e-4):
        scale[a] = float(
            np.max(np.abs(group_advantages(a * r[None, :], eps=eps)[0] - base))
        )
    swapped = r.copy()
    i, j = int(np.argmax(r)), int(np.argsort(r)[-2])
    swapped[[i, j]] = swapped[[j, i]]
    tied = r.copy()
    tied[j] = tied[i]
    outlier = r.copy()
    outlier[int(np.argmin(r))] = -10.0
    return dict(
        base=base,
        shift=float(
            np.max(np.abs(group_advantages(r[None, :] + 100.0, eps=eps)[0] - base))
        ),
        scale=scale,
        rank_error=group_advantages(swapped[None, :], eps=eps)[0],
        ties=group_advantages(tied[None, :], eps=eps)[0],
        outlier=group_advantages(outlier[None, :], eps=eps)[0],
        negative=group_advantages(-r[None, :], eps=eps)[0],
        swapped_pair=(i, j),
    )


def clip_kl_toy(
    shared=True, rare_scale=30.0, rare_prob=1e-4, lr=0.005, max_epochs=2000, epsilon=0.2
) -> dict:
    """A softmax over 4 tokens where the clip sees only the sampled tokens while the
    whole distribution moves.

    Tokens 0 and 1 (probabilities 0.4 and 0.4 of the head, then 0.2 for token 2) are
    sampled twice each, with rewards 1 and 0 (advantages about +1, -1); token 3 is rare
    (``rare_prob``) and never sampled. Logits are ``E h + b``: with ``shared=True`` the
    trainable state ``h`` is 2-D and shared by all tokens (token 3's embedding is
    ``rare_scale * (1, -1)``, aligned with the direction that raises token 0 over token
    1); with ``shared=False`` every token has its own logit (``E = I``). Gradient steps
    of size ``lr`` on the clipped surrogate (``beta = 0``) run until a sampled token
    first reaches a clip platform. Returns per-epoch arrays ``ratios`` (epochs, 2),
    ``kl`` (exact KL(pi || pi_old) over all tokens), ``sampled_k3`` (the k3 estimate on
    the sampled tokens, what a trainer logs), ``probs`` (epochs, 4), and ``first_clip``
    (the epoch index, or None).
    """
    head = np.array([0.4, 0.4, 0.2]) * (
        1 - v.scalar(rare_prob, "rare_prob", open_unit=True)
    )
    p_old = np.append(head, rare_prob)
    shared = v.boolean(shared, "shared")
    rare_scale = v.scalar(rare_scale, "rare_scale")
    if shared:
        emb = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [rare_scale, -rare_scale]])
    else:
        emb = np.eye(4)
    lr = v.scalar(lr, "lr", positive=True)
    max_epochs = v.integer(max_epochs, "max_epochs", minimum=1)
    bias = np.log(p_old)
    state = np.zeros(emb.shape[1])
    acts = np.array([0, 0, 1, 1])
    adv = group_advantages([[1.0, 1.0, 0.0, 0.0]])[0]
    old_lp = np.log(p_old)[acts, None]
    ones = np.ones((4, 1))
    ratios, kls, k3s, probs = [], [], [], []
    first_clip = None
    for epoch in range(max_epochs):
        p = softmax(emb @ state + bias)
        lp = np.log(p)
        out = grpo_loss(
            lp[acts, None], old_lp, None, adv, ones, epsilon=epsilon, beta=0.0
        )
        state = state - lr * (out.grad[:, 0] @ (emb[acts] - p @ emb))
        p = softmax(emb @ state + bias)
        rho = p[[0, 1]] / p_old[[0, 1]]
        ratios.append(rho)
        kls.append(exact_kl(p, p_old))
        k3s.append(float(np.mean(k3(np.log(p_old[acts]) - np.log(p[acts])))))
        probs.append(p)
        if (clip_region(rho, adv[[0, 2]], epsilon=epsilon) == "platform").any():
            first_clip = epoch
            break
    return dict(
        ratios=np.array(ratios),
        kl=np.array(kls),
        sampled_k3=np.array(k3s),
        probs=np.array(probs),
        p_old=p_old,
        first_clip=first_clip,
    )


def trl_step_log(
    steps=25,
    group_size=16,
    beta=0.04,
    num_iterations=1,
    lr=0.1,
    seed=0,
    loss_type="grpo",
    reward_table=DEFAULT_REWARDS,
):
    """What a GRPO trainer logs on the four-action bandit: per optimisation step
    ``loss``, ``kl``, ``clip_ratio`` and the gradient norm, with ``num_iterations``
    updates per rollout (TRL's name) and a reference = initial policy.

    Returns a list of dicts ``{step, iteration, loss, kl, clip_ratio, grad_norm}``, one
    per optimisation step.
    """
    steps = v.integer(steps, "steps", minimum=1)
    g = v.integer(group_size, "group_size", minimum=2)
    iters = v.integer(num_iterations, "num_iterations", minimum=1)
    lr = v.scalar(lr, "lr", positive=True)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    r = v.as_float_array(reward_table, "reward_table", ndim=1)
    z = np.zeros(r.size)
    ref_logp = log_softmax(z)
    ones = np.ones((g, 1))
    log = []
    for step in range(steps):
        old_lp = log_softmax(z)
        acts = rng.choice(r.size, size=g, p=np.exp(old_lp))
        adv = group_advantages(r[acts][None, :])[0]
        for it in range(iters):
            lp = log_softmax(z)
            out = grpo_loss(
                lp[acts, None],
                old_lp[acts, None],
                ref_logp[acts, None],
                adv,
                ones,
                beta=beta,
                loss_type=loss_type,
            )
            grad = out.grad[:, 0] @ (np.eye(r.size)[acts] - np.exp(lp))
            log.append(
                dict(
                    step=step,
                    iteration=it,
                    loss=out.loss,
                    kl=out.metrics.get("kl", 0.0),
                    clip_ratio=out.metrics["clip_ratio/region_mean"],
                    grad_norm=float(np.linalg.norm(grad)),
                )
            )
            z = z - lr * grad
    return log


def num_iterations_drift(
    num_iterations=(1, 4),
    seeds=tuple(range(20)),
    steps=25,
    group_size=8,
    beta=0.04,
    lr=0.3,
    last=5,
) -> dict:
    """:func:`trl_step_log` for each ``num_iterations`` over several seeds, at the
    same learning rate: per seed the logged ``kl`` averaged over the last ``last``
    rollouts and the mean ``clip_ratio``; the paired differences of the KL (largest
    minus smallest ``num_iterations``) with their :func:`sign_test`."""
    mus = [v.integer(m, "num_iterations", minimum=1) for m in num_iterations]
    if len(mus) < 2:
        raise ValueError("num_iterations must hold at least two values")
    seeds = [v.integer(s, "seed", minimum=0) for s in seeds]
    last = v.integer(last, "last", minimum=1)
    if last > steps:
        raise ValueError(f"last must be at most steps ({steps}), got {last}")
    kl, clip = {}, {}
    for mu in mus:
        kl[mu], clip[mu] = [], []
        for seed in seeds:
            log = trl_step_log(
                steps=steps,
                group_size=group_size,
                beta=beta,
                num_iterations=mu,
                lr=lr,
                seed=seed,
            )
            kl[mu].append(np.mean([r["kl"] for r in log if r["step"] >= steps - last]))
            clip[mu].append(np.mean([r["clip_ratio"] for r in log]))
        kl[mu], clip[mu] = np.array(kl[mu]), np.array(clip[mu])
    diff = kl[max(mus)] - kl[min(mus)]
    return {"kl": kl, "clip_ratio": clip, "kl_difference": diff, **sign_test(diff)}
