"""A reward-hacking toy: group-relative training against a reward that loves length
(chapter 6, sections 6.8, 6.12).

The policy is a categorical distribution over five answer *types* of one task, from
terse to rambling. Each type has a length in tokens and three true properties, the
probabilities that its final answer is correct, that its reasoning is valid and that it
follows the required format. The training reward is a judge's score that checks the
final answer but also likes length:

    r = 1[correct] + length_weight * min(length / length_scale, 1).

True quality is the correctness alone; length earns nothing. Training
(:func:`train_hacking`) is GRPO on this bandit: each step draws ``prompts`` groups of
``group_size`` answers from the current policy, standardises each group's rewards, and
takes one gradient step of :func:`~dpo_grpo.trl_exact.grpo.grpo_loss` on the logits (one
update per rollout, so the ratio is 1; ``beta`` weights the sampled k3 KL to the
reference, which is the starting policy).

The KL term limits how far the policy moves, not where it is heading: the KL-regularised
optimum ``pi*_beta = pi_ref exp(rbar / beta) / Z`` (:func:`kl_optimum_path`) goes from
``pi_ref`` (large ``beta``) to the reward's favourite (``beta -> 0``). For large
``beta`` its change in true quality is ``Cov_ref(quality, rbar) / beta`` to first order
(:func:`first_order_quality_change`). That sign holds only for large ``beta``: a small
``beta`` ends at the favourite, which may be more accurate than the reference even when
the covariance is negative. In the default toy the favourite is less accurate and the
accuracy falls at every ``beta``.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import NamedTuple

import numpy as np

from .. import _validation as v
from ..i18n import N_
from ..reference.softmax import log_softmax, softmax
from ..reference.advantages import group_advantages
from ..reference.dpo import optimal_policy
from ..trl_exact.grpo import grpo_loss


class AnswerTypes(NamedTuple):
    """The toy's answer types; every array has shape ``(K,)``."""

    names: tuple  #: English labels (shown with :func:`dpo_grpo.i18n.tr`)
    length: np.ndarray  #: tokens
    p_correct: np.ndarray  #: final answer correct (the true quality)
    p_valid: np.ndarray  #: reasoning valid
    p_format: np.ndarray  #: required format followed
    ref_probs: np.ndarray  #: the reference (SFT) policy, also the starting policy


#: the default task: a concise derivation is the most accurate; padding and rambling are
#: longer and worse
ANSWER_TYPES = AnswerTypes(
    names=(N_("terse"), N_("concise"), N_("detailed"), N_("padded"), N_("rambling")),
    length=np.array([40.0, 150.0, 400.0, 900.0, 1600.0]),
    p_correct=np.array([0.75, 0.78, 0.72, 0.55, 0.20]),
    p_valid=np.array([0.30, 0.75, 0.70, 0.45, 0.10]),
    p_format=np.array([0.98, 0.97, 0.95, 0.80, 0.40]),
    ref_probs=np.array([0.15, 0.45, 0.25, 0.10, 0.05]),
)
LENGTH_WEIGHT = 0.8
LENGTH_SCALE = 1000.0


def _types(types) -> AnswerTypes:
    t = ANSWER_TYPES if types is None else types
    if not isinstance(t, AnswerTypes):
        raise TypeError(f"types must be an AnswerTypes, got {type(t).__name__}")
    if (
        not isinstance(t.names, (tuple, list))
        or not t.names
        or not all(isinstance(n, str) for n in t.names)
    ):
        raise TypeError(
            f"types.names must be a non-empty tuple of strings, got {t.names!r}"
        )
    k = len(t.names)
    for name in ("length", "p_correct", "p_valid", "p_format"):
        arr = v.as_float_array(getattr(t, name), f"types.{name}", ndim=1)
        if arr.shape != (k,):
            raise ValueError(
                f"types.{name} must have one entry per answer type ({k}), got "
                f"{arr.shape}"
            )
        if name != "length" and ((arr < 0) | (arr > 1)).any():
            raise ValueError(f"types.{name} must lie in [0, 1]")
        if name == "length" and (arr <= 0).any():
            raise ValueError("types.length must be > 0")
    ref = v.probability_vector(t.ref_probs, "types.ref_probs")
    if ref.shape != (k,):
        raise ValueError(f"types.ref_probs must have {k} entries, got {ref.shape}")
    return t


