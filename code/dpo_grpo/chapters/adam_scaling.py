"""Adam and a rescaled gradient (chapter 6, section 6.6): a constant factor on the loss
cancels in Adam's update (up to its ``eps``); a factor that changes every step, such as
the share ``1 - f_t`` of groups that are not silent, does not."""

from __future__ import annotations

import numpy as np

from .. import _validation as v


def adam_dilution(
    steps: int = 200,
    n_groups: int = 8,
    zero_std_rate: float = 0.4,
    constant_scale: float = 0.6,
    lr: float = 1e-3,
    betas=(0.9, 0.999),
    eps: float = 1e-8,
    seed: int = 0,
) -> dict:
    """Adam's updates for one gradient stream scaled three ways: by 1, by a constant
    ``constant_scale``, and by ``1 - f_t`` with ``f_t`` the silent fraction of
    ``n_groups`` groups, each silent with probability ``zero_std_rate`` at every step
    (seeded). The stream is a fixed direction plus noise. Returns the per-step update
    arrays, ``f`` and the largest |difference| of the constant-scale updates from the
    unscaled ones (Adam divides a constant factor out, up to ``eps``)."""
    steps = v.integer(steps, "steps", minimum=1)
    n_groups = v.integer(n_groups, "n_groups", minimum=1)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    g = 1.0 + 0.3 * rng.normal(size=steps)  # informative groups' gradient, one weight
    f = rng.binomial(n_groups, zero_std_rate, size=steps) / n_groups

    def adam(grads):
        m = s = 0.0
        out = np.empty(steps)
        for t, x in enumerate(grads, start=1):
            m = betas[0] * m + (1 - betas[0]) * x
            s = betas[1] * s + (1 - betas[1]) * x * x
            m_hat, s_hat = m / (1 - betas[0] ** t), s / (1 - betas[1] ** t)
            out[t - 1] = -lr * m_hat / (np.sqrt(s_hat) + eps)
        return out

    plain, const, diluted = adam(g), adam(constant_scale * g), adam((1 - f) * g)
    return {
        "f": f,
        "plain": plain,
        "constant": const,
        "diluted": diluted,
        "constant_gap": float(np.abs(const - plain).max()),
    }
