"""Exercises of chapter 10 (further reading)."""

import numpy as np

from ..trl_exact.grpo import grpo_loss
from .core import choice, code, numeric

choice(
    "10.1",
    "Which paper introduced GRPO, replacing PPO's learned value baseline with the "
    "statistics of a group of answers to the same prompt?",
    {
        "a": "Proximal Policy Optimization Algorithms (Schulman et al., 2017)",
        "b": "DeepSeekMath (Shao et al., 2024)",
        "c": (
            "Back to Basics: Revisiting REINFORCE Style Optimization (Ahmadian et "
            "al., 2024)"
        ),
        "d": (
            "Training Diffusion Models with Reinforcement Learning (Black et al., 2023)"
        ),
    },
    "b",
    explanations={
        "a": (
            "PPO introduced the clipped ratio objective that GRPO keeps; it still "
            "uses a critic."
        ),
        "c": (
            "That paper studies REINFORCE with a leave-one-out baseline (RLOO), a "
            "close relative, but not GRPO."
        ),
        "d": (
            "DDPO casts denoising as a multi-step decision process; it is about "
            "diffusion models."
        ),
    },
)

choice(
    "10.2",
    "Which paper argues that dividing by the group std and by each answer's length "
    "biases GRPO, and drops both?",
    {
        "a": "DAPO (Yu et al., 2025)",
        "b": "GSPO (Zheng et al., 2025)",
        "c": (
            "Understanding R1-Zero-Like Training: A Critical Perspective (Liu et al., "
            "2025), i.e. Dr. GRPO"
        ),
        "d": "Generalized Advantage Estimation (Schulman et al., 2015)",
    },
    "c",
    explanations={
        "a": (
            "DAPO decouples the clip range (clip-higher), filters zero-std groups and "
            "averages over all tokens, but keeps the std division."
        ),
        "b": "GSPO replaces token ratios by a sequence-level ratio.",
        "d": "GAE is about critic-based advantage estimation over time steps.",
    },
)


def _gspo_weight():
    out = grpo_loss(
        np.log([[2.0, 0.5, 1.5]]),
        np.zeros((1, 3)),
        None,
        [1.0],
        np.ones((1, 3)),
        beta=0.0,
        importance_sampling_level="sequence",
    )
    return float(out.ratio[0, 0])


numeric(
    "10.3",
    "GSPO-style sequence importance weight (TRL's "
    "importance_sampling_level='sequence') of an answer whose three token ratios are "
    "[2.0, 0.5, 1.5].",
    _gspo_weight,
    mistakes={
        "product": (
            3 * 0.5,
            "That is the product of the token ratios (the sequence probability "
            "ratio); the weight is their geometric mean, exp(mean log-ratio).",
        ),
        "arithmetic mean": (
            4.0 / 3.0,
            "That is the arithmetic mean of the ratios; average the log-ratios "
            "instead.",
        ),
    },
)


def _dr_grpo_advantages(rewards):
    r = np.asarray(rewards, dtype=float)
    return r - r.mean(axis=1, keepdims=True)


def _draw_groups(rng):
    """Rewards of shape (prompts, G >= 2) drawn at grading time."""
    return (rng.normal(0.0, 1.0, (int(rng.integers(1, 5)), int(rng.integers(2, 7)))),)


code(
    "10.4",
    "Implement dr_grpo_advantages(rewards) for rewards of shape (prompts, G): Dr. "
    "GRPO's advantage, which keeps the group mean as baseline and drops the division "
    "by the std.",
    _dr_grpo_advantages,
    cases=[
        (np.array([[0.2, 0.8, 1.4, 0.6], [8.0, 9.0, 11.0, 12.0]]),),
        (np.array([[1.0, 1.0, 0.0]]),),
        (np.array([[0.0, 1.0], [5.0, 5.0]]),),
    ],
    mistakes={
        "still standardised": (
            lambda r: (
                (np.asarray(r) - np.asarray(r).mean(1, keepdims=True))
                / (np.asarray(r).std(1, keepdims=True) + 1e-4)
            ),
            "You still divide by the std; Dr. GRPO removes that division.",
        ),
        "leave-one-out": (
            lambda r: (
                np.asarray(r)
                - (np.asarray(r).sum(1, keepdims=True) - np.asarray(r))
                / (np.asarray(r).shape[1] - 1)
            ),
            "That is the leave-one-out (RLOO) baseline; Dr. GRPO subtracts the full "
            "group mean.",
        ),
    },
    draw=_draw_groups,
)


def _rloo_weight():
    return float(np.prod([1.1, 0.9, 1.2]))


numeric(
    "10.5",
    "An answer has three tokens with ratios pi_theta / pi_old of 1.1, 0.9 and 1.2. "
    "What importance weight does TRL's RLOOTrainer give the answer (before clipping)?",
    _rloo_weight,
    mistakes={
        "geometric mean": (
            float(np.exp(np.mean(np.log([1.1, 0.9, 1.2])))),
            "That is GSPO's sequence weight (the geometric mean); RLOO uses exp of "
            "the *sum* of the token log-ratios, the product of the ratios.",
        ),
        "clipped": (
            1.2,
            "That is the clipped value; the question asks for the weight before "
            "clipping.",
        ),
    },
)
