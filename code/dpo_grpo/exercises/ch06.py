"""Exercises of chapter 6 (costs and limits)."""

import numpy as np

from ..chapters.costs import memory_saving
from ..chapters.workload import Workload
from ..reference.zero_std import zero_std_probability
from .core import choice, code, numeric

numeric(
    "06.1",
    "Rewards are 0/1 with pass rate p = 0.9 and groups of G = 8. What is the "
    "probability that a group has zero reward standard deviation?",
    lambda: zero_std_probability(0.9, 8),
    mistakes={
        "complement": (
            lambda: 1 - zero_std_probability(0.9, 8),
            "That is the probability that the group does carry a signal; the question "
            "asks for the opposite event.",
        ),
        "only all wrong": (
            lambda: 0.1**8,
            "A group also has zero std when every answer is correct.",
        ),
        "G - 1": (
            lambda: zero_std_probability(0.9, 7),
            "Use all G = 8 answers of the group.",
        ),
    },
)


def _expected_zero_std_fraction(pass_rates, group_size):
    p = np.asarray(pass_rates, dtype=float)
    return float(np.mean(p**group_size + (1 - p) ** group_size))


def _draw_pass_rates(rng):
    """Pass rates in [0, 1] and a group size drawn at grading time."""
    return (rng.uniform(0.0, 1.0, int(rng.integers(1, 10))), int(rng.integers(2, 17)))


code(
    "06.2",
    "Implement expected_zero_std_fraction(pass_rates, group_size): the expected "
    "fraction of prompts in a batch (pass rates shape (P,), 0/1 rewards) whose group "
    "of G answers has zero reward std.",
    _expected_zero_std_fraction,
    cases=[
        (np.array([0.9, 0.5, 0.1]), 8),
        (np.array([0.0, 1.0, 0.5]), 2),
        (np.linspace(0.05, 0.95, 19), 16),
        (np.array([0.3]), 4),
    ],
    mistakes={
        "only all correct": (
            lambda p, g: float(np.mean(np.asarray(p) ** g)),
            "You counted all-correct groups only; all-wrong groups have zero std too.",
        ),
        "signal": (
            lambda p, g: 1 - _expected_zero_std_fraction(p, g),
            "This is the fraction of prompts that do carry a signal.",
        ),
        "mean pass rate": (
            lambda p, g: float(np.mean(p) ** g + (1 - np.mean(p)) ** g),
            "Average the per-prompt probabilities, not the pass rates: p**G is not "
            "linear in p.",
        ),
    },
    draw=_draw_pass_rates,
)

_ZERO16 = Workload(n_params=7_000_000_000, shard_states=True, n_gpus=16)

numeric(
    "06.3",
    "Full-parameter mixed-precision AdamW on a 7e9-parameter policy with a critic of "
    "the same size, every model's state sharded over 16 GPUs (ZeRO-3): how many GiB "
    "per GPU does removing the critic save?",
    lambda: memory_saving(_ZERO16)["gib"],
    mistakes={
        "GB": (
            lambda: memory_saving(_ZERO16)["gb"],
            "That is the saving in GB (10**9 bytes); the question asks for GiB (2**30 "
            "bytes).",
        ),
        "unsharded": (
            lambda: memory_saving(Workload(n_params=7_000_000_000))["gib"],
            "That is the saving on one unsharded GPU; ZeRO-3 spreads the critic's "
            "state over 16 GPUs.",
        ),
        "weights only": (
            lambda: 14e9 / 16 / 2**30,
            "The critic's gradients, fp32 master weights and two AdamW moments go "
            "too, not only its bf16 weights.",
        ),
    },
)

choice(
    "06.4",
    "A team has 150k curated chosen/rejected pairs about refusal style and answer "
    "format; sampling from their 70B model is expensive and there is no automatic "
    "checker for the task. What should they try first?",
    {
        "a": "GRPO with a large group, because exploring new answers always helps.",
        "b": (
            "DPO on the existing pairs: it batches like supervised training and "
            "failures trace back to pairs."
        ),
        "c": (
            "PPO with a critic, because a learned value function handles subjective "
            "rewards."
        ),
        "d": "Neither: without a verifier no preference method can be trained.",
    },
    "b",
    explanations={
        "a": (
            "GRPO needs a reliable, cheap reward for every sampled answer and pays "
            "for G samples per prompt."
        ),
        "c": (
            "The critic does not create a reliable reward; the problem is the reward "
            "and the sampling cost."
        ),
        "d": (
            "Offline pairs are exactly the data that one method in this chapter needs."
        ),
    },
)

choice(
    "06.5",
    "In the chapter's reward-hacking toy the judge likes long answers. You raise the "
    "KL weight beta from 0.04 to 1.0. What happens to the true accuracy?",
    {
        "a": (
            "It now rises: a strong KL term steers the policy towards correct answers."
        ),
        "b": (
            "It still falls, only less and more slowly: KL limits how far the policy "
            "moves, not which way."
        ),
        "c": (
            "It is unchanged, because a large beta freezes the policy exactly at the "
            "reference."
        ),
    },
    "b",
    explanations={
        "a": (
            "The KL term knows nothing about correctness; it pulls towards the "
            "reference, whatever the reward."
        ),
        "c": (
            "For any finite beta the optimum pi_ref exp(r/beta)/Z differs from the "
            "reference."
        ),
    },
)

numeric(
    "06.6",
    "A GRPO batch holds 64 prompt groups, 24 of them with all rewards equal. By what "
    "factor is the gradient one informative group receives scaled, compared with a "
    "batch holding only the 40 informative groups (TRL's loss normalisations, equal "
    "answer lengths)?",
    lambda: 1 - 24 / 64,
    mistakes={
        "silent share": (
            lambda: 24 / 64,
            "That is the fraction of silent groups; the informative gradient keeps the "
            "rest.",
        ),
        "inverse": (
            lambda: 64 / 40,
            "The silent groups enlarge the denominator, so the factor is below 1.",
        ),
        "one": (
            lambda: 1.0,
            "The silent groups still count in the loss denominator (answers or "
            "tokens).",
        ),
    },
)
