"""What DPO's beta does under SGD and under Adam (section 3.2).

The gradient of ``-log sigmoid(beta u)`` with respect to the margin u is ``-beta sigmoid(-beta u)``. Under plain SGD
the step is proportional to it, so near u = 0 a larger beta pushes harder. Adam divides each coordinate's first
moment by the root of its second moment: multiplying the whole loss by a constant leaves its steps unchanged (up to
Adam's epsilon), so the overall factor beta is largely normalised away. What beta still changes is the *relative*
weight ``sigmoid(-beta u_j) / sum_k sigmoid(-beta u_k)`` of the pairs in a batch.

The model: n pairs whose margins are ``u = X theta`` with ``X = [I | 1]``, one parameter per pair plus one shared
by all pairs (the shared parameter is where the pairs compete), starting at the given margins.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validation as v
from ..reference.dpo import sigmoid

__all__ = [
    "MARGINS",
    "pair_weights",
    "margin_model",
    "optimise",
    "BetaComparison",
    "beta_under_optimisers",
]

#: Margins of four pairs, from barely separated (the pair of section 3.7) to well separated.
MARGINS = (0.2, 2.0, 5.0, 20.0)


def pair_weights(margins, beta):
    """Relative weight of each pair in the batch gradient: ``sigmoid(-beta u_j) / sum_k sigmoid(-beta u_k)``."""
    u = v.as_float_array(margins, "margins", ndim=1)
    beta = v.scalar(beta, "beta", positive=True)
    w = sigmoid(-beta * u)
    return w / w.sum()


def margin_model(margins):
    """``(X, theta0)`` with ``X = [I | 1]`` and ``theta0 = [margins, 0]``, so ``X @ theta0 = margins``."""
    u = v.as_float_array(margins, "margins", ndim=1)
    x = np.hstack([np.eye(u.size), np.ones((u.size, 1))])
    return x, np.append(u, 0.0)


def _grad(x, theta, beta, scale):
    u = x @ theta
    return scale * (x.T @ (-beta * sigmoid(-beta * u))) / u.size


def optimise(
    margins,
    beta,
    *,
    optimizer="adam",
    lr=0.01,
    steps=50,
    loss_scale=1.0,
    adam_betas=(0.9, 0.999),
    adam_eps=1e-8,
):
    """Run ``steps`` steps of SGD or Adam on ``loss_scale * mean_j -log sigmoid(beta u_j)``; returns the parameter
    trajectory, shape ``(steps + 1, n + 1)``."""
    x, theta = margin_model(margins)
    beta = v.scalar(beta, "beta", positive=True)
    v.choice(optimizer, "optimizer", ("sgd", "adam"))
    lr = v.scalar(lr, "lr", positive=True)
    steps = v.integer(steps, "steps", minimum=1)
    loss_scale = v.scalar(loss_scale, "loss_scale", positive=True)
    b1, b2 = (v.scalar(b, "adam_betas", nonnegative=True) for b in adam_betas)
    adam_eps = v.scalar(adam_eps, "adam_eps", nonnegative=True)
    m = np.zeros_like(theta)
    s = np.zeros_like(theta)
    path = [theta.copy()]
    for k in range(1, steps + 1):
        g = _grad(x, theta, beta, loss_scale)
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
    sgd_first_step: (
        dict  #: beta -> |change of the first pair's margin| after one SGD step
    )
    adam_first_step: dict  #: beta -> the same after one Adam step
    sgd_gain: (
        dict  #: beta -> margin gain of every pair after ``steps`` SGD steps, shape (n,)
    )
    adam_gain: dict  #: beta -> the same under Adam
    weights: dict  #: beta -> relative pair weights at the start
    adam_scale_error: float  #: max |theta(loss) - theta(10 * loss)| over the Adam run (beta = betas[0])


def beta_under_optimisers(
    margins=MARGINS, betas=(0.1, 1.0), *, lr=0.01, steps=50
) -> BetaComparison:
    """SGD vs Adam for each beta on :func:`margin_model` (same learning rate for both optimisers)."""
    u0 = v.as_float_array(margins, "margins", ndim=1)
    betas = tuple(v.scalar(b, "betas", positive=True) for b in betas)
    x, _ = margin_model(u0)
    out = {key: {} for key in ("sgd1", "adam1", "sgd", "adam", "w")}
    for b in betas:
        for opt in ("sgd", "adam"):
            path = optimise(u0, b, optimizer=opt, lr=lr, steps=steps)
            gains = path @ x.T - u0
            out[opt + "1"][b] = float(abs(gains[1, 0]))
            out[opt][b] = gains[-1]
        out["w"][b] = pair_weights(u0, b)
    base = optimise(u0, betas[0], lr=lr, steps=steps)
    scaled = optimise(u0, betas[0], lr=lr, steps=steps, loss_scale=10.0)
    return BetaComparison(
        betas,
        out["sgd1"],
        out["adam1"],
        out["sgd"],
        out["adam"],
        out["w"],
        float(np.abs(base - scaled).max()),
    )
