"""DPO's likelihood displacement and TRL's remedies, on a log-linear toy policy (section
3.2).

Three answers with feature vectors ``phi`` (rows: chosen y_w, rejected y_l, a third
answer y_o) and the policy ``pi(y) = softmax(phi theta)``; the reference is
``theta = 0`` (uniform). The margin is ``u = (phi_w - phi_l) . theta``: DPO moves theta
along ``phi_w - phi_l``, and an answer whose features point further in that direction
than the chosen one's gains the probability that *both* y_w and y_l lose (likelihood
displacement, Razin et al. 2024). Remedies TRL 1.16.0 offers, computed on the same toy:

- an SFT term on the chosen answer, ``loss_type=["sigmoid", "sft"]`` with
  ``loss_weights`` (RPO);
- IPO's bounded target ``(u - 1/(2 beta))^2`` (``loss_type="ipo"``), which stops at a
  finite margin;
- ``ld_alpha`` (LD-DPO): tokens beyond the shorter answer's length count with weight
  alpha in each sequence log-prob (:func:`ld_sequence_logps`).

The toy is sequence-level: TRL's ``ipo`` averages token log-probs per answer, which a
one-step answer cannot show.
"""

from __future__ import annotations

from typing import NamedTuple

import math

import numpy as np

from .. import _validation as v
from ..reference.softmax import log_softmax, softmax
from ..reference.dpo import sigmoid

__all__ = [
    "FEATURES",
    "Trajectory",
    "displacement_run",
    "dpo_displacement",
    "ld_sequence_logps",
    "ipo_loss",
]

#: Rows: chosen, rejected, a third answer. The chosen and rejected answers share the
#: first feature; the third answer is further along their difference direction (0, 0.5)
#: than the chosen one.
FEATURES = np.array([[1.0, 1.0], [1.0, 0.5], [0.0, 2.0]])


def ipo_loss(margin, beta):
    """IPO's loss ``(u - 1/(2 beta))^2`` (TRL 1.16.0's ``loss_type="ipo"`` on the
    log-ratio margin ``u``)."""
    u = v.as_float_array(margin, "margin")
    beta = v.scalar(beta, "beta", positive=True)
    return (u - 1.0 / (2.0 * beta)) ** 2


class Trajectory(NamedTuple):
    logp_chosen: np.ndarray  #: (steps + 1,)
    logp_rejected: np.ndarray
    margin: np.ndarray  #: u = log-ratio margin (the reference is uniform)
    #: total probability of the answers other than the pair (rows 2, 3, ... of the
    #: features)
    p_other: np.ndarray
    loss: np.ndarray  #: the weighted loss at each step
    grad_norm: np.ndarray  #: norm of d loss / d theta at each step


def displacement_run(
    loss_type=("sigmoid",),
    loss_weights=None,
    *,
    beta=0.1,
    lr=1.0,
    steps=200,
    features=None,
) -> Trajectory:
    """Gradient descent on a weighted sum of ``"sigmoid"`` (DPO), ``"ipo"`` and
    ``"sft"`` (-log pi(y_w)) losses, TRL's list form of ``loss_type`` (a single name is
    allowed). Returns the trajectory of the log-probs."""
    names = (
        [loss_type]
        if isinstance(loss_type, str)
        else v.sequence(loss_type, "loss_type")
    )
    for name in names:
        v.choice(name, "loss_type", ("sigmoid", "ipo", "sft"))
    weights = (
        [1.0] * len(names)
        if loss_weights is None
        else [
            v.scalar(w, "loss_weights", nonnegative=True)
            for w in v.sequence(loss_weights, "loss_weights")
        ]
    )
    if len(weights) != len(names):
        raise ValueError(
            f"loss_weights must have one weight per loss type ({len(names)}), got "
            f"{len(weights)}"
        )
    beta = v.scalar(beta, "beta", positive=True)
    lr = v.scalar(lr, "lr", positive=True)
    steps = v.integer(steps, "steps", minimum=1)
    phi = (
        FEATURES if features is None else v.as_float_array(features, "features", ndim=2)
    )
    if phi.shape[0] < 2:
        raise ValueError(
            "features must have a row for the chosen and one for the rejected answer "
            f"(then any others), got shape {phi.shape}"
        )
    diff = phi[0] - phi[1]
    theta = np.zeros(phi.shape[1])
    rows = []
    for k in range(steps + 1):
        logp = log_softmax(phi @ theta)
        u = float(diff @ theta)
        grad, loss = np.zeros_like(theta), 0.0
        for name, w in zip(names, weights):
            if name == "sigmoid":
                loss += w * float(np.logaddexp(0.0, -beta * u))  # -log sigmoid(beta u)
                grad += w * -beta * sigmoid(-beta * u) * diff
            elif name == "ipo":
                loss += w * float(ipo_loss(u, beta))
                grad += w * 2.0 * (u - 1.0 / (2.0 * beta)) * diff
            else:  # sft: -log pi(y_w), gradient -(phi_w - E_pi[phi])
                loss += w * -float(logp[0])
                grad += w * -(phi[0] - softmax(phi @ theta) @ phi)
        rows.append(
            (
                logp[0],
                logp[1],
                u,
                float(np.exp(logp[2:]).sum()),
                loss,
                float(np.linalg.norm(grad)),
            )
        )
        if k == steps:
            break
        theta = theta - lr * grad
    return Trajectory(*(np.array(c) for c in zip(*rows)))