def length_bonus(length, length_weight=LENGTH_WEIGHT, length_scale=LENGTH_SCALE):
    """The judge's length term ``length_weight * min(length / length_scale, 1)``
    (elementwise)."""
    L = v.as_float_array(length, "length")
    w = v.scalar(length_weight, "length_weight", nonnegative=True)
    s = v.scalar(length_scale, "length_scale", positive=True)
    return w * np.minimum(L / s, 1.0)


def expected_reward(
    types=None, length_weight=LENGTH_WEIGHT, length_scale=LENGTH_SCALE
) -> np.ndarray:
    """Expected training reward of each answer type, ``p_correct + length bonus``; shape
    ``(K,)``."""
    t = _types(types)
    return np.asarray(t.p_correct, float) + length_bonus(
        t.length, length_weight, length_scale
    )


def policy_metrics(
    probs, types=None, length_weight=LENGTH_WEIGHT, length_scale=LENGTH_SCALE
) -> dict:
    """Exact expectations under a policy ``probs`` (K,): training reward, accuracy (true
    quality), reasoning validity, format compliance, mean length, and KL(policy ||
    reference)."""
    t = _types(types)
    p = v.probability_vector(probs, "probs", strictly_positive=False)
    if p.shape != t.ref_probs.shape:
        raise ValueError(f"probs must have {t.ref_probs.size} entries, got {p.shape}")
    mask = p > 0
    return {
        "reward": float(p @ expected_reward(t, length_weight, length_scale)),
        "accuracy": float(p @ t.p_correct),
        "reasoning_valid": float(p @ t.p_valid),
        "format_ok": float(p @ t.p_format),
        "length": float(p @ t.length),
        "kl_to_ref": float(
            np.sum(p[mask] * np.log(p[mask] / np.asarray(t.ref_probs)[mask]))
        ),
    }


class HackingRun(NamedTuple):
    """Result of :func:`train_hacking`. Arrays have one row per step, row 0 = before
    training."""

    probs: np.ndarray  #: (steps + 1, K) policy after each step
    #: (steps,) mean training reward of each step's sampled batch
    batch_reward: np.ndarray
    reward: np.ndarray  #: (steps + 1,) expected training reward
    accuracy: np.ndarray  #: (steps + 1,) expected final-answer accuracy (true quality)
    length: np.ndarray  #: (steps + 1,) expected answer length
    kl: np.ndarray  #: (steps + 1,) exact KL(policy || reference)
    #: (steps,) fraction of groups whose rewards were all equal
    zero_std_fraction: np.ndarray


def train_hacking(
    beta=0.04,
    *,
    steps=200,
    prompts=16,
    group_size=8,
    lr=0.5,
    seed=0,
    types=None,
    length_weight=LENGTH_WEIGHT,
    length_scale=LENGTH_SCALE,
    timer=None,
) -> HackingRun:
    """Train the answer-type policy with group-relative advantages against the
    length-loving reward.

    Per step: draw ``(prompts, group_size)`` answer types from the current policy;
    reward each ``1[correct] + length bonus`` (correctness sampled from ``p_correct``);
    standardise per group (population std, eps 1e-4); one step of size ``lr`` on the
    logits of ``grpo_loss`` (``loss_type="grpo"``, ratio 1) with KL weight ``beta``
    towards the reference. Deterministic given ``seed``. ``timer`` (e.g. a
    :class:`dpo_grpo.chapters.phase_timer.PhaseTimer`) is called as
    ``with timer(phase):`` around the generation, scoring and training phases of every
    step.
    """
    t = _types(types)
    beta = v.scalar(beta, "beta", nonnegative=True)
    steps = v.integer(steps, "steps", minimum=1)
    prompts = v.integer(prompts, "prompts", minimum=1)
    g = v.integer(group_size, "group_size", minimum=2)
    lr = v.scalar(lr, "lr", positive=True)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    k = len(t.names)
    ref_logp = np.log(np.asarray(t.ref_probs, float))
    bonus = length_bonus(t.length, length_weight, length_scale)
    logits = ref_logp.copy()
    n = prompts * g
    ones = np.ones((n, 1))
    if timer is not None and not callable(timer):
        raise TypeError(
            "timer must be callable as a context manager factory, got "
            f"{type(timer).__name__}"
        )
    phase = timer if timer is not None else _no_timer
    probs, batch_reward, zero_std = [softmax(logits)], [], []
    for _ in range(steps):
        with phase("generation"):
            p = softmax(logits)
            actions = rng.choice(k, size=(prompts, g), p=p)
        with phase("scoring"):
            correct = rng.random((prompts, g)) < t.p_correct[actions]
            rewards = correct + bonus[actions]
        with phase("training"):
            batch_reward.append(float(rewards.mean()))
            zero_std.append(float(np.mean(np.ptp(rewards, axis=1) == 0)))
            adv = group_advantages(rewards).ravel()
            a = actions.ravel()
            logp = log_softmax(logits)
            out = grpo_loss(
                logp[a, None], logp[a, None], ref_logp[a, None], adv, ones, beta=beta
            )
            # chain rule through the softmax
            logits = logits - lr * (out.grad[:, 0] @ (np.eye(k)[a] - p))
            probs.append(softmax(logits))
    probs = np.array(probs)
    metrics = [policy_metrics(p, t, length_weight, length_scale) for p in probs]
    return HackingRun(
        probs,
        np.array(batch_reward),
        *(
            np.array([m[key] for m in metrics])
            for key in ("reward", "accuracy", "length", "kl_to_ref")
        ),
        np.array(zero_std),
    )


