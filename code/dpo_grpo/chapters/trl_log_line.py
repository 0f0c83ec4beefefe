"""One GRPO step logged as TRL 1.16.0 logs it (the page "Reading a TRL run"): every
metric of the log line recomputed from its definition, with what it measures
(:data:`LOG_LINE_MEANINGS`) and a second computation to compare (:func:`log_line`);
every key a ``GRPOTrainer`` can log, with the options that turn it on
(:data:`GRPO_KEY_WHEN`, :func:`grpo_key_rows`)."""

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
        "fraction of completions whose group has zero std (scale_rewards='batch': "
        "1 only when the whole batch's rewards are equal, else 0)"
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


#: What the keys this page's step does not log measure: the Trainer's own keys, and
#: those TRL 1.16.0's GRPOTrainer logs only under an option (``<f>`` is a reward
#: function's name, ``<name>`` one a reward function passes to ``log_metric``).
MORE_MEANINGS = {
    "learning_rate": N_("the scheduler's learning rate at this optimiser step"),
    "epoch": N_("epochs done: optimiser steps / optimiser steps per epoch"),
    "step_time": N_(
        "seconds per optimiser step spent in its training_step calls, generation "
        "included"
    ),
    "policy_loss": N_(
        "the loss before the entropy bonus: with one micro-batch per optimiser step, "
        "loss = policy_loss - entropy_coef * entropy"
    ),
    "entropy_coef": N_(
        "the entropy bonus's coefficient; adaptive: it moves by entropy_coef_delta "
        "each optimiser step, up while the entropy is at or below entropy_target "
        "(and the bonus applies), down otherwise, within [entropy_coef_min, "
        "entropy_coef_max]"
    ),
    "aux_loss": N_(
        "the mixture-of-experts router's load-balancing loss, unweighted; loss "
        "adds router_aux_loss_coef * aux_loss"
    ),
    "tools/call_frequency": N_("tool calls per completion"),
    "tools/failure_frequency": N_("failed tool calls / tool calls (0 without calls)"),
    "sampling/sampling_logp_difference/mean": N_(
        "mean over the completion tokens of |log pi_old - log pi_vLLM|"
    ),
    "sampling/sampling_logp_difference/max": N_("its largest token value"),
    "sampling/importance_sampling_ratio/min": N_(
        "smallest importance weight pi_old / pi_vLLM after truncation or masking "
        "(per sequence or per token, by vllm_importance_sampling_mode)"
    ),
    "sampling/importance_sampling_ratio/mean": N_("mean importance weight"),
    "sampling/importance_sampling_ratio/max": N_("largest importance weight"),
    "cispo_clip_ratio": N_(
        "fraction of tokens with A > 0 and ratio > epsilon_high (replaces clip_ratio/*)"
    ),
    "vespo/phi_seq_mean": N_(
        "masked mean of VESPO's sequence weight phi (replaces clip_ratio/*)"
    ),
    "<name>": N_(
        "a scalar a reward function logs with log_metric(name, value): the mean "
        "of its values per generation batch"
    ),
    "num_input_tokens_seen": N_("the Trainer's token counter: for GRPO, num_tokens"),
    "train_tokens_per_second": N_("tokens seen in this train() call per second"),
    "train_runtime": N_("seconds since train() started"),
    "train_samples_per_second": N_("samples per second of the train() call"),
    "train_steps_per_second": N_("optimiser steps per second of the train() call"),
    "total_flos": N_(
        "the Trainer's floating-point-operation estimate (0 for GRPO: its inputs "
        "have no input_ids to count)"
    ),
    "train_loss": N_("mean of loss over the train() call's optimiser steps"),
}

_EVERY = N_("every line")
_CLIP = N_("every line with loss_type grpo, bnpo, dr_grpo, dapo (default) or luspo")
_BONUS = N_("entropy_coef != 0 or use_adaptive_entropy=True")
_VLLM = N_("use_vllm=True with vllm_importance_sampling_correction=True (default)")
_TOKENS = N_("include_num_input_tokens_seen set ('all' or 'non_padding')")
_END = N_("train()'s last line only")