def ld_sequence_logps(chosen_token_logps, rejected_token_logps, ld_alpha):
    """LD-DPO's sequence log-probs (TRL's ``ld_alpha``): tokens up to the shorter
    answer's length count fully, the rest with weight ``ld_alpha``. Returns
    ``(chosen, rejected, chosen_token_weights, rejected_token_weights)``: the weights
    are each token's factor in its sequence log-prob, hence in its DPO gradient."""
    c = v.as_float_array(chosen_token_logps, "chosen_token_logps", ndim=1)
    r = v.as_float_array(rejected_token_logps, "rejected_token_logps", ndim=1)
    alpha = v.scalar(ld_alpha, "ld_alpha", nonnegative=True)
    if alpha > 1:
        raise ValueError(f"ld_alpha must lie in [0, 1], got {alpha}")
    public = min(c.size, r.size)
    wc = np.where(np.arange(c.size) < public, 1.0, alpha)
    wr = np.where(np.arange(r.size) < public, 1.0, alpha)
    return float(wc @ c), float(wr @ r), wc, wr


def dpo_displacement(
    beta: float = 0.1,
    similarity: float = 0.9,
    *,
    steps: int = 200,
    lr: float = 5.0,
    other_alignment: float = 1.0,
    n_other: int = 6,
) -> dict:
    """:func:`displacement_run` (DPO's sigmoid loss) on a pair whose answers share most
    of their representation.

    Embeddings (2-d): chosen and rejected are unit vectors with cosine ``similarity``;
    ``n_other`` other answers point along ``chosen - rejected`` with length
    ``other_alignment`` (``0`` is the control: the chosen log-prob rises). The more
    similar the pair, the more the other answers align with the direction DPO pushes,
    and the chosen answer's own log-prob falls while the margin grows. Returns arrays
    over ``steps + 1`` points under TRL's names: ``chosen``, ``rejected``
    (``rewards/chosen``, ``rewards/rejected`` = ``beta * (log pi - log pi_ref)``),
    ``margins``, ``loss``, ``accuracy``, and ``logp_chosen``, ``logp_rejected``,
    ``p_other``, ``grad_norm``, ``params``.
    """
    beta = v.scalar(beta, "beta", positive=True)
    s = v.scalar(similarity, "similarity")
    if not -1.0 < s < 1.0:
        raise ValueError(f"similarity must lie in (-1, 1), got {s}")
    c = v.scalar(other_alignment, "other_alignment", nonnegative=True)
    n_other = v.integer(n_other, "n_other", minimum=0)
    half = math.acos(s) / 2
    emb = np.vstack(
        [[math.cos(half), math.sin(half)], [math.cos(half), -math.sin(half)]]
        + [[0.0, c]] * n_other
    )
    run = displacement_run("sigmoid", beta=beta, lr=lr, steps=steps, features=emb)
    log_ref = -math.log(emb.shape[0])  # theta = 0: the uniform reference
    chosen, rejected = (
        beta * (run.logp_chosen - log_ref),
        beta * (run.logp_rejected - log_ref),
    )
    return {
        "chosen": chosen,
        "rejected": rejected,
        "margins": chosen - rejected,
        "loss": run.loss,
        "accuracy": (chosen > rejected).astype(float),
        "logp_chosen": run.logp_chosen,
        "logp_rejected": run.logp_rejected,
        "p_other": run.p_other,
        "grad_norm": run.grad_norm,
        "params": {
            "beta": beta,
            "similarity": s,
            "steps": int(steps),
            "lr": float(lr),
            "other_alignment": c,
            "n_other": n_other,
        },
    }
