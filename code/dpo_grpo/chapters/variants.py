"""Chapter 10: the GRPO variants and the DPO family under TRL 1.16.0's names, each run
on one shared toy batch.

- :func:`rloo_loss`: RLOO exactly as TRL's ``RLOOTrainer`` computes it (checked against
  ``trl_rloo.json``, made by TRL's own trainer; a separate trainer, not a GRPO option):
  the k1 KL summed over each sequence is subtracted from its reward (``beta`` 0.05),
  leave-one-out baseline, one *sequence-level* ratio ``exp(sum_t (new - old))``,
  clipped, and a mean over sequences.
- :data:`GRPO_VARIANTS` (defined with the other rows in
  :mod:`~dpo_grpo.chapters.variant_rows`, re-exported here): each paper's change and the
  TRL config that reproduces its setting (copy-paste ready); :func:`run_grpo_variants`
  runs every row on :func:`toy_batch` with :func:`dpo_grpo.trl_exact.grpo.grpo_loss` (or
  :func:`rloo_loss`) and returns the loss, the gradient and the variant's own metric.
  :func:`trl_grpo_options` resolves a row's config as TRL does (its defaults for what
  the row leaves out), so the numbers are those of the printed config.
- :func:`advantage_scalings` and :func:`group_shares`: how TRL's ``scale_rewards``
  values and REINFORCE++-baseline share the weight between the toy batch's groups,
  whose rewards differ in spread.
- :data:`DPO_VARIANTS` and :func:`run_dpo_variants`: the ``DPOConfig.loss_type`` values
  on one toy batch of pairs.
- :func:`rollout_geometry` and :func:`simpo_target_margin`: what TRL derives from a
  row's config.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validation as v
from ..trl_exact.advantages import reward_advantages
from ..trl_exact.dpo import dpo_loss
from ..trl_exact.grpo import grpo_loss
from .parity import TRL_GRPO_DEFAULTS
from .variant_rows import (
    CPU_CONFIG,
    DPO_VARIANTS,
    GRPO_VARIANTS,
    PREFERENCE_TRAINERS,
    TRL_CONFIG_CLASSES,
    Variant,
    config_code,
)

__all__ = [
    "CPU_CONFIG",
    "DPO_VARIANTS",
    "GRPO_VARIANTS",
    "PREFERENCE_TRAINERS",
    "TRL_CONFIG_CLASSES",
    "Geometry",
    "RLOOOutput",
    "Variant",
    "advantage_scalings",
    "config_code",
    "dpo_toy_pairs",
    "group_shares",
    "reinforcepp_baseline_advantages",
    "rloo_loss",
    "rollout_geometry",
    "run_dpo_variants",
    "run_grpo_variants",
    "simpo_target_margin",
    "toy_batch",
    "trl_grpo_options",
    "variant_loss",
]


def toy_batch(drift: float = 1.0, seed: int = 0, push: float = 0.22) -> dict:
    """Two prompts x four answers, ragged lengths (2 to 6 tokens), rewards
    ``[0.6, 0.8, 0.9, 0.7]`` (close scores, sample std 0.13) and ``[0, 0, 1, 0]`` (a
    pass/fail check, std 0.5): spreads that differ, so that dividing each group by its
    std (``scale_rewards="group"``) or not changes the direction of the update (with
    equal spreads the two are parallel). ``old`` log-probs (sampling policy),
    ``new`` = ``old`` + ``drift`` x (``push`` in the direction of each answer's
    advantage + seeded noise of std 0.12), ``ref`` a little below ``old``. ``drift=1``
    is a stale batch (token ratios between about 0.7 and 1.5, so the clips and gates
    act); :func:`~dpo_grpo.chapters.variant_directions.calibrated_drift` gives the drift
    of one small step."""
    drift = v.scalar(drift, "drift", nonnegative=True)
    push = v.scalar(push, "push", nonnegative=True)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    rewards = np.array([[0.6, 0.8, 0.9, 0.7], [0.0, 0.0, 1.0, 0.0]])
    lengths = np.array([5, 2, 4, 3, 6, 3, 2, 5])
    width = int(lengths.max())
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(float)
    old = np.log(rng.uniform(0.1, 0.6, (8, width)))
    ref = old - 0.05
    direction = np.sign(reward_advantages(rewards.reshape(-1, 1), 4).advantages)
    new = old + drift * (push * direction[:, None] + rng.normal(0.0, 0.12, old.shape))
    return {
        "rewards": rewards,
        "lengths": lengths,
        "mask": mask,
        "old": old,
        "new": new,
        "ref": ref,
        "num_generations": 4,
        "drift": drift,
        "push": push,
    }


class RLOOOutput(NamedTuple):
    loss: float
    grad: np.ndarray  #: d loss / d new (B, T), zero at padding
    advantages: np.ndarray  #: (B,) leave-one-out advantages of the KL-penalised rewards
    rewards: np.ndarray  #: (B,) rewards - beta * sum_t (old - ref)
    ratio: np.ndarray  #: (B,) sequence ratio exp(sum_t (new - old))
    #: TRL's clip_ratio/low_mean, clip_ratio/high_mean, clip_ratio/region_mean (per
    #: sequence)
    metrics: dict


def rloo_loss(
    new_logps,
    old_logps,
    ref_logps,
    rewards,
    mask,
    num_generations,
    *,
    beta=0.05,
    epsilon=0.2,
    epsilon_high=None,
    normalize_advantages=False,
) -> RLOOOutput:
    """TRL 1.16.0 ``RLOOTrainer``: ``r_i - beta * sum_t (old_it - ref_it)`` (k1, from
    the sampling policy), baseline the mean of the *other* answers of the group,
    optional batch normalisation (``normalize_advantages``), sequence ratio
    ``rho_i = exp(sum_t (new_it - old_it))``, loss
    ``mean_i -min(rho_i A_i, clip(rho_i, 1-eps, 1+eps_high) A_i)``. The gradient w.r.t.
    each token log-prob of answer ``i`` is the gradient w.r.t. ``log rho_i``."""
    new = v.as_float_array(new_logps, "new_logps", ndim=2)
    old = v.as_float_array(old_logps, "old_logps", ndim=2)
    v.same_shape(new_logps=new, old_logps=old)
    m = v.binary_mask(mask, "mask", new.shape).astype(float)
    r = v.as_float_array(rewards, "rewards").reshape(-1)
    g = v.integer(num_generations, "num_generations", minimum=2)
    if r.size != new.shape[0] or r.size % g:
        raise ValueError(
            f"rewards must hold one reward per row of new_logps ({new.shape[0]}), in "
            f"groups of num_generations={g}"
        )
    beta = v.scalar(beta, "beta", nonnegative=True)
    eps_low = v.scalar(epsilon, "epsilon", positive=True)
    eps_high = (
        eps_low
        if epsilon_high is None
        else v.scalar(epsilon_high, "epsilon_high", positive=True)
    )
    if beta:
        ref = v.as_float_array(ref_logps, "ref_logps", ndim=2)
        v.same_shape(new_logps=new, ref_logps=ref)
        r = r - beta * ((old - ref) * m).sum(axis=1)
    grouped = r.reshape(-1, g)
    baseline = (grouped.sum(axis=1, keepdims=True) - grouped) / (g - 1)
    adv = (grouped - baseline).reshape(-1)
    if normalize_advantages:
        adv = (adv - adv.mean()) / (np.std(adv, ddof=1) + 1e-4)
    log_ratio = ((new - old) * m).sum(axis=1)
    c1 = np.exp(log_ratio)
    c2 = np.clip(c1, 1 - eps_low, 1 + eps_high)
    l1, l2 = c1 * adv, c2 * adv
    loss = float(np.mean(-np.minimum(l1, l2)))
    inside = (c1 >= 1 - eps_low) & (c1 <= 1 + eps_high)
    d = np.where(
        l1 < l2,
        -adv * c1,
        np.where(l1 > l2, -adv * c1 * inside, -0.5 * adv * c1 * (1 + inside)),
    )
    grad = (d / r.size)[:, None] * m
    low = (c1 < 1 - eps_low) & (adv < 0)
    high = (c1 > 1 + eps_high) & (adv > 0)
    metrics = {
        "clip_ratio/low_mean": float(low.mean()),
        "clip_ratio/high_mean": float(high.mean()),
        "clip_ratio/region_mean": float((low | high).mean()),
    }
    return RLOOOutput(loss, grad, adv, r, c1, metrics)


def reinforcepp_baseline_advantages(rewards, num_generations) -> np.ndarray:
    """REINFORCE++-baseline's advantage (hu2025reinforcepp): subtract each group's mean
    reward, then divide by the std of these centred advantages over the whole batch.
    TRL's ``scale_rewards="batch"`` divides by the std of the *raw* rewards instead,
    which also counts the spread between prompts' mean rewards, so it is smaller."""
    r = v.as_float_array(rewards, "rewards").reshape(-1)
    g = v.integer(num_generations, "num_generations", minimum=2)
    if r.size % g:
        raise ValueError(f"rewards ({r.size}) must come in groups of {g}")
    grouped = r.reshape(-1, g)
    centred = (grouped - grouped.mean(axis=1, keepdims=True)).reshape(-1)
    return centred / (np.std(centred, ddof=1) + 1e-4)