#: When each key a TRL 1.16.0 GRPOTrainer run logs appears (every key of a log line and
#: of train()'s last line, transformers 5.24's own included), in the order of the
#: table: this page's step first. ``<f>`` stands for each reward function's name.
GRPO_KEY_WHEN = {
    "loss": _EVERY,
    "grad_norm": _EVERY,
    "num_tokens": _EVERY,
    **{
        f"completions/{k}": _EVERY
        for k in (
            "mean_length",
            "min_length",
            "max_length",
            "clipped_ratio",
            "mean_terminated_length",
            "min_terminated_length",
            "max_terminated_length",
        )
    },
    "rewards/<f>/mean": N_("every line, one per reward function"),
    "rewards/<f>/std": N_("every line, one per reward function"),
    "reward": _EVERY,
    "reward_std": _EVERY,
    "frac_reward_zero_std": _EVERY,
    "kl": N_("beta > 0 (default beta = 0: absent)"),
    "entropy": _EVERY,
    "clip_ratio/low_mean": _CLIP,
    "clip_ratio/low_min": _CLIP,
    "clip_ratio/high_mean": _CLIP,
    "clip_ratio/high_max": _CLIP,
    "clip_ratio/region_mean": _CLIP,
    "learning_rate": _EVERY,
    "step_time": _EVERY,
    "epoch": N_("every line, and train()'s last line"),
    "policy_loss": _BONUS,
    "entropy_coef": _BONUS,
    "aux_loss": N_(
        "a mixture-of-experts model (one with output_router_logits) unless "
        "router_aux_loss_coef=0"
    ),
    "tools/call_frequency": N_("tools=[...]"),
    "tools/failure_frequency": N_("tools=[...]"),
    "sampling/sampling_logp_difference/mean": _VLLM,
    "sampling/sampling_logp_difference/max": _VLLM,
    "sampling/importance_sampling_ratio/min": _VLLM,
    "sampling/importance_sampling_ratio/mean": _VLLM,
    "sampling/importance_sampling_ratio/max": _VLLM,
    "cispo_clip_ratio": N_("loss_type='cispo'"),
    "vespo/phi_seq_mean": N_("loss_type='vespo'"),
    "<name>": N_("a reward function calls log_metric"),
    "num_input_tokens_seen": _TOKENS,
    "train_tokens_per_second": _TOKENS,
    "train_runtime": N_(
        "train()'s last line; every line with include_num_input_tokens_seen set"
    ),
    "train_samples_per_second": _END,
    "train_steps_per_second": _END,
    "total_flos": _END,
    "train_loss": _END,
}


def key_pattern(key: str, reward_names=("accuracy", "format")) -> str:
    """The :data:`GRPO_KEY_WHEN` entry of a logged ``key``: ``rewards/<f>/...`` for a
    reward function's keys, else the key itself."""
    for name in reward_names:
        for stat in ("mean", "std"):
            if key == f"rewards/{name}/{stat}":
                return f"rewards/<f>/{stat}"
    return key


def grpo_key_rows(metrics: dict) -> list:
    """The page's table of GRPO log keys: ``[key, value, when it appears, what it
    measures]`` for every key of ``metrics`` (a :func:`log_line` result's, in its
    order), then every other key of :data:`GRPO_KEY_WHEN`, with value ``None``."""
    meanings = {**LOG_LINE_MEANINGS, **MORE_MEANINGS}
    rows = [
        [k, float(v), GRPO_KEY_WHEN[key_pattern(k)], meanings[k]]
        for k, v in metrics.items()
    ]
    shown = {key_pattern(k) for k in metrics}
    return rows + [
        [k, None, when, meanings[k]]
        for k, when in GRPO_KEY_WHEN.items()
        if k not in shown and not k.startswith("rewards/<f>/")
    ]


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
    entropy_coef: float = 0.0,
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
    are logged. ``entropy_coef`` is TRL's static entropy bonus: ``loss`` becomes
    ``policy_loss - entropy_coef * entropy`` and both are logged (TRL logs
    ``policy_loss`` and ``entropy_coef`` only when the bonus is on). Returns
    ``metrics`` (TRL's keys, in :data:`LOG_LINE_MEANINGS` order), ``inputs`` (the
    arrays that produced them) and ``checks``: each metric recomputed a second way (by
    hand from the arrays), to compare.
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
    entropy_mean = float((entropy * mask).sum() / mask.sum())
    entropy_coef = v.scalar(entropy_coef, "entropy_coef")
    loss = out.loss
    if entropy_coef:
        # loss - c * masked mean of H; dH/dz = -p (log p + H) per position
        loss = out.loss - entropy_coef * entropy_mean
        w = (mask / mask.sum())[..., None]
        grad_params = grad_params + entropy_coef * w * np.exp(new_full) * (
            new_full + entropy[..., None]
        )
    term = ~truncated
    metrics = {
        "loss": loss,
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
    metrics["entropy"] = entropy_mean
    for key in (
        "clip_ratio/low_mean",
        "clip_ratio/low_min",
        "clip_ratio/high_mean",
        "clip_ratio/high_max",
        "clip_ratio/region_mean",
    ):
        metrics[key] = out.metrics[key]
    metrics.update(sampling)
    if entropy_coef:
        metrics["policy_loss"] = out.loss
        metrics["entropy_coef"] = entropy_coef
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
        "new_logits": new_logits,
        "new_logps": new,
        "entropies": entropy,
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
            "entropy_coef": entropy_coef,
        },
    }
