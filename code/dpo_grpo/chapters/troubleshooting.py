"""Computed answers for the page "Troubleshooting a run, by symptom": the symptoms a
TRL or verl run shows that the log line alone does not explain.

- :func:`lora_learning_rate`: Adam moves a weight by about ``lr`` per step, and a LoRA
  adapter starts at ``B = 0``, so TRL's default ``learning_rate=1e-6`` barely moves an
  adapter in a short run.
- :func:`rloo_logged_kl`: RLOO logs the mean of ``k1 = log pi - log pi_ref`` over the
  sampled tokens, which can be negative; ``k3`` cannot.
- :func:`engine_weight_spread`, :func:`temperature_mismatch`: vLLM's sequence-level
  importance weight spreads with completion length, and a sampler that reports
  log-probs before temperature scaling is a mismatch of its own.
- :func:`eval_groups_fit`: ``GRPOConfig``'s check of the evaluation batch against
  ``num_generations_eval``.
- :func:`adaptive_entropy_coef`, :func:`high_entropy_mask`: TRL 1.16.0's adaptive
  entropy bonus and ``top_entropy_quantile``.
- :func:`dpo_truncation`: ``DPOConfig.max_length`` keeps the start of prompt +
  completion; a pair whose answers differ only after the cut trains on nothing.
- :data:`VERL_METRICS`: verl's metric names beside TRL's.
"""

from __future__ import annotations

import numpy as np

from .. import _validation as v
from ..i18n import N_
from ..reference.kl import k3
from ..reference.softmax import log_softmax
from .adam_scaling import adam_step
from .rollout import engine_importance_weights

__all__ = [
    "lora_learning_rate",
    "rloo_logged_kl",
    "engine_weight_spread",
    "temperature_mismatch",
    "eval_groups_fit",
    "adaptive_entropy_coef",
    "high_entropy_mask",
    "dpo_truncation",
    "VERL_METRICS",
]


def lora_learning_rate(
    learning_rates=(1e-6, 1e-5, 1e-4),
    steps: int = 200,
    width: int = 64,
    rank: int = 8,
    alpha: float = 16.0,
    seed: int = 0,
) -> list:
    """How far Adam moves a ``width x width`` weight towards a target in ``steps``
    steps, trained fully and through a LoRA adapter ``W0 + (alpha / rank) B A``
    (``B = 0``, ``A ~ U(-1/sqrt(width), 1/sqrt(width))`` as PEFT initialises them).

    The loss is ``0.5 * ||W - W*||^2``; ``W* - W0`` is a rank-``rank`` change with
    entries of about 0.01 (seeded). Returns one dict per learning rate: ``lr``,
    ``full`` and ``lora`` (the fraction of the distance ``||W0 - W*||`` covered) and
    ``full_max_step`` (the largest change of one weight, at most about ``lr * steps``).
    """
    steps = v.integer(steps, "steps", minimum=1)
    width = v.integer(width, "width", minimum=2)
    rank = v.integer(rank, "rank", minimum=1, maximum=width)
    alpha = v.scalar(alpha, "alpha", positive=True)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    target = 0.01 * rng.normal(size=(width, rank)) @ rng.normal(size=(rank, width))
    target /= np.abs(target).mean() / 0.01
    a_init = rng.uniform(-1, 1, size=(rank, width)) / np.sqrt(width)
    scale = alpha / rank
    start = np.linalg.norm(target)
    rows = []
    for lr in v.sequence(learning_rates, "learning_rates"):
        lr = v.scalar(lr, "learning_rates", positive=True)
        delta, full_state = np.zeros((width, width)), None
        b, a, b_state, a_state = np.zeros((width, rank)), a_init.copy(), None, None
        for _ in range(steps):
            delta, full_state = adam_step(delta, delta - target, full_state, lr)
            residual = scale * b @ a - target  # dL/dW of the adapted weight
            grad_b, grad_a = scale * residual @ a.T, scale * b.T @ residual
            b, b_state = adam_step(b, grad_b, b_state, lr)
            a, a_state = adam_step(a, grad_a, a_state, lr)
        rows.append(
            {
                "lr": lr,
                "full": 1 - np.linalg.norm(delta - target) / start,
                "lora": 1 - np.linalg.norm(scale * b @ a - target) / start,
                "full_max_step": float(np.abs(delta).max()),
            }
        )
    return rows