def group_shares(values, num_generations) -> np.ndarray:
    """Each group's share of ``sum |values|`` (one value per answer, in groups of
    ``num_generations``): how an advantage vector, or a gradient's push per answer,
    shares its weight between prompts."""
    x = np.abs(v.as_float_array(values, "values").reshape(-1))
    g = v.integer(num_generations, "num_generations", minimum=1)
    if x.size % g:
        raise ValueError(f"values ({x.size}) must come in groups of {g}")
    per_group = x.reshape(-1, g).sum(axis=1)
    total = per_group.sum()
    return per_group / total if total > 0 else np.full(per_group.shape, np.nan)


def advantage_scalings(rewards, num_generations) -> dict:
    """The advantages of one batch under each scaling section 10.4 compares: TRL's
    ``scale_rewards`` ``"group"`` (GRPO's, TRL's default), ``"none"`` (Dr. GRPO),
    ``"batch"`` (the REINFORCE++ row) and REINFORCE++-baseline's
    (:func:`reinforcepp_baseline_advantages`).

    Returns ``{"std": each group's sample std (TRL's torch.std), "scalings": {name:
    {"advantages", "cosine" (to "group"'s), "group_shares"}}}``. The last three are
    the group-centred rewards times one number for the whole batch, so they are
    parallel to each other; against ``"group"`` they differ in direction unless every
    group has the same std."""
    r = v.as_float_array(rewards, "rewards").reshape(-1)
    g = v.integer(num_generations, "num_generations", minimum=2)
    if r.size % g:
        raise ValueError(f"rewards ({r.size}) must come in groups of {g}")
    adv = {
        s: reward_advantages(r.reshape(-1, 1), g, scale_rewards=s).advantages
        for s in ("group", "none", "batch")
    }
    adv["REINFORCE++-baseline"] = reinforcepp_baseline_advantages(r, g)
    ref = adv["group"]
    out = {}
    for name, a in adv.items():
        norms = np.linalg.norm(a) * np.linalg.norm(ref)
        out[name] = {
            "advantages": a,
            "cosine": float(a @ ref / norms) if norms > 0 else float("nan"),
            "group_shares": group_shares(a, g),
        }
    return {"std": r.reshape(-1, g).std(axis=1, ddof=1), "scalings": out}


