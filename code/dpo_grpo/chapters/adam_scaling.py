"""Adam and a rescaled gradient (chapter 6, section 6.6): a constant factor on the loss
cancels in Adam's update (up to its ``eps``); a factor that changes every step, such as
the share ``1 - f_t`` of groups that are not silent, does not."""

from __future__ import annotations

import numpy as np

from .. import _validation as v


def adam_step(param, grad, state, lr, betas=(0.9, 0.999), eps=1e-8):
    """One Adam step (bias-corrected, no weight decay) on an array or a float.
    ``state`` is ``None`` before the first step, then what the last call returned:
    ``(m, s, t)``. Returns ``(param - lr * m_hat / (sqrt(s_hat) + eps), state)``."""
    m, s, t = (0.0, 0.0, 0) if state is None else state
    m = betas[0] * m + (1 - betas[0]) * grad
    s = betas[1] * s + (1 - betas[1]) * grad * grad
    t += 1
    m_hat, s_hat = m / (1 - betas[0] ** t), s / (1 - betas[1] ** t)
    return param - lr * m_hat / (np.sqrt(s_hat) + eps), (m, s, t)


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
        x, state, out = 0.0, None, np.empty(steps)
        for t, g_t in enumerate(grads):
            new_x, state = adam_step(x, g_t, state, lr, betas, eps)
            out[t], x = new_x - x, new_x
        return out

    plain, const, diluted = adam(g), adam(constant_scale * g), adam((1 - f) * g)
    return {
        "f": f,
        "plain": plain,
        "constant": const,
        "diluted": diluted,
        "constant_gap": float(np.abs(const - plain).max()),
    }
