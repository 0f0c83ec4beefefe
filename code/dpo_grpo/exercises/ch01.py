"""Exercises of chapter 1 (why we need it): the training-state ledger, rollout tokens,
the PPO-RLHF stack."""

from ..reference.memory import GB, GiB, training_state_ledger
from .core import choice, code, numeric

_N_SMALL = 1_500_000_000  # 01.1: a 1.5B-parameter model
# 01.2: a GRPO step with G answers for each of Q questions, answers of mean length L
# tokens (cap 1024)
_Q, _G, _L, _CAP = 16, 64, 350, 1024

numeric(
    "01.1",
    "Logical training state, in GiB, of a 1.5B-parameter model trained with bf16 "
    "weights and gradients, fp32 master weights and AdamW (two fp32 moments).",
    lambda: training_state_ledger(_N_SMALL).gib,
    mistakes={
        "decimal GB": (
            lambda: training_state_ledger(_N_SMALL).gb,
            "That is the size in decimal GB (10^9 bytes); the exercise asks for GiB "
            "(2^30 bytes).",
        ),
        "no master weights": (
            lambda: training_state_ledger(_N_SMALL, master_weights=False).gib,
            "You left out one fp32 copy that mixed-precision AdamW keeps next to the "
            "bf16 weights.",
        ),
        "weights only": (
            lambda: _N_SMALL * 2 / GiB,
            "This counts only the bf16 weights; training also stores gradients and "
            "optimizer state.",
        ),
    },
    level=1,
)


numeric(
    "01.2",
    "A GRPO step samples G = 64 answers for each of 16 questions; answers are capped "
    "at 1024 tokens and average 350 tokens. How many completion tokens does the step "
    "generate?",
    lambda: _Q * _G * _L,
    rtol=1e-9,
    atol=0.5,
    mistakes={
        "used the cap": (
            lambda: _Q * _G * _CAP,
            "You used the maximum length; that is an upper bound, not what the step "
            "generates here.",
        ),
        "forgot G": (lambda: _Q * _L, "Each question is answered G times, not once."),
        "forgot the questions": (
            lambda: _G * _L,
            "This is one question's group; the step has several questions.",
        ),
    },
    level=1,
)


choice(
    "01.3",
    "In PPO-RLHF, which of the four models have their parameters updated during the "
    "RL stage?",
    {
        "a": "Only the actor.",
        "b": "The actor and the critic.",
        "c": "The actor, the critic and the reward model.",
        "d": "All four: actor, critic, reference and reward model.",
    },
    "b",
    explanations={
        "a": (
            "PPO also fits a value function during the RL stage; which model holds it?"
        ),
        "c": (
            "The reward model is fitted before the RL stage; during RL it only scores "
            "answers."
        ),
        "d": (
            "Frozen models still cost memory and forward passes, but no gradients "
            "flow into them."
        ),
    },
    level=1,
)


def _critic_savings_gb(n_params):
    return training_state_ledger(int(n_params)).total_bytes / GB


def _draw_n_params(rng):
    """A model size drawn at grading time: 10^7 to 10^11 parameters."""
    return (int(10 ** rng.uniform(7, 11)),)


code(
    "01.4",
    "Write critic_savings_gb(n_params): the logical training state, in decimal GB, "
    "that disappears when a full-size critic of n_params parameters (bf16 weights and "
    "grads, fp32 master, AdamW) is removed.",
    _critic_savings_gb,
    cases=[(7_000_000_000,), (1_500_000_000,), (125_000_000,), (70_000_000_000,)],
    mistakes={
        "GiB": (
            lambda n: training_state_ledger(int(n)).total_bytes / GiB,
            "Your function returns GiB (2^30 bytes); the exercise asks for decimal GB "
            "(10^9 bytes).",
        ),
        "no master": (
            lambda n: (
                training_state_ledger(int(n), master_weights=False).total_bytes / GB
            ),
            "Your per-parameter byte count misses the fp32 master copy of the weights.",
        ),
        "frozen copy": (
            lambda n: 2 * n / GB,
            "This is the cost of a frozen bf16 copy; a trained critic also has "
            "gradients and optimizer state.",
        ),
    },
    draw=_draw_n_params,
    level=2,
)