#: GRPOConfig keywords that only describe the run, not the loss on one batch
_RUN_ONLY = {
    "num_generations",
    "num_iterations",
    "max_completion_length",
    "gradient_accumulation_steps",
    "steps_per_generation",
    "mask_truncated_completions",
    "per_device_train_batch_size",
    "scale_rewards",
    "std_ddof",
}


def trl_grpo_options(variant: Variant) -> dict:
    """The options TRL 1.16.0 runs a GRPOConfig row with: ``variant.config`` over TRL's
    defaults (:data:`~dpo_grpo.chapters.parity.TRL_GRPO_DEFAULTS`; ``beta`` 0,
    ``loss_type`` "dapo", ``use_bias_correction_kl`` True, ...). Returns
    ``scale_rewards`` and ``grpo_loss``, the keywords of
    :func:`~dpo_grpo.trl_exact.grpo.grpo_loss` (the options it leaves to its own
    defaults, ``delta`` and the SAPO/VESPO ones, have TRL's defaults)."""
    if not isinstance(variant, Variant) or variant.trainer != "GRPOConfig":
        raise TypeError("variant must be a GRPOConfig Variant")
    c = {**TRL_GRPO_DEFAULTS, **variant.config}
    kw = {k: val for k, val in c.items() if k not in _RUN_ONLY}
    return {"scale_rewards": c["scale_rewards"], "grpo_loss": kw}