@contextmanager
def _no_timer(phase):
    yield


def kl_optimum_path(
    betas, types=None, length_weight=LENGTH_WEIGHT, length_scale=LENGTH_SCALE
) -> dict:
    """The exact KL-regularised optimum ``pi*_beta ∝ pi_ref exp(rbar / beta)`` for each
    beta, and its metrics.

    Returns ``{"betas": (B,), "probs": (B, K), "reward", "accuracy", "length",
    "kl_to_ref": (B,)}``.
    """
    t = _types(types)
    b = v.as_float_array(betas, "betas", ndim=1)
    if (b <= 0).any():
        raise ValueError("betas must be > 0")
    rbar = expected_reward(t, length_weight, length_scale)
    probs = np.array([optimal_policy(t.ref_probs, rbar, float(x))[0] for x in b])
    metrics = [policy_metrics(p, t, length_weight, length_scale) for p in probs]
    out = {"betas": b, "probs": probs}
    for key in ("reward", "accuracy", "length", "kl_to_ref"):
        out[key] = np.array([m[key] for m in metrics])
    return out


def first_order_quality_change(
    types=None, length_weight=LENGTH_WEIGHT, length_scale=LENGTH_SCALE
) -> float:
    """``Cov_ref(p_correct, rbar)``: for large beta, accuracy(pi*_beta) -
    accuracy(pi_ref) ≈ this / beta.

    Its sign is the direction in which a strongly KL-limited optimisation moves the true
    quality. For small beta the optimum approaches the reward's favourite instead, whose
    accuracy decides the sign there.
    """
    t = _types(types)
    q = np.asarray(t.ref_probs, float)
    rbar = expected_reward(t, length_weight, length_scale)
    acc = np.asarray(t.p_correct, float)
    return float(q @ (acc * rbar) - (q @ acc) * (q @ rbar))


def sample_answers(probs, n, seed=1, types=None) -> dict:
    """Draw ``n`` answers from ``probs`` (K,) with their true properties, seeded: arrays
    of shape ``(n,)`` under ``"type"`` (index), ``"length"``, ``"correct"``,
    ``"valid"``, ``"format_ok"`` (booleans). For spot checks."""
    t = _types(types)
    p = v.probability_vector(probs, "probs", strictly_positive=False)
    if p.shape != t.ref_probs.shape:
        raise ValueError(f"probs must have {t.ref_probs.size} entries, got {p.shape}")
    n = v.integer(n, "n", minimum=1)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    a = rng.choice(len(t.names), size=n, p=p)
    return {
        "type": a,
        "length": t.length[a],
        "correct": rng.random(n) < t.p_correct[a],
        "valid": rng.random(n) < t.p_valid[a],
        "format_ok": rng.random(n) < t.p_format[a],
    }


def evaluate(
    probs,
    n_prompts=1000,
    seed=1,
    types=None,
    length_weight=LENGTH_WEIGHT,
    length_scale=LENGTH_SCALE,
) -> dict:
    """Held-out evaluation, decoupled from the training reward: one answer per held-out
    prompt, scored by an independent verifier (correctness only), with reasoning
    validity, format compliance and length reported separately, and the training judge's
    reward alongside. Seeded; different seeds = different held-out draws."""
    n_prompts = v.integer(n_prompts, "n_prompts", minimum=1)
    s = sample_answers(probs, n_prompts, seed, types)
    return {
        "accuracy": float(s["correct"].mean()),
        "reasoning_valid": float(s["valid"].mean()),
        "format_ok": float(s["format_ok"].mean()),
        "length": float(s["length"].mean()),
        "training_reward": float(
            (
                s["correct"] + length_bonus(s["length"], length_weight, length_scale)
            ).mean()
        ),
    }
