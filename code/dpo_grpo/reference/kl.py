"""KL divergence and its sampled estimators (section 3.5), for one categorical
next-token distribution.

Notation: current policy ``p`` (= pi_theta), reference ``q`` (= pi_ref), sampling
distribution ``mu`` (e.g. pi_old), all shape ``(V,)``; ``Delta = log q - log p`` at a
sampled token. Estimators of ``KL(p || q)`` from a token a ~ p: ``k1 = -Delta``,
``k2 = Delta**2 / 2``, ``k3 = exp(Delta) - Delta - 1`` (DeepSeekMath's, always >= 0).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validation as v
from .softmax import softmax


def exact_kl(p, q):
    """``KL(p || q) = sum_a p_a log(p_a / q_a)``; ``p, q`` shape (V,), strictly
    positive."""
    p = v.probability_vector(p, "p")
    q = v.probability_vector(q, "q")
    v.same_shape(p=p, q=q)
    return float(np.sum(p * np.log(p / q)))


def k1(delta):
    """``k1 = -Delta`` (section 3.5): unbiased, can be negative."""
    return -v.as_float_array(delta, "delta")


def k2(delta):
    """``k2 = Delta^2 / 2`` (section 3.5): non-negative, biased."""
    return 0.5 * v.as_float_array(delta, "delta") ** 2


def k3(delta):
    """DeepSeekMath's estimator (section 3.5): ``k3 = exp(Delta) - Delta - 1 >= 0``
    (since ``e^x >= 1 + x``), zero iff ``Delta = 0``."""
    d = v.as_float_array(delta, "delta")
    return np.expm1(d) - d


def k3_per_action(p, q):
    """k3 at every action: ``q/p - log(q/p) - 1``, shape (V,)."""
    p = v.probability_vector(p, "p")
    q = v.probability_vector(q, "q")
    v.same_shape(p=p, q=q)
    return k3(np.log(q) - np.log(p))


def k3_expectation(p, q, sampling=None, *, ratio_weighted=False):
    """``E_{a ~ mu}[w_a k3_a]`` with ``mu = sampling`` (default ``p``) and ``w = p/mu``
    if ``ratio_weighted`` else 1.

    Under ``mu = p`` it equals ``KL(p || q)``; under ``mu != p`` the bare estimator is
    biased and the ratio-weighted one is exact again.
    """
    p = v.probability_vector(p, "p")
    s = p if sampling is None else v.probability_vector(sampling, "sampling")
    v.same_shape(p=p, sampling=s)
    ratio_weighted = v.boolean(ratio_weighted, "ratio_weighted")
    k = k3_per_action(p, q)
    w = p / s if ratio_weighted else 1.0
    return float(np.sum(s * w * k))


def kl_grad_logits(logits, q):
    """True gradient of ``KL(softmax(z) || q)`` w.r.t. the logits z:
    ``p_a (log(p_a/q_a) - KL)``; shape (V,)."""
    z = v.as_float_array(logits, "logits", ndim=1)
    p = softmax(z)
    q = v.probability_vector(q, "q")
    v.same_shape(logits=z, q=q)
    log_ratio = np.log(p / q)
    return p * (log_ratio - np.sum(p * log_ratio))


def k3_surrogate_grad_logits(
    logits, q, sampling=None, *, ratio_weighted=False, detach_ratio=False
):
    """Gradient w.r.t. the logits of ``sum_a mu_a w_a k3_a(z)`` with the samples
    (weights ``mu``) held fixed.

    ``mu`` defaults to the current ``p`` (held fixed: what backprop through a sampled k3
    computes). With ``ratio_weighted`` the weight ``w = p/mu`` is differentiated too
    unless ``detach_ratio``. Shape (V,). The bare form at ``mu = p`` gives ``p - q``,
    not :func:`kl_grad_logits`; the undetached ratio-weighted form gives the true KL
    gradient.
    """
    z = v.as_float_array(logits, "logits", ndim=1)
    p = softmax(z)
    q = v.probability_vector(q, "q")
    s = p if sampling is None else v.probability_vector(sampling, "sampling")
    v.same_shape(logits=z, q=q, sampling=s)
    ratio_weighted = v.boolean(ratio_weighted, "ratio_weighted")
    detach_ratio = v.boolean(detach_ratio, "detach_ratio")
    k = q / p - np.log(q / p) - 1
    dk_dlogp = 1 - q / p  # d k3 / d log p_a
    jac = np.eye(z.size) - p[None, :]  # d log p_a / d z_b, rows a
    w = p / s if ratio_weighted else np.ones_like(p)
    coeff = s * w * dk_dlogp
    if ratio_weighted and not detach_ratio:
        coeff = coeff + s * w * k  # d w_a / d log p_a = w_a
    return coeff @ jac


def forward_kl_grad_logits(logits, q):
    """Gradient of the *other* direction, ``KL(q || softmax(z))``, w.r.t. the logits z:
    ``p - q``; shape (V,).

    This is what the bare k3 loss follows in expectation on-policy (see
    :func:`estimator_views`).
    """
    z = v.as_float_array(logits, "logits", ndim=1)
    p = softmax(z)
    q = v.probability_vector(q, "q")
    v.same_shape(logits=z, q=q)
    return p - q


class EstimatorView(NamedTuple):
    """One KL estimator seen three ways, for tokens drawn from the current ``p``
    (on-policy).

    ``mean`` = E_p[k], ``value_bias`` = E_p[k] - KL(p || q), ``variance`` = Var_p[k]
    (value view); ``grad`` = E_p[d k / d z] with the samples held fixed (what backprop
    through ``beta * k`` in the loss gives), ``grad_bias`` = ``grad`` minus the true
    gradient of KL(p || q) (gradient view).
    """

    name: str
    mean: float
    value_bias: float
    variance: float
    grad: np.ndarray
    grad_bias: np.ndarray


def estimator_views(p, q) -> dict:
    """Value bias, variance and gradient of k1, k2 and k3 for one token drawn from
    ``p``, computed exactly.

    Returns ``{"k1": EstimatorView, "k2": ..., "k3": ...}``. With
    ``Delta_a = log q_a - log p_a`` and logits ``z = log p``, the fixed-sample gradients
    are ``d k / d z = k'(Delta) * (-(e_a - p))``, averaged under ``p``:

    - k1 = -Delta: mean = KL (unbiased), expected gradient ``sum_a p_a (e_a - p) = 0``:
      as a loss it does nothing in expectation (it belongs in the reward, where the
      score-function estimator differentiates it);
    - k2 = Delta^2/2: biased value, but its expected gradient is exactly the gradient of
      KL(p || q);
    - k3 = e^Delta - Delta - 1: unbiased value with low variance, but its expected
      gradient is ``p - q``, the gradient of the other direction KL(q || p).
    """
    p = v.probability_vector(p, "p")
    q = v.probability_vector(q, "q")
    v.same_shape(p=p, q=q)
    delta = np.log(q) - np.log(p)
    kl = float(np.sum(p * -delta))
    jac = np.eye(p.size) - p[None, :]  # row a: d log p_a / d z
    true = kl_grad_logits(np.log(p), q)
    views = {}
    for name, k, dk in (
        ("k1", -delta, -np.ones_like(delta)),
        ("k2", 0.5 * delta**2, delta),
        ("k3", np.expm1(delta) - delta, np.expm1(delta)),
    ):
        # d k / d log p_a = -dk/dDelta, since Delta = log q - log p
        grad = (p * -dk) @ jac
        mean = float(p @ k)
        views[name] = EstimatorView(
            name, mean, mean - kl, float(p @ (k - mean) ** 2), grad, grad - true
        )
    return views


def policy_gap_family(gap, p=None, q=None):
    """The policy ``p(gap) = softmax(log q + gap * (log p - log q))``: ``gap = 0`` is
    the reference ``q``, ``gap = 1`` the given ``p`` (default: the article's
    ``[0.7, 0.2, 0.1]`` against ``q = [0.2, 0.3, 0.5]``)."""
    from .examples import KL_EXAMPLE

    gap = v.scalar(gap, "gap")
    p = v.probability_vector(KL_EXAMPLE["p"] if p is None else p, "p")
    q = v.probability_vector(KL_EXAMPLE["q"] if q is None else q, "q")
    v.same_shape(p=p, q=q)
    return softmax(np.log(q) + gap * (np.log(p) - np.log(q)))