#: TRL 1.16.0's defaults for the batch geometry of its online trainers' configs
_GEOMETRY_DEFAULTS = {
    "GRPOConfig": dict(
        num_generations=8,
        per_device_train_batch_size=8,
        gradient_accumulation_steps=1,
        num_iterations=1,
    ),
    "RLOOConfig": dict(
        num_generations=2,
        per_device_train_batch_size=8,
        gradient_accumulation_steps=1,
        num_iterations=1,
    ),
}


class Geometry(NamedTuple):
    """How a config cuts one rollout into optimiser updates."""

    completions_per_rollout: int  #: TRL's generation_batch_size
    prompts_per_rollout: int  #: generation_batch_size / num_generations
    completions_per_update: int  #: per_device_train_batch_size x processes x grad. acc.
    updates_per_rollout: float  #: steps_per_generation x num_iterations / grad. acc.


def rollout_geometry(variant: Variant, num_processes: int = 1) -> Geometry:
    """The batch geometry TRL 1.16.0 derives from ``variant.config`` on
    ``num_processes`` processes, by the rule of ``GRPOConfig.__post_init__``:
    ``generation_batch_size = per_device_train_batch_size x processes x
    steps_per_generation`` (``steps_per_generation`` defaults to
    ``gradient_accumulation_steps``), and it must hold whole groups of
    ``num_generations``, else ``ValueError`` with TRL's message. A step of TRL's
    buffer is one micro-batch, so a rollout feeds ``steps_per_generation x
    num_iterations / gradient_accumulation_steps`` optimiser updates (1: on-policy)."""
    if not isinstance(variant, Variant) or variant.trainer not in _GEOMETRY_DEFAULTS:
        raise TypeError("variant must be a GRPOConfig or RLOOConfig Variant")
    c = {**_GEOMETRY_DEFAULTS[variant.trainer], **variant.config}
    procs = v.integer(num_processes, "num_processes", minimum=1)
    per_step = c["per_device_train_batch_size"] * procs
    accum = c["gradient_accumulation_steps"]
    if c.get("generation_batch_size") is not None:
        if c["generation_batch_size"] % per_step:
            raise ValueError(
                f"generation_batch_size ({c['generation_batch_size']}) must be "
                f"divisible by the global batch size ({per_step})."
            )
        spg = c["generation_batch_size"] // per_step
    else:
        spg = c.get("steps_per_generation") or accum
    gen = per_step * spg
    if gen % c["num_generations"]:
        raise ValueError(
            f"generation_batch_size ({gen}) must be divisible by num_generations "
            f"({c['num_generations']})."
        )
    return Geometry(
        gen,
        gen // c["num_generations"],
        per_step * accum,
        spg * c["num_iterations"] / accum,
    )


def variant_loss(var: Variant, batch: dict) -> dict:
    """One row of :data:`GRPO_VARIANTS` on ``batch``: ``advantages`` (B,), ``loss``,
    ``grad`` (d loss / d new, (B, T)) and ``metric`` (TRL's name, value), through
    :func:`rloo_loss` or :func:`grpo_loss` with the row's config as TRL resolves it
    (:func:`trl_grpo_options`). The batch is one whole micro-batch: ``grpo_loss``
    normalises by its own width and token count, not the config's geometry."""
    if not isinstance(var, Variant):
        raise TypeError(f"var must be a Variant, got {type(var).__name__}")
    b, g = batch, batch["num_generations"]
    if var.trainer == "RLOOConfig":
        out = rloo_loss(
            b["new"],
            b["old"],
            b["ref"],
            b["rewards"],
            b["mask"],
            g,
            beta=var.config["beta"],
            epsilon=var.config["epsilon"],
        )
        metric = ("clip_ratio/region_mean", out.metrics["clip_ratio/region_mean"])
        return {
            "advantages": np.asarray(out.advantages),
            "loss": out.loss,
            "grad": out.grad,
            "metric": metric,
        }
    opts = trl_grpo_options(var)
    adv = reward_advantages(
        np.asarray(b["rewards"]).reshape(-1, 1), g, scale_rewards=opts["scale_rewards"]
    ).advantages
    kw = opts["grpo_loss"]
    ref = b["ref"] if kw["beta"] else None
    out = grpo_loss(
        b["new"],
        b["old"],
        ref,
        adv,
        b["mask"],
        max_completion_length=b["mask"].shape[1],
        **kw,
    )
    names = ("clip_ratio/region_mean", "cispo_clip_ratio", "vespo/phi_seq_mean")
    name = next((k for k in names if k in out.metrics), None)
    return {
        "advantages": np.asarray(adv),
        "loss": out.loss,
        "grad": out.grad,
        "metric": (name, out.metrics[name] if name else None),
    }


