"""Chapter 10, section 10.4: the calibrated small step, and what of a variant's
gradient survives Adam.

- :func:`calibrated_drift`: the drift of :func:`~dpo_grpo.chapters.variants.toy_batch`
  at which GSPO's expected clip fraction is the paper's 100 times GRPO's
  (:func:`expected_clip_fractions`, closed form over the batch's noise).

Under Adam (and AdamW) multiplying the loss by a constant leaves the steps unchanged up
to ``eps``, so a gradient *norm* says little about the step. What remains is the
direction:

- :func:`gradient_directions`: each variant's cosine to GRPO's gradient (w.r.t. the
  token log-probs), and how it shares its weight among answers and tokens, with the
  total-variation distance of those shares to GRPO's.
- :func:`adam_scale_demo`: a tiny seeded softmax policy trained for a few steps on the
  toy batch with GRPO's loss, with that loss times a constant, and with Dr. GRPO's loss;
  the distance of the final weights to GRPO's, under Adam and under plain SGD.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _validation as v
from ..trl_exact.advantages import reward_advantages
from .variant_rows import GRPO_VARIANTS
from .variants import toy_batch, variant_loss

__all__ = [
    "GSPO_CLIP_RATIO",
    "adam_scale_demo",
    "calibrated_drift",
    "expected_clip_fractions",
    "gradient_directions",
]


#: The GSPO paper's ratio of clipped-token fractions, GSPO against GRPO: "a difference
#: of two orders of magnitude in the fractions of clipped tokens" (zheng2025gspo,
#: section 5)
GSPO_CLIP_RATIO = 100.0

#: The noise of :func:`toy_batch`'s drift, per token and per unit of drift
_NOISE = 0.12


def _upper_tail(z):
    """P(N(0, 1) > z), elementwise."""
    return 0.5 * np.vectorize(math.erfc)(np.asarray(z, dtype=float) / math.sqrt(2.0))


def expected_clip_fractions(
    drift: float, push: float = 0.0, token_eps=(0.2, 0.2), seq_eps=(3e-4, 4e-4)
) -> dict:
    """Expected clip fractions on :func:`toy_batch` ``(drift, push=push)``, in closed
    form over its seeded noise (token log-ratio
    ``~ N(drift push sign(A), (0.12 drift)^2)``).

    ``"token"``: TRL's ``clip_ratio/region_mean`` of a token-level clip
    ``(1 - eps_low, 1 + eps_high)`` (GRPO): a token counts when ``A > 0`` and its ratio
    exceeds ``1 + eps_high``, or ``A < 0`` and it is below ``1 - eps_low``.
    ``"sequence"``: the same for GSPO's ratio, the geometric mean over an answer of
    ``L`` tokens (log-ratio ``~ N(drift push sign(A), (0.12 drift)^2 / L)``), each
    answer counted once, as TRL does for a sequence-level ratio."""
    drift = v.scalar(drift, "drift", nonnegative=True)
    push = v.scalar(push, "push", nonnegative=True)
    b = toy_batch(0.0)
    sign = np.sign(reward_advantages(b["rewards"].reshape(-1, 1), 4).advantages)
    lengths = b["lengths"].astype(float)
    if drift == 0:
        return {"token": 0.0, "sequence": 0.0}

    def clipped(sd, eps):
        mean = drift * push * sign
        high = _upper_tail((math.log1p(eps[1]) - mean) / sd)
        low = _upper_tail((mean - math.log1p(-eps[0])) / sd)
        return np.where(sign > 0, high, np.where(sign < 0, low, 0.0))

    per_token = clipped(_NOISE * drift, token_eps)
    per_answer = clipped(_NOISE * drift / np.sqrt(lengths), seq_eps)
    return {
        "token": float((per_token * lengths).sum() / lengths.sum()),
        "sequence": float(per_answer.mean()),
    }


def calibrated_drift(ratio: float = GSPO_CLIP_RATIO, push: float = 0.0) -> float:
    """The drift of :func:`toy_batch` (with ``push``) at which GSPO's expected clip
    fraction is ``ratio`` times GRPO's (:func:`expected_clip_fractions`; default: the
    GSPO paper's two orders of magnitude). The ratio falls as the drift grows (GRPO's
    token clip rises from zero, GSPO's saturates); found by bisection in log drift."""
    ratio = v.scalar(ratio, "ratio", positive=True)

    def excess(log_d):
        f = expected_clip_fractions(math.exp(log_d), push)
        if f["token"] == 0:
            return math.inf
        return math.log(f["sequence"] / f["token"]) - math.log(ratio)

    lo, hi = math.log(1e-3), math.log(10.0)
    if not excess(lo) > 0 > excess(hi):
        raise ValueError(
            f"no drift in [1e-3, 10] gives a clip-fraction ratio of {ratio}"
        )
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    return math.exp(0.5 * (lo + hi))


def _shares(x):
    total = np.abs(x).sum()
    return np.abs(x) / total if total > 0 else np.full(x.shape, np.nan)


