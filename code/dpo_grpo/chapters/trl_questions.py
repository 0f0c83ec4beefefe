"""Computed answers to the questions TRL users ask most about their GRPO and DPO logs
(chapter 6 and the page "Reading a TRL run").

Every function builds a small batch, runs it through the package's TRL 1.16.0-exact
pieces (:func:`dpo_grpo.trl_exact.advantages.reward_advantages`,
:func:`dpo_grpo.trl_exact.grpo.grpo_loss`, :func:`dpo_grpo.trl_exact.dpo.dpo_loss`) and
returns what a trainer would log, under TRL's metric names.

- :func:`zero_std_logging`: ``frac_reward_zero_std`` and ``reward_std`` under every
  ``scale_rewards`` and ``multi_objective_aggregation`` (the metric counts degenerate
  *groups* only under ``"group"``/``"none"``).
- :func:`informative_gradient_share`: zero-std groups still count in every loss
  denominator, so the informative groups' gradient shrinks with the zero-std fraction.
- :func:`two_sample_advantages`: the two-answer group ``[0, d]`` with the population and
  TRL's sample std.
- :func:`truncation_step`, :func:`soft_overlong_punishment`: truncated completions,
  ``completions/clipped_ratio`` against ``clip_ratio/*``, ``mask_truncated_completions``
  and DAPO's overlong shaping.
- :func:`batch_plan`: what ``per_device_train_batch_size``, ``num_generations``,
  ``steps_per_generation`` and ``num_iterations`` mean, and when TRL computes old
  log-probs.
- :func:`per_function_stds`: ``rewards/<f>/std`` against ``reward_std`` and
  ``frac_reward_zero_std``.
- :func:`dpo_displacement` (from :mod:`dpo_grpo.chapters.displacement`): DPO on a
  softmax with shared embeddings; ``rewards/chosen`` can fall while the margin grows
  (likelihood displacement), and the loss goes to 0 with ``rewards/accuracies`` 1.
- :func:`dpo_stuck_at_ln2`: the causes of a DPO loss that stays at ln 2 and what
  ``grad_norm`` says about each.

One GRPO step's log line, every metric recomputed and given its meaning, is
:mod:`dpo_grpo.chapters.trl_log_line`.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _validation as v
from ..i18n import tr
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
]

#: TRL GitHub issues and pull requests whose questions the book answers by computation
#: (number -> one line).
TRL_ISSUES = {
    3452: "GRPO reward=0 and loss=0",
    5697: (
        "GRPO quickstart max_completion_length=256 silently breaks training (every "
        "completion truncated)"
    ),
    3248: "Overlong filtering for GRPO (mask_truncated_completions)",
    2858: "why must the global batch size be divisible by num_generations?",
    3061: "why (per_device_train_batch_size * n_processes) % n_generations == 0?",
    3020: "GRPO with per_device_train_batch_size > num_generations",
    3662: "what is the point of steps_per_generation when num_iterations exists?",
    3294: "old model and trained model are the same in grpo_trainer",
    3857: (
        "rewards/<f>/std is not 0 but the loss is 0 (reward_std 0, "
        "frac_reward_zero_std 1)"
    ),
    3991: "scale_rewards='batch' and the logged statistics",
    800: "strange DPO loss pattern: chosen and rejected log-probs both decrease",
    1236: "DPO loss goes to 0",
    4023: "DPO loss always 0.6934 and grad_norm 0",
    927: (
        "DPO + gradient checkpointing: inputs need requires_grad or training silently "
        "fails"
    ),
}

#: The settings :func:`zero_std_logging` compares: (label, ``scale_rewards``,
#: ``multi_objective_aggregation``).
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
            f"{name} must have at least two answers per group (shape (P, G), G >= 2), "
            f"got {r.shape}"
        )
    return r


def zero_std_logging(rewards) -> list:
    """What TRL 1.16.0 logs for one batch of 0/1-style rewards of shape ``(P, G)``, per
    setting of :data:`ZERO_STD_SETTINGS`.

    One dict per setting: ``setting``, ``frac_reward_zero_std`` (logged), ``degenerate``
    (the true fraction of groups whose rewards are all equal), ``reward_std`` (logged:
    the batch std of the summed rewards, ddof 1) and ``max_abs_advantage_in_degenerate``
    (largest advantage TRL gives an answer of a degenerate group: 0 up to rounding in
    every setting, since each setting subtracts a group mean). Under ``"batch"`` and
    ``normalize_then_sum`` TRL tests the *batch* std for zero, so the metric says 0.0
    whenever the batch is not constant, however many groups are degenerate.
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
    """How much gradient an informative group receives as zero-std groups fill the
    batch.

    A batch of ``n_prompts`` groups of ``group_size`` answers of ``length`` tokens,
    on-policy, ``beta=0``. The informative groups have rewards ``[1, 0, 1, 0, ...]``;
    ``k`` groups have all rewards equal (advantage 0). For each ``k`` in
    ``0 .. n_prompts - 1``: ``zero_std_fraction`` ``k / n_prompts``; ``grad_norm`` of
    the whole batch's loss; ``relative_to_filtered``, the gradient of one informative
    group divided by its gradient in the same batch with the zero-std groups removed
    (what DAPO's dynamic sampling trains on). Every ``loss_type`` divides by a count
    that includes the zero-std groups' answers or tokens, so this ratio is
    ``1 - k / n_prompts``: at a fixed learning rate the step an informative prompt gets
    shrinks with the zero-std fraction, and changes from batch to batch as that fraction
    does.
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
    """The better answer's advantage in the group ``[0, gap]``: ``population`` (ddof 0,
    ``d / (d + 2 eps)`` -> 1) and ``sample`` (ddof 1, TRL's:
    ``(d / 2) / (d / sqrt 2 + eps)`` -> ``1 / sqrt 2``)."""
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
    """DAPO's overlong reward shaping as TRL's
    ``trl.rewards.get_soft_overlong_punishment`` computes it: 0 up to
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
    """One GRPO step where an answer is correct (reward 1) only if it finishes: answer
    ``i`` wants ``needed[i]`` tokens and is cut at ``max_completion_length``.
    ``lengths`` are the generated lengths before truncation.

    Returns TRL's logged values: ``completions/clipped_ratio`` (fraction of truncated
    completions: no EOS), ``reward``, ``reward_std``, ``frac_reward_zero_std``, ``loss``
    and ``grad_norm`` of the on-policy loss (``loss_type="dapo"``, ``beta=0``),
    ``clip_ratio/region_mean`` (PPO clipping, unrelated to truncation), and
    ``trained_tokens`` (the tokens left in the loss mask).
    ``mask_truncated_completions`` zeroes truncated rows of the loss mask, as TRL does
    (their advantages still count in the group statistics); ``soft_punish_cache`` adds
    DAPO's overlong punishment as a second reward function, applied to the untruncated
    lengths (TRL sees only the truncated ids, so a truncated answer scores
    ``(L_max - L_cache - L_max) / L_cache = -1``).
    """
    gen = v.integer_array(lengths, "lengths", ndim=1)
    need = v.integer_array(needed, "needed", ndim=1)
    if gen.shape != need.shape:
        raise ValueError(
            f"lengths and needed must have the same shape, got {gen.shape} and "
            f"{need.shape}"
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

    ``per_device_train_batch_size`` counts *completions*. ``steps_per_generation``
    defaults to ``gradient_accumulation_steps``; the generation batch
    (``per_device_train_batch_size * num_processes * steps_per_generation`` completions)
    must be divisible by ``num_generations`` (raises ``ValueError`` otherwise, like
    ``GRPOConfig``). Returns ``completions_per_micro_batch`` (all processes),
    ``generation_batch_size``, ``prompts_per_generation``,
    ``micro_batches_per_generation`` (``steps_per_generation``: each micro-batch is one
    forward/backward), ``optimizer_steps_per_generation`` (micro-batches x
    ``num_iterations`` / ``gradient_accumulation_steps``),
    ``completions_per_optimizer_step`` and ``old_logps_computed``: TRL computes old
    log-probs unless ``gradient_accumulation_steps`` is a multiple of
    ``steps_per_generation * num_iterations`` (and vLLM's importance-sampling correction
    is off); when it skips them, every ratio is exactly 1.
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
            f"generation_batch_size ({gen_batch} = per_device_train_batch_size {bs} x "
            f"num_processes {nproc} x steps_per_generation {spg}) must be divisible "
            f"by num_generations ({g})"
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
    """The reward statistics TRL 1.16.0 logs for ``rewards_per_func`` of shape
    ``(N, K)``.

    ``rewards/<k>/std``: the batch std (ddof 1) of function ``k`` over *all*
    completions; ``reward_std``: the batch std of the weighted sum;
    ``frac_reward_zero_std``: the fraction of completions whose *group* has zero std of
    the weighted sum. A function can vary across groups (``rewards/<k>/std`` > 0) while
    every group is constant (``frac_reward_zero_std`` = 1, every advantage 0); and
    functions whose weighted sum is constant give ``reward_std`` = 0 although each of
    them varies. Also returns ``advantages``.
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
    """Four ways a DPO log shows ``loss`` 0.6931, computed on the book's pairs, with the
    ``grad_norm`` each gives.

    - ``step 0`` (policy = reference): loss ln 2, gradient non-zero: expected, training
      has not started;
    - ``no gradient reaches the policy`` (e.g. PEFT + gradient checkpointing without
      input gradients, or a frozen model): the loss is computed, but the parameters
      receive nothing: ``grad_norm`` 0, loss stays ln 2;
    - ``beta -> 0``: the logits ``beta * m`` are 0 whatever the policy does; loss ln 2,
      gradient proportional to beta;
    - ``policy identical to reference`` (the reference *is* the policy, e.g. a shared
      module that trains too): every step restarts at margin 0.
    Each row: ``case`` (in the reader's language), ``loss``, ``grad_norm`` (norm of d
    loss / d policy log-probs; 0 for the case where the parameters get no gradient),
    ``ln2_gap`` ``|loss - ln 2|``.
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
