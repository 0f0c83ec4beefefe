"""What DPO's beta does under SGD and under Adam (section 3.2).

The gradient of ``-log sigmoid(beta u)`` with respect to the margin u is
``-beta sigmoid(-beta u)``. Under plain SGD the step is proportional to it, so near
u = 0 a larger beta pushes harder. Adam divides each coordinate's first moment by the
root of its second moment: multiplying the whole loss by a constant leaves its steps
unchanged (up to Adam's epsilon), so the overall factor beta is largely normalised
away. What beta still changes is the *relative* weight
``sigmoid(-beta u_j) / sum_k sigmoid(-beta u_k)`` of the pairs in a batch, and where
pairs share parameters (as in a language model, and as in the log-linear toy of
``displacement``) that weight decides which pairs win a shared parameter: which pairs
still count.

The model: n pairs whose margins are ``u = margins + D theta``, ``theta = 0`` at the
start, every pair depending on the same few parameters (the rows of ``D``,
:data:`DIRECTIONS`). No pair has a parameter of its own, so Adam cannot normalise a
pair on a coordinate of its own.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validation as v
from ..reference.dpo import sigmoid

__all__ = [
    "MARGINS",
    "DIRECTIONS",
    "pair_weights",
    "margins_along",
    "optimise",
    "BetaComparison",
    "beta_under_optimisers",
]

#: Margins of four pairs at the start, from barely separated (the pair of the article's
#: section 3.7) to well separated.
MARGINS = (0.2, 2.0, 5.0, 20.0)

#: How each pair's margin depends on the two shared parameters (rows: pairs). The
#: first parameter separates pairs 1-3, which the second slightly blurs (-0.05 each);
#: the second parameter alone separates pair 4.
DIRECTIONS = np.array([[1.0, -0.05], [0.8, -0.05], [0.6, -0.05], [0.0, 1.0]])


def pair_weights(margins, beta):
    """Relative weight of each pair in the batch gradient,
    ``sigmoid(-beta u_j) / sum_k sigmoid(-beta u_k)``."""
    u = v.as_float_array(margins, "margins", ndim=1)
    beta = v.scalar(beta, "beta", positive=True)
    w = sigmoid(-beta * u)
    return w / w.sum()


def _directions(margins, directions):
    u = v.as_float_array(margins, "margins", ndim=1)
    d = (
        DIRECTIONS
        if directions is None
        else v.as_float_array(directions, "directions", ndim=2)
    )
    if d.shape[0] != u.size:
        raise ValueError(
            f"directions must have one row per pair ({u.size}), got shape {d.shape}"
        )
    return u, d


def margins_along(path, margins=MARGINS, directions=None):
    """The pairs' margins ``margins + D theta`` at each row of a parameter path."""
    u, d = _directions(margins, directions)
    return u + np.asarray(path, dtype=float) @ d.T


def optimise(
    margins,
    beta,
    *,
    directions=None,
    optimizer="adam",
    lr=0.01,
    steps=50,
    loss_scale=1.0,
    adam_betas=(0.9, 0.999),
    adam_eps=1e-8,
):
    """Run ``steps`` steps of SGD or Adam on
    ``loss_scale * mean_j -log sigmoid(beta u_j)`` with ``u = margins + D theta``
    (``D`` = :data:`DIRECTIONS` unless given); returns the parameter trajectory,
    shape ``(steps + 1, D.shape[1])``, starting at ``theta = 0``."""
    u0, d = _directions(margins, directions)
    beta = v.scalar(beta, "beta", positive=True)
    v.choice(optimizer, "optimizer", ("sgd", "adam"))
    lr = v.scalar(lr, "lr", positive=True)
    steps = v.integer(steps, "steps", minimum=1)
    loss_scale = v.scalar(loss_scale, "loss_scale", positive=True)
    b1, b2 = (v.scalar(b, "adam_betas", nonnegative=True) for b in adam_betas)
    adam_eps = v.scalar(adam_eps, "adam_eps", nonnegative=True)
    theta = np.zeros(d.shape[1])
    m = np.zeros_like(theta)
    s = np.zeros_like(theta)
    path = [theta.copy()]
    for k in range(1, steps + 1):
        u = u0 + d @ theta
        g = loss_scale * (d.T @ (-beta * sigmoid(-beta * u))) / u.size
        if optimizer == "sgd":
            theta = theta - lr * g
        else:
            m = b1 * m + (1 - b1) * g
            s = b2 * s + (1 - b2) * g * g
            theta = theta - lr * (m / (1 - b1**k)) / (
                np.sqrt(s / (1 - b2**k)) + adam_eps
            )
        path.append(theta.copy())
    return np.array(path)


class BetaComparison(NamedTuple):
    betas: tuple
    #: beta -> largest parameter change of the first SGD step
    sgd_first_step: dict
    #: beta -> the same for Adam
    adam_first_step: dict
    #: beta -> margin gain of every pair after ``steps`` SGD steps, shape (n,)
    sgd_gain: dict
    #: beta -> the same under Adam
    adam_gain: dict
    #: beta -> relative pair weights at the start
    weights: dict
    #: beta -> each pair's pull on the second (shared) parameter at the start,
    #: sigmoid(-beta u_j) D_j2: the parameter rises if these sum to more than zero
    shared_pull: dict
    #: max |theta(loss) - theta(10 * loss)| over the Adam run (beta = betas[0])
    adam_scale_error: float


def beta_under_optimisers(
    margins=MARGINS, betas=(0.1, 1.0), *, directions=None, lr=0.01, steps=50
) -> BetaComparison:
    """SGD vs Adam for each beta on the shared-parameter margins (the same learning
    rate for both optimisers)."""
    u0, d = _directions(margins, directions)
    betas = tuple(v.scalar(b, "betas", positive=True) for b in betas)
    out = {key: {} for key in ("sgd1", "adam1", "sgd", "adam", "w", "pull")}
    for b in betas:
        for opt in ("sgd", "adam"):
            path = optimise(u0, b, directions=d, optimizer=opt, lr=lr, steps=steps)
            out[opt + "1"][b] = float(np.abs(path[1]).max())
            out[opt][b] = margins_along(path[-1], u0, d) - u0
        out["w"][b] = pair_weights(u0, b)
        out["pull"][b] = sigmoid(-b * u0) * d[:, 1] if d.shape[1] > 1 else None
    base = optimise(u0, betas[0], directions=d, lr=lr, steps=steps)
    scaled = optimise(u0, betas[0], directions=d, lr=lr, steps=steps, loss_scale=10.0)
    return BetaComparison(
        betas,
        out["sgd1"],
        out["adam1"],
        out["sgd"],
        out["adam"],
        out["w"],
        out["pull"],
        float(np.abs(base - scaled).max()),
    )