def gradient_directions(rows, reference: str = "GRPO") -> dict:
    """For each row of :func:`~dpo_grpo.chapters.variants.run_grpo_variants`: ``cosine``
    of its gradient (B, T) to the ``reference`` row's, ``answer_share`` (B,): each
    answer's share of the summed absolute push ``|sum_t d loss / d new|``,
    ``token_share`` (B, T): each token's share of the summed absolute gradient, and
    ``answer_tv``, ``token_tv``: the total-variation distance of those shares to the
    reference's (0: the same weighting, 1: disjoint). A zero gradient has no direction:
    its entries are ``nan``."""
    by_name = {r["name"]: r for r in rows}
    if reference not in by_name:
        raise ValueError(f"reference {reference!r} is not among the rows")
    ref = by_name[reference]
    ref_g = np.asarray(ref["grad"], dtype=float)
    ref_a, ref_t = _shares(ref_g.sum(axis=1)), _shares(ref_g)
    out = {}
    for name, r in by_name.items():
        g = np.asarray(r["grad"], dtype=float)
        norms = np.linalg.norm(g) * np.linalg.norm(ref_g)
        cos = float((g * ref_g).sum() / norms) if norms > 0 else float("nan")
        a, t = _shares(g.sum(axis=1)), _shares(g)
        out[name] = {
            "cosine": cos,
            "answer_share": a,
            "token_share": t,
            "answer_tv": float(0.5 * np.abs(a - ref_a).sum()),
            "token_tv": float(0.5 * np.abs(t - ref_t).sum()),
        }
    return out


def _logps(w, x, actions):
    logits = x @ w
    logits = logits - logits.max(axis=-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    return np.take_along_axis(logp, actions[..., None], axis=-1)[..., 0], np.exp(logp)


def _train(loss_of, w0, x, actions, *, optimizer, lr, steps, eps):
    w, m, s = w0.copy(), np.zeros_like(w0), np.zeros_like(w0)
    onehot = np.eye(w0.shape[1])[actions]
    for k in range(1, steps + 1):
        new, probs = _logps(w, x, actions)
        g_new = loss_of(new)  # d loss / d token log-probs, (B, T)
        grad = np.einsum("btd,btv->dv", x, g_new[..., None] * (onehot - probs))
        if optimizer == "sgd":
            w = w - lr * grad
            continue
        m = 0.9 * m + 0.1 * grad
        s = 0.999 * s + 0.001 * grad**2
        w = w - lr * (m / (1 - 0.9**k)) / (np.sqrt(s / (1 - 0.999**k)) + eps)
    return w


def adam_scale_demo(
    scale: float,
    seed: int = 0,
    steps: int = 20,
    lr: float = 0.05,
    eps: float = 1e-8,
    features: int = 6,
    vocab: int = 5,
) -> dict:
    """A linear softmax policy ``pi(a | x) = softmax(x W)`` with seeded features ``x``
    (one per token of :func:`~dpo_grpo.chapters.variants.toy_batch`) and seeded sampled
    tokens, trained for ``steps`` updates on the toy batch's rewards, all from one
    rollout (``old`` = the starting policy). Runs ``"grpo"`` (GRPO's row), ``"scaled"``
    (the same loss times ``scale``) and ``"dr_grpo"`` (Dr. GRPO's row), each with Adam
    (``lr``, betas 0.9/0.999, ``eps``) and with SGD (step ``lr``).

    Returns, per optimiser, the distance of the final weights to GRPO's relative to how
    far GRPO's moved: ``{"adam": {"scaled": ..., "dr_grpo": ...}, "sgd": {...}}``."""
    scale = v.scalar(scale, "scale", positive=True)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    b = toy_batch(0.0)
    shape = b["mask"].shape
    x = rng.normal(0.0, 1.0, (*shape, features))
    w0 = rng.normal(0.0, 0.5, (features, vocab))
    actions = np.array(
        [
            [rng.choice(vocab, p=p) for p in row]
            for row in _logps(w0, x, np.zeros(shape, dtype=int))[1]
        ]
    )
    old, _ = _logps(w0, x, actions)
    rows = {var.name: var for var in GRPO_VARIANTS}

    def loss_of(name, factor):
        def grad(new):
            batch = {**b, "new": new, "old": old, "ref": old - 0.05}
            return factor * variant_loss(rows[name], batch)["grad"]

        return grad

    runs = {
        "grpo": ("GRPO", 1.0),
        "scaled": ("GRPO", scale),
        "dr_grpo": ("Dr. GRPO", 1.0),
    }
    out = {}
    for opt in ("adam", "sgd"):
        kw = dict(
            optimizer=opt, lr=lr, steps=v.integer(steps, "steps", minimum=1), eps=eps
        )
        w = {k: _train(loss_of(*nf), w0, x, actions, **kw) for k, nf in runs.items()}
        moved = np.linalg.norm(w["grpo"] - w0)
        out[opt] = {
            k: float(np.linalg.norm(w[k] - w["grpo"]) / moved)
            for k in ("scaled", "dr_grpo")
        }
    return out
