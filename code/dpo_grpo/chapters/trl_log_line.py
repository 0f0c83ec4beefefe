"""One GRPO step logged as TRL 1.16.0 logs it (the page "Reading a TRL run"): every
metric of the log line recomputed from its definition, with what it measures
(:data:`LOG_LINE_MEANINGS`) and a second computation to compare (:func:`log_line`)."""

from __future__ import annotations

import numpy as np

from .. import _validation as v
from ..i18n import N_
from ..trl_exact.advantages import reward_advantages
from ..trl_exact.grpo import grpo_loss


#: What each metric of a TRL 1.16.0 GRPO log line measures (the order of
#: :func:`log_line`).
LOG_LINE_MEANINGS = {
    "loss": N_(
        "clipped surrogate + beta * ratio * k3 (beta * k3 with "
        "use_bias_correction_kl=False), normalised by loss_type; per log: the mean, "
        "over the optimiser steps since the last log, of each step's loss (the sum of "
        "its micro-batch losses, which TRL scales for gradient accumulation)"
    ),
    "grad_norm": N_(
        "L2 norm of the gradient over all trainable parameters, before clipping to "
        "max_grad_norm"
    ),
    "num_tokens": N_("prompt + completion tokens seen so far (here: this step only)"),
    "completions/mean_length": N_("mean completion length in tokens (EOS included)"),
    "completions/min_length": N_("shortest completion"),
    "completions/max_length": N_("longest completion"),
    "completions/clipped_ratio": N_(
        "fraction of completions cut at max_completion_length (no EOS): truncation"
    ),
    "completions/mean_terminated_length": N_(
        "mean length of the completions that did end with EOS"
    ),
    "completions/min_terminated_length": N_("shortest terminated completion"),
    "completions/max_terminated_length": N_("longest terminated completion"),
    "rewards/accuracy/mean": N_(
        "mean of reward function 'accuracy' over the whole batch"
    ),
    "rewards/accuracy/std": N_("its std (ddof 1) over the whole batch, not per group"),
    "rewards/format/mean": N_("mean of reward function 'format'"),
    "rewards/format/std": N_("its batch std"),
    "reward": N_("batch mean of the weighted sum of the reward functions"),
    "reward_std": N_("batch std (ddof 1) of that sum"),
    "frac_reward_zero_std": N_(
        "fraction of completions whose group has zero std (scale_rewards "
        "'group'/'none' only)"
    ),
    "kl": N_(
        "masked mean over the completion tokens of ratio * k3 (TRL's default "
        "use_bias_correction_kl=True), of k3 with False (only when beta > 0)"
    ),
    "entropy": N_(
        "masked mean of the policy's per-token entropy over the completion tokens"
    ),
    "clip_ratio/low_mean": N_(
        "fraction of tokens with A < 0 and ratio < 1 - epsilon (on the lower clip "
        "platform)"
    ),
    "clip_ratio/low_min": N_("smallest per-sequence low fraction"),
    "clip_ratio/high_mean": N_(
        "fraction of tokens with A > 0 and ratio > 1 + epsilon_high (upper platform)"
    ),
    "clip_ratio/high_max": N_("largest per-sequence high fraction"),
    "clip_ratio/region_mean": N_("fraction of tokens on either platform"),
}


def _normalise(per_token_loss, mask, loss_type, max_completion_length) -> float:
    """TRL's loss normalisations for one micro-batch that is the whole batch."""
    x = per_token_loss * mask
    if loss_type == "grpo":
        return float((x.sum(1) / np.maximum(mask.sum(1), 1.0)).mean())
    if loss_type in ("bnpo", "dapo"):
        return float(x.sum() / max(mask.sum(), 1.0))
    if loss_type == "dr_grpo":
        return float(x.sum() / (mask.shape[0] * max_completion_length))
    raise ValueError(f"use_vllm supports grpo, bnpo, dapo, dr_grpo; got {loss_type!r}")