def run_grpo_variants(batch=None) -> list:
    """Every row of :data:`GRPO_VARIANTS` on ``batch`` (default :func:`toy_batch`), one
    update on stale samples.

    One dict per variant: ``name``, ``config``, ``advantages`` (B,), ``loss``, ``grad``
    (B, T), ``grad_norm``, ``push`` (B,): ``-sum_t d loss / d new`` per answer
    (positive: a descent step raises the answer), and ``metric`` with its TRL name
    (``clip_ratio/region_mean``, ``cispo_clip_ratio``, ``vespo/phi_seq_mean`` or, for
    SAPO, the mean soft-gate weight is not logged by TRL: ``None``).
    """
    b = toy_batch() if batch is None else batch
    rows = []
    for var in GRPO_VARIANTS:
        out = variant_loss(var, b)
        rows.append(
            {
                "name": var.name,
                "config": config_code(var),
                **out,
                "grad_norm": float(np.linalg.norm(out["grad"])),
                "push": -out["grad"].sum(axis=1),
            }
        )
    return rows


def dpo_toy_pairs() -> dict:
    """Three pairs of sequence log-probs (policy after some training, reference) and
    their token counts: pair 0 ranked right, pair 1 ranked wrong, pair 2 right with a
    large margin and a long chosen answer."""
    return {
        "policy_chosen": np.array([-12.0, -20.0, -30.0]),
        "policy_rejected": np.array([-14.0, -18.5, -45.0]),
        "ref_chosen": np.array([-12.5, -19.0, -33.0]),
        "ref_rejected": np.array([-13.0, -19.0, -40.0]),
        "chosen_lengths": np.array([10, 16, 40]),
        "rejected_lengths": np.array([12, 14, 30]),
    }


def simpo_target_margin(variant: Variant) -> float:
    """The target margin, in length-averaged log-prob (nats per token), that a
    ``CPOConfig(loss_type="simpo")`` sets. TRL 1.16.0's loss is
    ``-log sigmoid(beta * (avg_logp_chosen - avg_logp_rejected) - simpo_gamma)``,
    so the margin is ``simpo_gamma / beta`` (``CPOConfig`` defaults: ``beta`` 0.1,
    ``simpo_gamma`` 0.5)."""
    if not isinstance(variant, Variant) or variant.config.get("loss_type") != "simpo":
        raise TypeError('variant must be a CPOConfig Variant with loss_type="simpo"')
    return variant.config.get("simpo_gamma", 0.5) / variant.config.get("beta", 0.1)


_LENGTHS = {"ipo": (True, True), "sigmoid_norm": (True, True), "sft": (True, False)}


def run_dpo_variants(pairs=None) -> list:
    """Every row of :data:`DPO_VARIANTS` on ``pairs`` (default :func:`dpo_toy_pairs`):
    ``name``, ``config``, ``loss``, ``losses`` (per pair), ``grad_chosen``,
    ``grad_rejected`` (d loss / d policy log-probs) and TRL's ``rewards/margins``."""
    p = dpo_toy_pairs() if pairs is None else pairs
    rows = []
    for var in DPO_VARIANTS:
        kw = dict(var.config)
        types = (
            kw["loss_type"] if isinstance(kw["loss_type"], list) else [kw["loss_type"]]
        )
        need_c = any(_LENGTHS.get(t, (False, False))[0] for t in types)
        need_r = any(_LENGTHS.get(t, (False, False))[1] for t in types)
        if need_c:
            kw["chosen_lengths"] = p["chosen_lengths"]
        if need_r:
            kw["rejected_lengths"] = p["rejected_lengths"]
        out = dpo_loss(
            p["policy_chosen"],
            p["policy_rejected"],
            p["ref_chosen"],
            p["ref_rejected"],
            **kw,
        )
        rows.append(
            {
                "name": var.name,
                "config": config_code(var),
                "loss": out.loss,
                "losses": out.losses,
                "grad_chosen": out.grad_policy_chosen,
                "grad_rejected": out.grad_policy_rejected,
                "margins": out.metrics["rewards/margins"],
            }
        )
    return rows
