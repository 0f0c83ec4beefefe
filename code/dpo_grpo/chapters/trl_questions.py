"""Computed answers to the questions TRL users ask most about their GRPO and DPO logs (chapter 6 and the page
"Reading a TRL run").

Every function builds a small batch, runs it through the package's TRL 1.16.0-exact pieces
(:func:`dpo_grpo.trl_exact.advantages.reward_advantages`, :func:`dpo_grpo.trl_exact.grpo.grpo_loss`,
:func:`dpo_grpo.trl_exact.dpo.dpo_loss`) and returns what a trainer would log, under TRL's metric names.

- :func:`zero_std_logging`: ``frac_reward_zero_std`` and ``reward_std`` under every ``scale_rewards`` and
  ``multi_objective_aggregation`` (the metric counts degenerate *groups* only under ``"group"``/``"none"``).
- :func:`informative_gradient_share`: zero-std groups still count in every loss denominator, so the informative
  groups' gradient shrinks with the zero-std fraction.
- :func:`two_sample_advantages`: the two-answer group ``[0, d]`` with the population and TRL's sample std.
- :func:`truncation_step`, :func:`soft_overlong_punishment`: truncated completions, ``completions/clipped_ratio``
  against ``clip_ratio/*``, ``mask_truncated_completions`` and DAPO's overlong shaping.
- :func:`batch_plan`: what ``per_device_train_batch_size``, ``num_generations``, ``steps_per_generation`` and
  ``num_iterations`` mean, and when TRL computes old log-probs.
- :func:`per_function_stds`: ``rewards/<f>/std`` against ``reward_std`` and ``frac_reward_zero_std``.
- :func:`dpo_displacement` (from :mod:`dpo_grpo.chapters.displacement`): DPO on a softmax with shared embeddings; ``rewards/chosen`` can fall while the margin
  grows (likelihood displacement), and the loss goes to 0 with ``rewards/accuracies`` 1.
- :func:`dpo_stuck_at_ln2`: the causes of a DPO loss that stays at ln 2 and what ``grad_norm`` says about each.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _validation as v
from ..i18n import N_, tr
from .displacement import dpo_displacement
from ..trl_exact.advantages import reward_advantages
from ..trl_exact.dpo import dpo_loss
from ..trl_exact.grpo import grpo_loss

__all__ = [
    "zero_std_logging",
    "informative_gradient_share",
    "two_sample_advantages",
    "soft_overlong_punishment",
    "truncation_step",
    "batch_plan",
    "per_function_stds",
    "dpo_displacement",
    "dpo_stuck_at_ln2",
    "ZERO_STD_SETTINGS",
    "TRL_ISSUES",
    "LOG_LINE_MEANINGS",
    "log_line",
]

#: TRL GitHub issues and pull requests whose questions the book answers by computation (number -> one line).
TRL_ISSUES = {
    3452: "GRPO reward=0 and loss=0",
    5697: "GRPO quickstart max_completion_length=256 silently breaks training (every completion truncated)",
    3248: "Overlong filtering for GRPO (mask_truncated_completions)",
    2858: "why must the global batch size be divisible by num_generations?",
    3061: "why (per_device_train_batch_size * n_processes) % n_generations == 0?",
    3020: "GRPO with per_device_train_batch_size > num_generations",
    3662: "what is the point of steps_per_generation when num_iterations exists?",
    3294: "old model and trained model are the same in grpo_trainer",
    3857: "rewards/<f>/std is not 0 but the loss is 0 (reward_std 0, frac_reward_zero_std 1)",
    3991: "scale_rewards='batch' and the logged statistics",
    800: "strange DPO loss pattern: chosen and rejected log-probs both decrease",
    1236: "DPO loss goes to 0",
    4023: "DPO loss always 0.6934 and grad_norm 0",
    927: "DPO + gradient checkpointing: inputs need requires_grad or training silently fails",
}

#: The settings :func:`zero_std_logging` compares: (label, ``scale_rewards``, ``multi_objective_aggregation``).
ZERO_STD_SETTINGS = (
    ("scale_rewards='group'", "group", "sum_then_normalize"),
    ("scale_rewards='none'", "none", "sum_then_normalize"),
    ("scale_rewards='batch'", "batch", "sum_then_normalize"),
    ("normalize_then_sum", "group", "normalize_then_sum"),
)


def _groups(rewards, name="rewards"):
    r = v.as_float_array(rewards, name, ndim=2)
    if r.shape[1] < 2:
        raise ValueError(
            f"{name} must have at least two answers per group (shape (P, G), G >= 2), got {r.shape}"
        )
    return r


def zero_std_logging(rewards) -> list:
    """What TRL 1.16.0 logs for one batch of 0/1-style rewards of shape ``(P, G)``, per setting of
    :data:`ZERO_STD_SETTINGS`.

    One dict per setting: ``setting``, ``frac_reward_zero_std`` (logged), ``degenerate`` (the true fraction of groups
    whose rewards are all equal), ``reward_std`` (logged: the batch std of the summed rewards, ddof 1) and
    ``max_abs_advantage_in_degenerate`` (largest advantage TRL gives an answer of a degenerate group: 0 up to
    rounding in every setting, since each setting subtracts a group mean). Under ``"batch"`` and
    ``normalize_then_sum`` TRL tests the *batch* std for zero, so the metric says 0.0 whenever the batch is not
    constant, however many groups are degenerate.
    """
    r = _groups(rewards)
    p, g = r.shape
    degenerate = np.ptp(r, axis=1) == 0
    rows = []
    for label, scale, agg in ZERO_STD_SETTINGS:
        out = reward_advantages(
            r.reshape(-1, 1), g, scale_rewards=scale, multi_objective_aggregation=agg
        )
        adv = out.advantages.reshape(p, g)
        rows.append(
            {
                "setting": label,
                "frac_reward_zero_std": out.metrics["frac_reward_zero_std"],
                "degenerate": float(degenerate.mean()),
                "reward_std": out.metrics["reward_std"],
                "max_abs_advantage_in_degenerate": float(np.abs(adv[degenerate]).max())
                if degenerate.any()
                else 0.0,
            }
        )
    return rows


def informative_gradient_share(
    n_prompts: int = 8, group_size: int = 4, length: int = 6, loss_type: str = "dapo"
) -> list:
    """How much gradient an informative group receives as zero-std groups fill the batch.

    A batch of ``n_prompts`` groups of ``group_size`` answers of ``length`` tokens, on-policy, ``beta=0``. The
    informative groups have rewards ``[1, 0, 1, 0, ...]``; ``k`` groups have all rewards equal (advantage 0). For
    each ``k`` in ``0 .. n_prompts - 1``: ``zero_std_fraction`` ``k / n_prompts``; ``grad_norm`` of the whole
    batch's loss; ``relative_to_filtered``, the gradient of one informative group divided by its gradient in the same
    batch with the zero-std groups removed (what DAPO's dynamic sampling trains on). Every ``loss_type`` divides by
    a count that includes the zero-std groups' answers or tokens, so this ratio is ``1 - k / n_prompts``: at a fixed
    learning rate the step an informative prompt gets shrinks with the zero-std fraction, and changes from batch to
    batch as that fraction does.
    """
    n_prompts = v.integer(n_prompts, "n_prompts", minimum=2)
    g = v.integer(group_size, "group_size", minimum=2)
    length = v.integer(length, "length", minimum=1)
    v.choice(loss_type, "loss_type", ("grpo", "bnpo", "dr_grpo", "dapo"))
    informative = np.tile([1.0, 0.0], g)[:g]

    def grads(rewards):
        adv = reward_advantages(rewards.reshape(-1, 1), g).advantages
        b = rewards.size
        logps = np.log(np.full((b, length), 0.3))
        return grpo_loss(
            logps,
            logps,
            None,
            adv,
            np.ones((b, length)),
            beta=0.0,
            loss_type=loss_type,
            max_completion_length=length,
        ).grad

    rows = []
    for k in range(n_prompts):
        full = grads(np.array([np.ones(g)] * k + [informative] * (n_prompts - k)))
        filtered = grads(np.array([informative] * (n_prompts - k)))
        rows.append(
            {
                "k": k,
                "zero_std_fraction": k / n_prompts,
                "grad_norm": float(np.linalg.norm(full)),
                "relative_to_filtered": float(
                    np.linalg.norm(full[-g:]) / np.linalg.norm(filtered[-g:])
                ),
            }
        )
    return rows


def two_sample_advantages(gap, eps: float = 1e-4) -> dict:
    """The better answer's advantage in the group ``[0, gap]``: ``population`` (ddof 0, ``d / (d + 2 eps)`` -> 1)
    and ``sample`` (ddof 1, TRL's: ``(d / 2) / (d / sqrt 2 + eps)`` -> ``1 / sqrt 2``)."""
    d = v.scalar(gap, "gap", positive=True)
    eps = v.scalar(eps, "eps", positive=True)
    r = np.array([0.0, d])
    pop = (r[1] - r.mean()) / (r.std(ddof=0) + eps)
    sample = reward_advantages(r[:, None], 2, eps=eps).advantages[1]
    return {
        "population": float(pop),
        "sample": float(sample),
        "sample_limit": 1 / math.sqrt(2),
    }


def soft_overlong_punishment(
    lengths, max_completion_len: int, soft_punish_cache: int
) -> np.ndarray:
    """DAPO's overlong reward shaping as TRL's ``trl.rewards.get_soft_overlong_punishment`` computes it: 0 up to
    ``L_max - L_cache``, then falling linearly to -1 at ``L_max``, and -1 beyond."""
    lens = v.integer_array(lengths, "lengths", ndim=1)
    lmax = v.integer(max_completion_len, "max_completion_len", minimum=1)
    cache = v.integer(soft_punish_cache, "soft_punish_cache", minimum=0)
    if cache > lmax:
        raise ValueError(
            f"soft_punish_cache ({cache}) must not exceed max_completion_len ({lmax})"
        )
    out = np.zeros(lens.shape)
    mid = (lens > lmax - cache) & (lens <= lmax)
    if cache:
        out[mid] = (lmax - cache - lens[mid]) / cache
    out[lens > lmax] = -1.0
    return out


def truncation_step(
    lengths,
    needed,
    *,
    max_completion_length: int,
    num_generations: int,
    mask_truncated_completions: bool = False,
    soft_punish_cache: int | None = None,
) -> dict:
    """One GRPO step where an answer is correct (reward 1) only if it finishes: answer ``i`` wants ``needed[i]``
    tokens and is cut at ``max_completion_length``. ``lengths`` are the generated lengths before truncation.

    Returns TRL's logged values: ``completions/clipped_ratio`` (fraction of truncated completions: no EOS),
    ``reward``, ``reward_std``, ``frac_reward_zero_std``, ``loss`` and ``grad_norm`` of the on-policy loss
    (``loss_type="dapo"``, ``beta=0``), ``clip_ratio/region_mean`` (PPO clipping, unrelated to truncation), and
    ``trained_tokens`` (the tokens left in the loss mask). ``mask_truncated_completions`` zeroes truncated rows of the
    loss mask, as TRL does (their advantages still count in the group statistics); ``soft_punish_cache`` adds DAPO's
    overlong punishment as a second reward function, applied to the untruncated lengths (TRL sees only the
    truncated ids, so a truncated answer scores ``(L_max - L_cache - L_max) / L_cache = -1``).
    """
    gen = v.integer_array(lengths, "lengths", ndim=1)
    need = v.integer_array(needed, "needed", ndim=1)
    if gen.shape != need.shape:
        raise ValueError(
            f"lengths and needed must have the same shape, got {gen.shape} and {need.shape}"
        )
    if (gen < 1).any() or (need < 1).any():
        raise ValueError("lengths and needed must be >= 1")
    lmax = v.integer(max_completion_length, "max_completion_length", minimum=1)
    g = v.integer(num_generations, "num_generations", minimum=2)
    mask_trunc = v.boolean(mask_truncated_completions, "mask_truncated_completions")
    n = gen.size
    if n % g:
        raise ValueError(
            f"num_generations={g} must divide the number of completions ({n})"
        )
    kept = np.minimum(gen, lmax)
    truncated = gen > lmax
    correct = (~truncated) & (gen >= need)
    columns = [correct.astype(float)]
    if soft_punish_cache is not None:
        columns.append(
            soft_overlong_punishment(kept + truncated, lmax, soft_punish_cache)
        )
    rpf = np.column_stack(columns)
    adv = reward_advantages(rpf, g)
    mask = (np.arange(lmax)[None, :] < kept[:, None]).astype(float)
    if mask_trunc:
        mask[truncated] = 0.0
    logps = np.log(np.full(mask.shape, 0.3))
    metrics = {"completions/clipped_ratio": float(truncated.mean()), **adv.metrics}
    if mask.sum() == 0:  # TRL: every token masked -> the loss is 0 and nothing moves
        metrics.update(
            {
                "loss": 0.0,
                "grad_norm": 0.0,
                "clip_ratio/region_mean": 0.0,
                "trained_tokens": 0,
            }
        )
        return metrics
    rows = mask.sum(axis=1) > 0
    out = grpo_loss(
        logps[rows],
        logps[rows],
        None,
        adv.advantages[rows],
        mask[rows],
        beta=0.0,
        loss_type="dapo",
    )
    metrics.update(
        {
            "loss": out.loss,
            "grad_norm": float(np.linalg.norm(out.grad)),
            "clip_ratio/region_mean": out.metrics["clip_ratio/region_mean"],
            "trained_tokens": int(mask.sum()),
        }
    )
    return metrics


def batch_plan(
    per_device_train_batch_size: int,
    num_generations: int,
    *,
    num_processes: int = 1,
    gradient_accumulation_steps: int = 1,
    steps_per_generation: int | None = None,
    num_iterations: int = 1,
    vllm_importance_sampling_correction: bool = False,
) -> dict:
    """What one TRL 1.16.0 GRPO configuration does with its batches.

    ``per_device_train_batch_size`` counts *completions*. ``steps_per_generation`` defaults to
    ``gradient_accumulation_steps``; the generation batch (``per_device_train_batch_size * num_processes *
    steps_per_generation`` completions) must be divisible by ``num_generations`` (raises ``ValueError`` otherwise,
    like ``GRPOConfig``). Returns ``completions_per_micro_batch`` (all processes), ``generation_batch_size``,
    ``prompts_per_generation``, ``micro_batches_per_generation`` (``steps_per_generation``: each micro-batch is one
    forward/backward), ``optimizer_steps_per_generation`` (micro-batches x ``num_iterations`` /
    ``gradient_accumulation_steps``), ``completions_per_optimizer_step`` and ``old_logps_computed``: TRL computes old
    log-probs unless ``gradient_accumulation_steps`` is a multiple of ``steps_per_generation * num_iterations`` (and
    vLLM's importance-sampling correction is off); when it skips them, every ratio is exactly 1.
    """
    bs = v.integer(
        per_device_train_batch_size, "per_device_train_batch_size", minimum=1
    )
    g = v.integer(num_generations, "num_generations", minimum=2)
    nproc = v.integer(num_processes, "num_processes", minimum=1)
    gas = v.integer(
        gradient_accumulation_steps, "gradient_accumulation_steps", minimum=1
    )
    spg = (
        gas
        if steps_per_generation is None
        else v.integer(steps_per_generation, "steps_per_generation", minimum=1)
    )
    mu = v.integer(num_iterations, "num_iterations", minimum=1)
    vllm_is = v.boolean(
        vllm_importance_sampling_correction, "vllm_importance_sampling_correction"
    )
    gen_batch = bs * nproc * spg
    if gen_batch % g:
        raise ValueError(
            f"generation_batch_size ({gen_batch} = per_device_train_batch_size {bs} x num_processes "
            f"{nproc} x steps_per_generation {spg}) must be divisible by num_generations ({g})"
        )
    micro = spg * mu
    return {
        "completions_per_micro_batch": bs * nproc,
        "generation_batch_size": gen_batch,
        "prompts_per_generation": gen_batch // g,
        "micro_batches_per_generation": spg,
        "updates_per_generation_batch": mu,
        "optimizer_steps_per_generation": micro / gas,
        "completions_per_optimizer_step": bs * nproc * gas,
        "old_logps_computed": bool(gas % micro != 0 or vllm_is),
    }


def per_function_stds(
    rewards_per_func, num_generations: int, reward_weights=None
) -> dict:
    """The reward statistics TRL 1.16.0 logs for ``rewards_per_func`` of shape ``(N, K)``.

    ``rewards/<k>/std``: the batch std (ddof 1) of function ``k`` over *all* completions; ``reward_std``: the batch
    std of the weighted sum; ``frac_reward_zero_std``: the fraction of completions whose *group* has zero std of the
    weighted sum. A function can vary across groups (``rewards/<k>/std`` > 0) while every group is constant
    (``frac_reward_zero_std`` = 1, every advantage 0); and functions whose weighted sum is constant give
    ``reward_std`` = 0 although each of them varies. Also returns ``advantages``.
    """
    rpf = v.as_float_array(rewards_per_func, "rewards_per_func", ndim=2)
    g = v.integer(num_generations, "num_generations", minimum=2)
    out = reward_advantages(rpf, g, reward_weights=reward_weights)
    stds = {
        f"rewards/{k}/std": float(np.std(rpf[:, k], ddof=1))
        for k in range(rpf.shape[1])
    }
    means = {f"rewards/{k}/mean": float(rpf[:, k].mean()) for k in range(rpf.shape[1])}
    return {**means, **stds, **out.metrics, "advantages": out.advantages}


def dpo_stuck_at_ln2(beta: float = 0.1) -> list:
    """Four ways a DPO log shows ``loss`` 0.6931, computed on the book's pairs, with the ``grad_norm`` each gives.

    - ``step 0`` (policy = reference): loss ln 2, gradient non-zero: expected, training has not started;
    - ``no gradient reaches the policy`` (e.g. PEFT + gradient checkpointing without input gradients, or a frozen
      model): the loss is computed, but the parameters receive nothing: ``grad_norm`` 0, loss stays ln 2;
    - ``beta -> 0``: the logits ``beta * m`` are 0 whatever the policy does; loss ln 2, gradient proportional to beta;
    - ``policy identical to reference`` (the reference *is* the policy, e.g. a shared module that trains too): every
      step restarts at margin 0.
    Each row: ``case`` (in the reader's language), ``loss``, ``grad_norm`` (norm of d loss / d policy log-probs; 0
    for the case where the parameters get no gradient), ``ln2_gap`` ``|loss - ln 2|``.
    """
    from ..reference import examples as ex

    beta = v.scalar(beta, "beta", positive=True)
    pairs = ex.DPO_PAIRS
    rows = []

    def add(case, out, reaches=True):
        g = (
            np.concatenate([out.grad_policy_chosen, out.grad_policy_rejected])
            if reaches
            else np.zeros(2)
        )
        rows.append(
            {
                "case": case,
                "loss": out.loss,
                "grad_norm": float(np.linalg.norm(g)),
                "ln2_gap": abs(out.loss - math.log(2)),
            }
        )

    start = dpo_loss(
        pairs["ref_chosen"],
        pairs["ref_rejected"],
        pairs["ref_chosen"],
        pairs["ref_rejected"],
        beta=beta,
    )
    add(tr("step 0: policy = reference"), start)
    add(tr("no gradient reaches the policy (grad_norm 0)"), start, reaches=False)
    add(tr("beta = 1e-8 (beta -> 0)"), dpo_loss(**pairs, beta=1e-8))
    add(tr("trained pairs, beta = {beta:g}", beta=beta), dpo_loss(**pairs, beta=beta))
    return rows


#: What each metric of a TRL 1.16.0 GRPO log line measures (the order of :func:`log_line`).
LOG_LINE_MEANINGS = {
    "loss": N_(
        "clipped surrogate + beta * k3, normalised by loss_type; per log: the sum of "
        "the micro-batch losses (each / gradient_accumulation_steps) over the optimiser "
        "steps since the last log"
    ),
    "grad_norm": N_(
        "L2 norm of the gradient over all trainable parameters, before clipping to max_grad_norm"
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
        "fraction of completions whose group has zero std (scale_rewards 'group'/'none' only)"
    ),
    "kl": N_("masked mean of k3 over the completion tokens (only when beta > 0)"),
    "entropy": N_(
        "masked mean of the policy's per-token entropy over the completion tokens"
    ),
    "clip_ratio/low_mean": N_(
        "fraction of tokens with A < 0 and ratio < 1 - epsilon (on the lower clip platform)"
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
    update_scale: float = 0.2,
    use_vllm: bool = False,
    sampler_noise: float = 0.05,
    vllm_clip_max: float = 3.0,
) -> dict:
    """One realistic GRPO step, logged as TRL 1.16.0 logs it, every value recomputed from its definition.

    The "model" is a table of logits, one row of ``vocab`` logits per completion position (its parameters are those
    logits). Completions are sampled from the old policy (seeded); some end with EOS (token 0) and some are cut at
    ``max_completion_length``. Two reward functions, ``accuracy`` (1 when the completion terminated and its second
    token is even, a stand-in for a checked answer) and ``format`` (0.5 when it terminated), weights 1 and 1. The
    step is the *second* update on this generation batch (``num_iterations=2``): the current logits are the old ones
    moved by ``update_scale`` times a seeded perturbation, so ratios differ from 1 and the clip statistics are
    non-zero; ``update_scale=0`` makes it the first update (every ratio 1).

    ``use_vllm=True`` adds TRL's default ``vllm_importance_sampling_correction``
    (mode ``"sequence_mask"``): the sampler's log-probs are the old ones plus seeded
    noise of size ``sampler_noise`` (vLLM's numerics differ from the trainer's); the
    per-sequence ratio ``exp(sum of (old - sampler))`` is set to 0 above
    ``vllm_clip_max`` and multiplies the per-token policy loss (not the KL term); the
    ``sampling/*`` metrics are logged. Returns ``metrics`` (TRL's keys, in :data:`LOG_LINE_MEANINGS` order), ``inputs`` (the arrays that
    produced them) and ``checks``: each metric recomputed a second way (by hand from the arrays), to compare.
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
        epsilon=epsilon,
        loss_type=loss_type,
        max_completion_length=lmax,
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
    # chain rule to the parameters (the logits): d logp_token / d logits = onehot - softmax
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
    checks = {
        "reward": float(total.mean()),
        "reward_std": float(np.std(total, ddof=1)),
        "frac_reward_zero_std": float(
            np.repeat(np.ptp(total.reshape(p_, g), axis=1) == 0, g).mean()
        ),
        "kl": float(((np.exp(gap) - gap - 1) * mask).sum() / mask.sum())
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
            "max_completion_length": lmax,
            "num_iterations": 2 if update_scale else 1,
            "use_vllm": use_vllm,
        },
    }