def log_line(
    seed: int = 1,
    *,
    num_prompts: int = 4,
    num_generations: int = 4,
    vocab: int = 6,
    max_completion_length: int = 12,
    prompt_len: int = 20,
    beta: float = 0.04,
    epsilon: float = 0.2,
    loss_type: str = "dapo",
    use_bias_correction_kl: bool = True,
    update_scale: float = 0.2,
    use_vllm: bool = False,
    sampler_noise: float = 0.05,
    vllm_clip_max: float = 3.0,
) -> dict:
    """One realistic GRPO step, logged as TRL 1.16.0 logs it, every value recomputed
    from its definition.

    The "model" is a table of logits, one row of ``vocab`` logits per completion
    position (its parameters are those logits). Completions are sampled from the old
    policy (seeded); some end with EOS (token 0) and some are cut at
    ``max_completion_length``. Two reward functions, ``accuracy`` (1 when the completion
    terminated and its second token is even, a stand-in for a checked answer) and
    ``format`` (0.5 when it terminated), weights 1 and 1. The step is the *second*
    update on this generation batch (``num_iterations=2``): the current logits are the
    old ones moved by ``update_scale`` times a seeded perturbation, so ratios differ
    from 1 and the clip statistics are non-zero; ``update_scale=0`` makes it the first
    update (every ratio 1). ``use_bias_correction_kl`` is TRL's option, default True
    as in TRL: the KL term, and the logged ``kl``, is ``ratio * k3`` per token (the
    importance ratio ``exp(new - old)``), ``k3`` alone with False.

    ``use_vllm=True`` adds TRL's default ``vllm_importance_sampling_correction`` (mode
    ``"sequence_mask"``): the sampler's log-probs are the old ones plus seeded noise of
    size ``sampler_noise`` (vLLM's numerics differ from the trainer's); the per-sequence
    ratio ``exp(sum of (old - sampler))`` is set to 0 above ``vllm_clip_max`` and
    multiplies the per-token policy loss (not the KL term); the ``sampling/*`` metrics
    are logged. Returns ``metrics`` (TRL's keys, in :data:`LOG_LINE_MEANINGS` order),
    ``inputs`` (the arrays that produced them) and ``checks``: each metric recomputed a
    second way (by hand from the arrays), to compare.
    """
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    p_, g = (
        v.integer(num_prompts, "num_prompts", minimum=1),
        v.integer(num_generations, "num_generations", minimum=2),
    )
    n, lmax = (
        p_ * g,
        v.integer(max_completion_length, "max_completion_length", minimum=2),
    )
    vocab = v.integer(vocab, "vocab", minimum=3)
    beta = v.scalar(beta, "beta", nonnegative=True)
    if not isinstance(use_bias_correction_kl, bool):
        raise TypeError("use_bias_correction_kl must be a bool")
    old_logits = rng.normal(0.0, 1.0, (n, lmax, vocab))
    old_logits[:, :, 0] -= 1.2  # EOS rarer than the other tokens
    old_lp_all = old_logits - np.log(np.exp(old_logits).sum(-1, keepdims=True))
    tokens = np.array(
        [
            [rng.choice(vocab, p=np.exp(old_lp_all[i, t])) for t in range(lmax)]
            for i in range(n)
        ]
    )
    first_eos = np.array(
        [np.flatnonzero(row == 0)[0] if (row == 0).any() else lmax for row in tokens]
    )
    lengths = np.minimum(first_eos + 1, lmax)  # EOS counts as a completion token
    truncated = first_eos >= lmax
    mask = (np.arange(lmax)[None, :] < lengths[:, None]).astype(float)
    new_logits = old_logits + update_scale * rng.normal(0.0, 1.0, old_logits.shape)
    ref_logits = old_logits + 0.1 * rng.normal(0.0, 1.0, old_logits.shape)

    def logp(lg):
        full = lg - np.log(np.exp(lg).sum(-1, keepdims=True))
        return full, np.take_along_axis(full, tokens[..., None], -1)[..., 0]

    new_full, new = logp(new_logits)
    _, old = logp(old_logits)
    _, ref = logp(ref_logits)
    accuracy = ((~truncated) & (lengths >= 2) & (tokens[:, 1] % 2 == 0)).astype(float)
    fmt = 0.5 * (~truncated)
    rpf = np.column_stack([accuracy, fmt])
    adv = reward_advantages(rpf, g)
    kw = dict(epsilon=epsilon, loss_type=loss_type, max_completion_length=lmax)
    out = grpo_loss(
        new,
        old,
        ref if beta else None,
        adv.advantages,
        mask,
        beta=beta,
        use_bias_correction_kl=use_bias_correction_kl,
        **kw,
    )
    sampling = {}
    if use_vllm:
        sampler = old + v.scalar(sampler_noise, "sampler_noise", nonnegative=True) * (
            rng.normal(0.0, 1.0, old.shape)
        )
        diff = (old - sampler) * mask
        is_ratio = np.exp(diff.sum(axis=1, keepdims=True))  # (B, 1), sequence level
        is_ratio = np.where(is_ratio > vllm_clip_max, 0.0, is_ratio)
        # TRL: per_token_loss * importance_sampling_ratio, then + beta * per_token_kl
        pol = grpo_loss(new, old, None, adv.advantages, mask, beta=0.0, **kw)
        kl_part = out.per_token_loss - pol.per_token_loss
        per_tok = pol.per_token_loss * is_ratio + kl_part
        out = out._replace(
            loss=_normalise(per_tok, mask, loss_type, lmax),
            per_token_loss=per_tok,
            grad=pol.grad * is_ratio + (out.grad - pol.grad),
        )
        delta = np.abs(old - sampler)[mask > 0]
        sampling = {
            "sampling/sampling_logp_difference/mean": float(delta.mean()),
            "sampling/sampling_logp_difference/max": float(delta.max()),
            "sampling/importance_sampling_ratio/min": float(is_ratio.min()),
            "sampling/importance_sampling_ratio/mean": float(is_ratio.mean()),
            "sampling/importance_sampling_ratio/max": float(is_ratio.max()),
        }
    # chain rule to the parameters (the logits): d logp_token / d logits = onehot -
    # softmax
    onehot = np.eye(vocab)[tokens]
    grad_params = out.grad[..., None] * (onehot - np.exp(new_full))
    entropy = -(np.exp(new_full) * new_full).sum(-1)
    term = ~truncated
    metrics = {
        "loss": out.loss,
        "grad_norm": float(np.linalg.norm(grad_params)),
        "num_tokens": float(mask.sum() + n * prompt_len),
        "completions/mean_length": float(lengths.mean()),
        "completions/min_length": float(lengths.min()),
        "completions/max_length": float(lengths.max()),
        "completions/clipped_ratio": float(truncated.mean()),
        "completions/mean_terminated_length": float(lengths[term].mean())
        if term.any()
        else 0.0,
        "completions/min_terminated_length": float(lengths[term].min())
        if term.any()
        else 0.0,
        "completions/max_terminated_length": float(lengths[term].max())
        if term.any()
        else 0.0,
        "rewards/accuracy/mean": float(accuracy.mean()),
        "rewards/accuracy/std": float(np.std(accuracy, ddof=1)),
        "rewards/format/mean": float(fmt.mean()),
        "rewards/format/std": float(np.std(fmt, ddof=1)),
        "reward": adv.metrics["reward"],
        "reward_std": adv.metrics["reward_std"],
        "frac_reward_zero_std": adv.metrics["frac_reward_zero_std"],
    }
    if beta:
        metrics["kl"] = out.metrics["kl"]
    metrics["entropy"] = float((entropy * mask).sum() / mask.sum())
    for key in (
        "clip_ratio/low_mean",
        "clip_ratio/low_min",
        "clip_ratio/high_mean",
        "clip_ratio/high_max",
        "clip_ratio/region_mean",
    ):
        metrics[key] = out.metrics[key]
    metrics.update(sampling)
    # second computations, by hand from the arrays
    ratio = np.exp(new - old)
    a = adv.advantages[:, None] * np.ones_like(mask)
    low = (ratio < 1 - epsilon) & (a < 0)
    high = (ratio > 1 + epsilon) & (a > 0)
    total = rpf.sum(axis=1)
    gap = ref - new
    kl_weight = ratio if use_bias_correction_kl else 1.0
    checks = {
        "reward": float(total.mean()),
        "reward_std": float(np.std(total, ddof=1)),
        "frac_reward_zero_std": float(
            np.repeat(np.ptp(total.reshape(p_, g), axis=1) == 0, g).mean()
        ),
        "kl": float((kl_weight * (np.exp(gap) - gap - 1) * mask).sum() / mask.sum())
        if beta
        else None,
        "clip_ratio/low_mean": float((low * mask).sum() / mask.sum()),
        "clip_ratio/high_mean": float((high * mask).sum() / mask.sum()),
        "clip_ratio/region_mean": float(((low | high) * mask).sum() / mask.sum()),
        "completions/clipped_ratio": float(
            np.mean([tokens[i, lengths[i] - 1] != 0 for i in range(n)])
        ),
    }
    inputs = {
        "tokens": tokens,
        "lengths": lengths,
        "truncated": truncated,
        "mask": mask,
        "rewards_per_func": rpf,
        "advantages": adv.advantages,
        "ratio": ratio * mask + (1 - mask),
        "new_logps": new,
        "old_logps": old,
        "ref_logps": ref,
    }
    if use_vllm:
        inputs["sampler_logps"] = sampler
        inputs["importance_sampling_ratio"] = is_ratio
    return {
        "metrics": metrics,
        "checks": checks,
        "inputs": inputs,
        "config": {
            "num_generations": g,
            "beta": beta,
            "epsilon": epsilon,
            "loss_type": loss_type,
            "use_bias_correction_kl": use_bias_correction_kl,
            "max_completion_length": lmax,
            "num_iterations": 2 if update_scale else 1,
            "use_vllm": use_vllm,
        },
    }