def rloo_logged_kl(p, q, tokens_per_batch: int = 8, batches: int = 5000, seed=0):
    """What ``RLOOTrainer`` logs as ``kl``: the mean over sampled tokens of
    ``k1 = log p - log q`` (TRL 1.16.0: ``old_per_token_logps - ref_per_token_logps``),
    with tokens drawn from the policy ``p`` and ``q`` the reference (1-D probability
    vectors), ``batches`` batches of ``tokens_per_batch`` tokens (seeded).

    Returns ``kl`` (the exact KL(p || q)), ``k1`` and ``k3`` (the per-batch means,
    shape (batches,)) and ``negative_share`` (the share of batches with ``k1 < 0``).
    """
    p = v.probability_vector(p, "p")
    q = v.probability_vector(q, "q")
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same length, got {p.size}, {q.size}")
    n = v.integer(tokens_per_batch, "tokens_per_batch", minimum=1)
    batches = v.integer(batches, "batches", minimum=1)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    tokens = rng.choice(p.size, size=(batches, n), p=p)
    log_ratio = np.log(p)[tokens] - np.log(q)[tokens]
    k1 = log_ratio.mean(axis=1)
    return {
        "kl": float(np.sum(p * np.log(p / q))),
        "k1": k1,
        "k3": k3(-log_ratio).mean(axis=1),
        "negative_share": float((k1 < 0).mean()),
    }


def engine_weight_spread(
    lengths=(64, 256, 1024, 4096),
    per_token_sd: float = 0.02,
    clip_max: float = 3.0,
    completions: int = 2000,
    seed: int = 0,
) -> list:
    """vLLM's ``sequence_mask`` weight ``exp(sum_t (old_t - sampling_t))`` when the two
    engines' per-token log-probs differ by independent noise of standard deviation
    ``per_token_sd`` (an assumption: real differences depend on dtype and kernels; the
    sum's spread grows as ``sqrt(length)`` whatever their size).

    Returns one dict per completion length: ``length``, ``log_weight_sd``,
    ``masked`` (the share with weight above ``clip_max``, set to 0 and so dropped from
    the policy loss), ``min`` and ``max`` (what
    ``sampling/importance_sampling_ratio/min`` and ``/max`` would log).
    """
    sd = v.scalar(per_token_sd, "per_token_sd", nonnegative=True)
    completions = v.integer(completions, "completions", minimum=1)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    rows = []
    for length in v.sequence(lengths, "lengths"):
        length = v.integer(length, "lengths", minimum=1)
        old = rng.normal(0.0, sd, size=(completions, length))
        w = engine_importance_weights(
            old, np.zeros_like(old), np.ones_like(old), clip_max=clip_max
        )[:, 0]
        log_w = old.sum(axis=1)
        rows.append(
            {
                "length": length,
                "log_weight_sd": float(log_w.std()),
                "masked": float((w == 0).mean()),
                "min": float(w.min()),
                "max": float(w.max()),
            }
        )
    return rows


