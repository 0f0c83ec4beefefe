"""Likelihood displacement in DPO, on the smallest model that shows it: a softmax whose answers share a 2-d
representation. Used by chapter 8 (section 8.8) and the DPO-dynamics explorable."""

from __future__ import annotations

import math

import numpy as np

from .. import _validation as v

__all__ = ["dpo_displacement"]


def dpo_displacement(beta: float = 0.1, similarity: float = 0.9, *, steps: int = 200, lr: float = 5.0,
                     other_alignment: float = 1.0, n_other: int = 6) -> dict:
    """DPO on one pair where chosen and rejected share most of their representation (likelihood displacement).

    The policy is a softmax over ``2 + n_other`` answers with logits ``E @ theta`` (``theta`` trainable, 2-d;
    ``theta = 0`` is the reference, uniform). The chosen and rejected embeddings are unit vectors with cosine
    ``similarity``; the other answers' embeddings point along ``chosen - rejected`` with length
    ``other_alignment``. DPO's gradient moves ``theta`` along ``chosen - rejected``, which raises the other answers as
    well; when the other answers align with that direction more than the chosen answer does (similar pairs), the
    chosen answer's own log-prob falls while the margin grows. ``other_alignment=0`` is the control: the chosen
    log-prob rises. Plain gradient descent with step ``lr`` on the sigmoid loss ``-log sigmoid(beta m)`` (TRL's
    ``loss_type="sigmoid"``; the tests compare it with :func:`dpo_grpo.trl_exact.dpo.dpo_loss`).

    Returns arrays over ``steps + 1`` points: ``chosen``, ``rejected`` (TRL's ``rewards/chosen``,
    ``rewards/rejected`` = ``beta * (log pi - log pi_ref)``), ``margins``, ``loss``, ``accuracy``,
    ``logp_chosen``, ``logp_rejected``, ``p_other`` (total probability of the other answers), ``grad_norm``
    (of ``theta``), and ``params``.
    """
    beta = v.scalar(beta, "beta", positive=True)
    s = v.scalar(similarity, "similarity")
    if not -1.0 < s < 1.0:
        raise ValueError(f"similarity must lie in (-1, 1), got {s}")
    steps = v.integer(steps, "steps", minimum=1)
    lr = v.scalar(lr, "lr", positive=True)
    c = v.scalar(other_alignment, "other_alignment", nonnegative=True)
    n_other = v.integer(n_other, "n_other", minimum=0)
    half = math.acos(s) / 2
    e_w = np.array([math.cos(half), math.sin(half)])
    e_l = np.array([math.cos(half), -math.sin(half)])
    emb = np.vstack([e_w, e_l] + [np.array([0.0, c])] * n_other)
    ref_w = ref_l = -math.log(emb.shape[0])
    theta = np.zeros(2)
    keys = ("chosen", "rejected", "margins", "loss", "accuracy", "logp_chosen", "logp_rejected", "p_other",
            "grad_norm")
    hist = {k: np.empty(steps + 1) for k in keys}
    for k in range(steps + 1):
        z = emb @ theta
        logp = z - (z.max() + np.log(np.exp(z - z.max()).sum()))
        chosen, rejected = beta * (logp[0] - ref_w), beta * (logp[1] - ref_l)
        logit = chosen - rejected
        loss = float(np.logaddexp(0.0, -logit))  # -log sigmoid(logit)
        d_logp_w = -beta / (1.0 + math.exp(logit)) if logit > -700 else -beta  # d loss / d log pi(chosen)
        p = np.exp(logp)
        mean_e = p @ emb
        grad = d_logp_w * (e_w - mean_e) - d_logp_w * (e_l - mean_e)  # d log pi_i / d theta = e_i - E_pi[e]
        for key, val in (("chosen", chosen), ("rejected", rejected), ("margins", logit), ("loss", loss),
                         ("accuracy", float(chosen > rejected)), ("logp_chosen", logp[0]),
                         ("logp_rejected", logp[1]), ("p_other", float(p[2:].sum())),
                         ("grad_norm", float(np.linalg.norm(grad)))):
            hist[key][k] = val
        theta = theta - lr * grad
    return {**hist, "params": {"beta": beta, "similarity": s, "steps": steps, "lr": lr, "other_alignment": c,
                               "n_other": n_other}}