choice(
    "01.5",
    "A colleague says: 'GRPO drops the critic, so RL training becomes ten times "
    "cheaper.' Which reply is right?",
    {
        "a": "Yes: one model out of four is gone, and the critic is the largest model.",
        "b": (
            "No: dropping the critic removes one trainable model's state, but GRPO "
            "generates G answers per prompt and scores each one, so sampling and "
            "reward evaluation can become the main cost."
        ),
        "c": "No: GRPO also drops the reference model, so the saving is even larger.",
        "d": "Yes, as long as the reward is given by a rule instead of a model.",
    },
    "b",
    explanations={
        "a": (
            "Count what GRPO adds as well as what it removes: how many answers does "
            "it generate per prompt?"
        ),
        "c": "GRPO keeps a reference whenever its KL weight beta is non-zero.",
        "d": (
            "A rule reward removes the reward model's forward passes, not the cost of "
            "generating the group."
        ),
    },
    level=2,
)


def _zero2_bytes_per_param(n_gpus):
    """Per-GPU bytes per parameter under ZeRO-2: bf16 weights replicated; bf16
    gradients, fp32 master copy and two fp32 moments sharded over n_gpus."""
    return 2 + (2 + 4 + 8) / n_gpus


numeric(
    "01.6",
    "Derive the per-GPU bytes of logical training state per parameter of one "
    "trainable model under ZeRO-2 (gradients and optimizer state sharded, weights "
    "replicated) on n GPUs, with the recipe of section 1.3 (bf16 weights and "
    "gradients, fp32 master copy, two fp32 moments; ZeRO counts the master copy as "
    "optimizer state). Evaluate your formula at n = 8.",
    lambda: _zero2_bytes_per_param(8),
    rtol=1e-9,
    atol=1e-9,
    mistakes={
        "master replicated": (
            2 + 4 + (2 + 8) / 8,
            "You kept the fp32 master copy on every GPU; ZeRO counts it as optimizer "
            "state and shards it from stage 1 on.",
        ),
        "ZeRO-1": (
            2 + 2 + 12 / 8,
            "That is ZeRO-1: only the optimizer state is sharded. Stage 2 shards the "
            "gradients too.",
        ),
        "ZeRO-3": (
            16 / 8,
            "That is ZeRO-3 / FSDP full sharding; ZeRO-2 still keeps a full bf16 copy "
            "of the weights on every GPU.",
        ),
        "no sharding": (
            16,
            "That is the unsharded total; ZeRO-2 divides part of it by n.",
        ),
    },
    level=3,
)


def _critic_flop_share_rule_reward():
    """PPO-RLHF with a rule reward, per generated token, in units of N FLOPs: generate
    2, policy update 6, reference 2, critic values 2, critic update 6."""
    critic = 2 + 6
    return critic / (2 + 6 + 2 + critic)


numeric(
    "01.7",
    "Section 1.5 counts about 2N FLOPs per token for a forward pass and 6N for a "
    "forward and backward pass. Derive the fraction of PPO-RLHF's FLOPs per generated "
    "token that the critic accounts for when the reward is a rule (no reward model), "
    "all models the policy's size and one update per rollout.",
    _critic_flop_share_rule_reward,
    mistakes={
        "kept the reward model": (
            8 / 20,
            "That is the share with a reward model (section 1.5's 20N); a rule reward "
            "runs no forward pass.",
        ),
        "update only": (
            6 / 18,
            "The critic also runs a forward pass over every rollout token to give the "
            "values (2N), besides its update (6N).",
        ),
        "no reference": (
            8 / 16,
            "The frozen reference still runs a forward pass (2N) for the KL penalty.",
        ),
    },
    level=3,
)