def temperature_mismatch(
    temperature: float,
    length: int = 256,
    completions: int = 500,
    vocab: int = 32,
    clip_max: float = 3.0,
    seed: int = 0,
) -> dict:
    """The importance weights when the sampler samples at ``temperature`` but reports
    the log-probs of the unscaled distribution (a vLLM server started without
    ``--logprobs-mode processed_logprobs``), while the trainer scores the same tokens
    at ``temperature``, as TRL does. Both hold the same weights: every difference
    comes from the temperature.

    The policy is a fixed table of logits (``vocab`` tokens per position, seeded).
    Returns ``mean_token_diff`` (mean of ``old - sampling`` over tokens), ``median``
    and ``masked`` (the median ``sequence_mask`` weight and the share set to 0).
    """
    t = v.scalar(temperature, "temperature", positive=True)
    length = v.integer(length, "length", minimum=1)
    completions = v.integer(completions, "completions", minimum=1)
    vocab = v.integer(vocab, "vocab", minimum=2)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    logits = 2.0 * rng.normal(size=(length, vocab))

    scaled, raw = log_softmax(logits / t), log_softmax(logits)
    u = rng.random(size=(completions, length, 1))
    tokens = (np.cumsum(np.exp(scaled), axis=-1) < u).sum(axis=-1)
    tokens = np.minimum(tokens, vocab - 1)
    rows = np.arange(length)[None, :]
    old, sampling = scaled[rows, tokens], raw[rows, tokens]
    w = engine_importance_weights(old, sampling, np.ones_like(old), clip_max=clip_max)[
        :, 0
    ]
    return {
        "temperature": t,
        "mean_token_diff": float((old - sampling).mean()),
        "median": float(np.median(w)),
        "masked": float((w == 0).mean()),
    }


def eval_groups_fit(
    per_device_eval_batch_size: int,
    num_generations: int,
    *,
    num_processes: int = 1,
    num_generations_eval: int | None = None,
) -> int:
    """``GRPOConfig``'s evaluation check (TRL 1.16.0, with evaluation on): the global
    evaluation batch ``per_device_eval_batch_size * num_processes`` must be divisible
    by ``num_generations_eval`` (``num_generations`` when ``None``). Returns the number
    of prompts per evaluation batch; raises ``ValueError`` as ``GRPOConfig`` does."""
    bs = v.integer(per_device_eval_batch_size, "per_device_eval_batch_size", minimum=1)
    g = v.integer(num_generations, "num_generations", minimum=2)
    nproc = v.integer(num_processes, "num_processes", minimum=1)
    if num_generations_eval is not None:
        g = v.integer(num_generations_eval, "num_generations_eval", minimum=1)
    if (bs * nproc) % g:
        raise ValueError(
            f"the global eval batch size ({bs} * {nproc}) must be divisible by the "
            f"number of generations used for evaluation ({g})"
        )
    return bs * nproc // g


def adaptive_entropy_coef(
    entropies,
    entropy_coef: float = 0.0,
    entropy_coef_delta: float = 0.005,
    entropy_target: float = 0.2,
    entropy_coef_min: float = 0.0,
    entropy_coef_max: float = 1.0,
) -> dict:
    """TRL 1.16.0's adaptive entropy control (``use_adaptive_entropy=True``) over a
    sequence of per-step mean entropies ``H_t`` (nats, shape (steps,)).

    Step ``t`` applies the coefficient left by step ``t - 1``, and only if
    ``H_{t-1} <= entropy_target`` (nothing at step 0); after the step the coefficient
    moves by ``+delta`` if ``H_t <= entropy_target``, ``-delta`` otherwise, within
    ``[entropy_coef_min, entropy_coef_max]``. Returns ``applied`` (the coefficient each
    step's loss used) and ``logged`` (``entropy_coef`` as logged after each step).
    """
    h = v.as_float_array(entropies, "entropies", ndim=1)
    coef = v.scalar(entropy_coef, "entropy_coef", nonnegative=True)
    delta = v.scalar(entropy_coef_delta, "entropy_coef_delta", nonnegative=True)
    target = v.scalar(entropy_target, "entropy_target")
    lo = v.scalar(entropy_coef_min, "entropy_coef_min", nonnegative=True)
    hi = v.scalar(entropy_coef_max, "entropy_coef_max", nonnegative=True)
    applied, logged, last = np.empty(h.size), np.empty(h.size), np.inf
    for t, entropy in enumerate(h):
        applied[t] = coef if last <= target else 0.0
        coef = min(coef + delta, hi) if entropy <= target else max(coef - delta, lo)
        logged[t], last = coef, entropy
    return {"applied": applied, "logged": logged}


def high_entropy_mask(entropies, mask, top_entropy_quantile: float) -> np.ndarray:
    """The tokens ``top_entropy_quantile`` keeps in the policy loss (TRL 1.16.0's
    ``get_high_entropy_mask`` on one process): those whose entropy is at least the
    ``1 - top_entropy_quantile`` quantile of the valid tokens' entropies (linear
    interpolation, as ``torch.quantile``). ``entropies`` and ``mask``: shape (B, T)."""
    h = v.as_float_array(entropies, "entropies", ndim=2)
    valid = v.binary_mask(mask, "mask", h.shape)
    rho = v.scalar(
        top_entropy_quantile, "top_entropy_quantile", nonnegative=True, maximum=1
    )
    if not valid.any():
        return np.zeros_like(valid)
    threshold = np.quantile(h[valid], 1 - rho)
    return (h * valid >= threshold) & valid


def dpo_truncation(
    prompt_length: int,
    chosen_length: int,
    rejected_length: int,
    first_difference: int,
    max_length: int | None,
) -> dict:
    """What ``DPOConfig.max_length`` (TRL 1.16.0, ``truncation_mode="keep_start"``)
    leaves of one pair: prompt + completion is cut to its first ``max_length`` tokens.

    The answers agree on their first ``first_difference`` tokens. Returns ``chosen``
    and ``rejected`` (completion tokens kept) and ``difference_kept``: False when the
    cut falls before the first differing token, so the kept answers are the same
    tokens, both log-ratios are equal, the DPO logit is 0 and the pair adds ``ln 2``
    to the loss and nothing to the gradient.
    """
    p = v.integer(prompt_length, "prompt_length", minimum=0)
    lengths = [
        v.integer(chosen_length, "chosen_length", minimum=1),
        v.integer(rejected_length, "rejected_length", minimum=1),
    ]
    d = v.integer(first_difference, "first_difference", minimum=0)
    if d > min(lengths):
        raise ValueError(
            f"first_difference must be at most the shorter answer's length "
            f"({min(lengths)}), got {d}"
        )
    if max_length is not None:
        max_length = v.integer(max_length, "max_length", minimum=1)
    room = None if max_length is None else max(max_length - p, 0)
    kept = [n if room is None else min(n, room) for n in lengths]
    # the kept answers share their first d tokens: identical iff equal length <= d
    same = kept[0] == kept[1] <= d
    return {"chosen": kept[0], "rejected": kept[1], "difference_kept": not same}


#: verl's metric names (at the commit of ``data/verl_fixtures``) beside TRL's:
#: (verl key, TRL 1.16.0 key or "", what it measures).
VERL_METRICS = (
    (
        "critic/score/mean",
        "reward",
        N_("the reward function's score per answer, before any in-reward KL penalty"),
    ),
    (
        "critic/rewards/mean",
        "",
        N_(
            "score minus the per-token KL penalty when algorithm.use_kl_in_reward is "
            "on; equal to the score otherwise"
        ),
    ),
    (
        "critic/advantages/mean",
        "",
        N_("mean advantage over valid tokens; about 0 for GRPO's centred groups"),
    ),
    (
        "response_length/clip_ratio",
        "completions/clipped_ratio",
        N_("share of answers that reached the response-length limit"),
    ),
    (
        "actor/pg_clipfrac",
        "clip_ratio/region_mean",
        N_("share of tokens where the clipped term is the active one"),
    ),
    (
        "actor/ppo_kl",
        "",
        N_(
            "mean over tokens of log pi_old - log pi_theta (k1 against the sampling "
            "policy): can be negative; 0 on the first update of a batch"
        ),
    ),
    (
        "actor/kl_loss",
        "kl",
        N_(
            "the KL term against the reference with actor.use_kl_loss "
            "(kl_loss_type low_var_kl: k3, clamped)"
        ),
    ),
    ("actor/entropy", "entropy", N_("mean per-token entropy of the policy")),
    ("actor/grad_norm", "grad_norm", N_("gradient norm before clipping")),
    (
        "critic/vf_explained_var",
        "",
        N_(
            "1 - Var(returns - values) / Var(returns): how much of the return the "
            "critic explains (PPO only; near 0 or negative early on)"
        ),
    ),
    (
        "critic/vf_clipfrac",
        "",
        N_("share of tokens where the value clip is active (PPO only)"),
    ),
)
