"""Chapter 10: the GRPO variants and the DPO family under TRL 1.16.0's names, each run on one shared toy batch.

- :func:`rloo_loss`: RLOO exactly as TRL's ``RLOOTrainer`` computes it (checked against ``trl_rloo.json``, made by
  TRL's own trainer; a separate trainer, not a GRPO option): the
  k1 KL summed over each sequence is subtracted from its reward (``beta`` 0.05), leave-one-out baseline, one
  *sequence-level* ratio ``exp(sum_t (new - old))``, clipped, and a mean over sequences.
- :data:`GRPO_VARIANTS`: each paper's change and the TRL config that reproduces its setting (copy-paste ready);
  :func:`run_grpo_variants` runs every row on :func:`toy_batch` with :func:`dpo_grpo.trl_exact.grpo.grpo_loss` (or
  :func:`rloo_loss`) and returns the loss, the gradient and the variant's own metric.
- :data:`DPO_VARIANTS` and :func:`run_dpo_variants`: the ``DPOConfig.loss_type`` values on one toy batch of pairs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validation as v
from ..trl_exact.advantages import reward_advantages
from ..trl_exact.dpo import dpo_loss
from ..trl_exact.grpo import grpo_loss

__all__ = [
    "toy_batch",
    "variant_loss",
    "rloo_loss",
    "reinforcepp_baseline_advantages",
    "RLOOOutput",
    "Variant",
    "GRPO_VARIANTS",
    "DPO_VARIANTS",
    "config_code",
    "Geometry",
    "rollout_geometry",
    "PREFERENCE_TRAINERS",
    "simpo_target_margin",
    "TRL_CONFIG_CLASSES",
    "run_grpo_variants",
    "run_dpo_variants",
    "dpo_toy_pairs",
]


def toy_batch(drift: float = 1.0, seed: int = 0, push: float = 0.22) -> dict:
    """Two prompts x four answers, ragged lengths (2 to 6 tokens), rewards ``[0.2, 0.8, 1.4, 0.6]`` and
    ``[0, 0, 1, 0]``; ``old`` log-probs (sampling policy), ``new`` = ``old`` + ``drift`` x (``push`` in the direction
    of each answer's advantage + seeded noise of std 0.12), ``ref`` a little below ``old``. ``drift=1`` is a stale
    batch (token ratios between about 0.7 and 1.5, so the clips and gates act); :func:`calibrated_drift` gives the
    drift of one small step (:mod:`~dpo_grpo.chapters.variant_directions`)."""
    drift = v.scalar(drift, "drift", nonnegative=True)
    push = v.scalar(push, "push", nonnegative=True)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    rewards = np.array([[0.2, 0.8, 1.4, 0.6], [0.0, 0.0, 1.0, 0.0]])
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
    metrics: dict  #: TRL's clip_ratio/low_mean, clip_ratio/high_mean, clip_ratio/region_mean (per sequence)


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
    """TRL 1.16.0 ``RLOOTrainer``: ``r_i - beta * sum_t (old_it - ref_it)`` (k1, from the sampling policy), baseline
    the mean of the *other* answers of the group, optional batch normalisation (``normalize_advantages``), sequence
    ratio ``rho_i = exp(sum_t (new_it - old_it))``, loss ``mean_i -min(rho_i A_i, clip(rho_i, 1-eps, 1+eps_high)
    A_i)``. The gradient w.r.t. each token log-prob of answer ``i`` is the gradient w.r.t. ``log rho_i``."""
    new = v.as_float_array(new_logps, "new_logps", ndim=2)
    old = v.as_float_array(old_logps, "old_logps", ndim=2)
    v.same_shape(new_logps=new, old_logps=old)
    m = v.binary_mask(mask, "mask", new.shape).astype(float)
    r = v.as_float_array(rewards, "rewards").reshape(-1)
    g = v.integer(num_generations, "num_generations", minimum=2)
    if r.size != new.shape[0] or r.size % g:
        raise ValueError(
            f"rewards must hold one reward per row of new_logps ({new.shape[0]}), in groups of "
            f"num_generations={g}"
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


class Variant(NamedTuple):
    """One row of the variants table: ``name``, ``cite`` (bibliography key), ``changes`` (what it changes in the
    objective), ``trainer`` (TRL class), ``config`` (keyword arguments of that config, copy-paste ready),
    ``extra`` (what the config cannot express, or needs besides it; "" when nothing)."""

    name: str
    cite: str
    changes: str
    trainer: str
    config: dict
    extra: str = ""


GRPO_VARIANTS = (
    Variant(
        "GRPO",
        "shao2024deepseekmath",
        "group-standardised advantage, token-level clip, k3 KL in the loss, "
        "per-answer token mean",
        "GRPOConfig",
        dict(
            loss_type="grpo",
            beta=0.04,
            epsilon=0.2,
            scale_rewards="group",
            num_generations=64,
            max_completion_length=1024,
            per_device_train_batch_size=16,
            gradient_accumulation_steps=64,
        ),
        "one process: 1024 answers (16 questions x 64) per rollout and per update; "
        "on N processes divide gradient_accumulation_steps by N",
    ),
    Variant(
        "Dr. GRPO",
        "liu2025drgrpo",
        "no std division, constant length normaliser B x max_completion_length",
        "GRPOConfig",
        dict(loss_type="dr_grpo", scale_rewards="none", beta=0.0),
    ),
    Variant(
        "DAPO",
        "yu2025dapo",
        "clip-higher against entropy collapse, token-level mean over the batch, no KL, "
        "overlong shaping, dynamic sampling",
        "GRPOConfig",
        dict(
            loss_type="dapo",
            epsilon=0.2,
            epsilon_high=0.28,
            beta=0.0,
            num_generations=16,
            max_completion_length=20480,
            mask_truncated_completions=True,
            per_device_train_batch_size=16,
            gradient_accumulation_steps=32,
            steps_per_generation=512,
        ),
        "one process: 8192 answers (512 prompts x 16) per rollout, 512 per update, "
        "16 updates per rollout; on N processes divide both step counts by N; "
        "reward_funcs += [get_soft_overlong_punishment(max_completion_len=20480, "
        "soft_punish_cache=4096)]; dynamic sampling (refill the batch with non-zero-std "
        "groups) is not a GRPOConfig option",
    ),
    Variant(
        "GSPO",
        "zheng2025gspo",
        "one ratio per answer (geometric mean of token ratios), clipped per answer "
        "with a narrow band",
        "GRPOConfig",
        dict(
            importance_sampling_level="sequence",
            loss_type="grpo",
            beta=0.0,
            epsilon=3e-4,
            epsilon_high=4e-4,
            gradient_accumulation_steps=1,
            steps_per_generation=4,
        ),
    ),
    Variant(
        "LUSPO",
        "liu2026luspo",
        "GSPO with each answer's loss scaled by its length (removes GSPO's bias "
        "towards short answers)",
        "GRPOConfig",
        dict(
            loss_type="luspo",
            importance_sampling_level="sequence",
            beta=0.0,
            epsilon=3e-4,
            epsilon_high=4e-4,
            gradient_accumulation_steps=1,
            steps_per_generation=4,
        ),
        "clip band taken from GSPO's setting",
    ),
    Variant(
        "CISPO",
        "minimax2025m1",
        "clips the importance weight (detached) instead of the surrogate, so every "
        "token keeps a gradient; upper bound only",
        "GRPOConfig",
        dict(loss_type="cispo", epsilon_high=5.0, beta=0.0),
        "epsilon_high=5.0 is ScaleRL's value (khatri2025scalerl)",
    ),
    Variant(
        "SAPO",
        "gao2025sapo",
        "a smooth sigmoid gate of the ratio instead of a hard clip, separate "
        "temperatures for A > 0 and A < 0",
        "GRPOConfig",
        dict(
            loss_type="sapo",
            sapo_temperature_pos=1.0,
            sapo_temperature_neg=1.05,
            beta=0.0,
        ),
    ),
    Variant(
        "VESPO",
        "shen2026vespo",
        "a Gamma-shaped weight of the sequence ratio (no length normalisation) "
        "replaces the clip",
        "GRPOConfig",
        dict(
            loss_type="vespo",
            vespo_k_pos=2.0,
            vespo_lambda_pos=3.0,
            vespo_k_neg=3.0,
            vespo_lambda_neg=2.0,
            beta=0.0,
        ),
    ),
    Variant(
        "REINFORCE++ (approx.)",
        "hu2025reinforcepp",
        "group mean baseline, then a division by a batch std, token-level clip; "
        "TRL's 'batch' divides by the std of the raw rewards (PPO-Lite), "
        "REINFORCE++-baseline by the std of the group-centred advantages",
        "GRPOConfig",
        dict(scale_rewards="batch", loss_type="dapo", beta=0.0),
        "not exact: see reinforcepp_baseline_advantages; REINFORCE++-baseline "
        "puts its KL in the loss (set beta), plain REINFORCE++ a k1 KL in the "
        "reward per token, which GRPOConfig cannot express",
    ),
    Variant(
        "RLOO",
        "ahmadian2024rloo",
        "leave-one-out baseline, k1 KL summed per answer subtracted from the "
        "reward; the paper: on-policy REINFORCE, no ratio, no clip; TRL's "
        "RLOOTrainer adds one ratio per answer (product of token ratios) with "
        "PPO's clip, mean over answers",
        "RLOOConfig",
        dict(beta=0.05, epsilon=0.2, num_generations=4, normalize_advantages=False),
        "a separate trainer: RLOOTrainer(model, reward_funcs, args=RLOOConfig(...)); "
        "one update per rollout (the default) is the paper's on-policy estimator",
    ),
)

#: GRPOConfig keywords that only describe the run, not the loss on one batch
_RUN_ONLY = {
    "num_generations",
    "max_completion_length",
    "gradient_accumulation_steps",
    "steps_per_generation",
    "mask_truncated_completions",
    "per_device_train_batch_size",
    "scale_rewards",
}


def config_code(variant: Variant) -> str:
    """The TRL 1.16.0 config of ``variant`` as Python source, e.g. ``GRPOConfig(loss_type="dapo", ...)``."""
    if not isinstance(variant, Variant):
        raise TypeError(f"variant must be a Variant, got {type(variant).__name__}")
    args = ", ".join(f"{k}={v!r}" for k, v in variant.config.items()).replace("'", '"')
    return f"{variant.trainer}({args})"


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
    """One row of :data:`GRPO_VARIANTS` on ``batch``: ``advantages`` (B,), ``loss``, ``grad`` (d loss / d new, (B, T))
    and ``metric`` (TRL's name, value), through :func:`rloo_loss` or :func:`grpo_loss` with the row's config."""
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
    scale = var.config.get("scale_rewards", "group")
    adv = reward_advantages(
        np.asarray(b["rewards"]).reshape(-1, 1), g, scale_rewards=scale
    ).advantages
    kw = {k: val for k, val in var.config.items() if k not in _RUN_ONLY}
    kw.setdefault("beta", 0.0)
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
    """Every row of :data:`GRPO_VARIANTS` on ``batch`` (default :func:`toy_batch`), one update on stale samples.

    One dict per variant: ``name``, ``config``, ``advantages`` (B,), ``loss``, ``grad`` (B, T), ``grad_norm``,
    ``push`` (B,): ``-sum_t d loss / d new`` per answer (positive: a descent step raises the answer), and ``metric``
    with its TRL name (``clip_ratio/region_mean``, ``cispo_clip_ratio``, ``vespo/phi_seq_mean`` or, for SAPO, the
    mean soft-gate weight is not logged by TRL: ``None``).
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
    """Three pairs of sequence log-probs (policy after some training, reference) and their token counts: pair 0
    ranked right, pair 1 ranked wrong, pair 2 right with a large margin and a long chosen answer."""
    return {
        "policy_chosen": np.array([-12.0, -20.0, -30.0]),
        "policy_rejected": np.array([-14.0, -18.5, -45.0]),
        "ref_chosen": np.array([-12.5, -19.0, -33.0]),
        "ref_rejected": np.array([-13.0, -19.0, -40.0]),
        "chosen_lengths": np.array([10, 16, 40]),
        "rejected_lengths": np.array([12, 14, 30]),
    }


DPO_VARIANTS = (
    Variant(
        "DPO",
        "rafailov2023dpo",
        "-log sigmoid(beta m)",
        "DPOConfig",
        dict(loss_type="sigmoid", beta=0.1),
    ),
    Variant(
        "SLiC (hinge)",
        "zhao2023slic",
        "hinge max(0, 1 - beta m): no gradient once the margin passes 1/beta",
        "DPOConfig",
        dict(loss_type="hinge", beta=0.1),
    ),
    Variant(
        "IPO",
        "azar2023ipo",
        "squared loss (m / length - 1 / (2 beta))^2 on length-averaged log-ratios: "
        "a target margin instead of an ever-growing one",
        "DPOConfig",
        dict(loss_type="ipo", beta=0.1),
    ),
    Variant(
        "robust DPO",
        "chowdhury2024robust",
        "unbiased under a label-flip rate label_smoothing",
        "DPOConfig",
        dict(loss_type="robust", beta=0.1, label_smoothing=0.1),
    ),
    Variant(
        "EXO",
        "ji2024exo",
        "reverse-KL matching of the pair distribution (exo_pair)",
        "DPOConfig",
        dict(loss_type="exo_pair", beta=0.1, label_smoothing=1e-3),
    ),
    Variant(
        "NCA",
        "chen2024nca",
        "noise-contrastive: absolute rewards of chosen and rejected, not only their "
        "difference (keeps the chosen likelihood up)",
        "DPOConfig",
        dict(loss_type="nca_pair", beta=0.1),
    ),
    Variant(
        "BCO",
        "jung2024bco",
        "binary classifier on each answer's reward with a running shift",
        "DPOConfig",
        dict(loss_type="bco_pair", beta=0.1),
    ),
    Variant(
        "SPPO (hard)",
        "wu2024sppo",
        "squared distance of each reward to +-1/2 (self-play preference)",
        "DPOConfig",
        dict(loss_type="sppo_hard", beta=0.1),
    ),
    Variant(
        "AOT",
        "melnyk2024aot",
        "optimal transport: sorts the batch's chosen and rejected log-ratios and "
        "matches them by rank",
        "DPOConfig",
        dict(loss_type="aot", beta=0.1),
    ),
    Variant(
        "APO-zero",
        "doosterlinck2024apo",
        "anchored: pushes the chosen reward up and the rejected down, each "
        "against zero",
        "DPOConfig",
        dict(loss_type="apo_zero", beta=0.1),
    ),
    Variant(
        "APO-down",
        "doosterlinck2024apo",
        "anchored: pushes both down, the rejected more",
        "DPOConfig",
        dict(loss_type="apo_down", beta=0.1),
    ),
    Variant(
        "DiscoPOP",
        "lu2024discopop",
        "a discovered blend of logistic and exponential losses, gated by the "
        "margin (discopop_tau)",
        "DPOConfig",
        dict(loss_type="discopop", beta=0.1, discopop_tau=0.05),
    ),
    Variant(
        "DPO + SFT (RPO-style)",
        "pang2024irpo",
        "adds an NLL on the chosen answers, averaged over all chosen tokens of the batch",
        "DPOConfig",
        dict(loss_type=["sigmoid", "sft"], loss_weights=[1.0, 1.0], beta=0.1),
    ),
)

#: The preference losses TRL runs with their own trainer, not a DPOConfig.loss_type;
#: ``extra`` names the trainer
PREFERENCE_TRAINERS = (
    Variant(
        "KTO",
        "ethayarajh2024kto",
        "single answers labelled desirable or undesirable, not pairs; a "
        "prospect-theory value function",
        "KTOConfig",
        dict(beta=0.1, desirable_weight=1.0, undesirable_weight=1.0),
        "trl.KTOTrainer with an unpaired dataset",
    ),
    Variant(
        "SimPO",
        "meng2024simpo",
        "no reference model; the reward is beta x the length-averaged log-prob, "
        "with a target margin gamma",
        "CPOConfig",
        dict(loss_type="simpo", cpo_alpha=0.0, beta=2.0, simpo_gamma=1.0),
        "trl.experimental.cpo.CPOTrainer",
    ),
    Variant(
        "ORPO",
        "hong2024orpo",
        "no reference model; an odds-ratio term added to the SFT loss on the "
        "chosen answer",
        "ORPOConfig",
        dict(beta=0.1),
        "trl.experimental.orpo.ORPOTrainer",
    ),
)


def simpo_target_margin(variant: Variant) -> float:
    """The target margin, in length-averaged log-prob (nats per token), that a
    ``CPOConfig(loss_type="simpo")`` sets. TRL 1.16.0's loss is
    ``-log sigmoid(beta * (avg_logp_chosen - avg_logp_rejected) - simpo_gamma)``,
    so the margin is ``simpo_gamma / beta`` (``CPOConfig`` defaults: ``beta`` 0.1,
    ``simpo_gamma`` 0.5)."""
    if not isinstance(variant, Variant) or variant.config.get("loss_type") != "simpo":
        raise TypeError('variant must be a CPOConfig Variant with loss_type="simpo"')
    return variant.config.get("simpo_gamma", 0.5) / variant.config.get("beta", 0.1)


#: Where each config class of the tables lives in TRL 1.16.0
TRL_CONFIG_CLASSES = {
    "GRPOConfig": "trl.GRPOConfig",
    "RLOOConfig": "trl.RLOOConfig",
    "DPOConfig": "trl.DPOConfig",
    "KTOConfig": "trl.KTOConfig",
    "CPOConfig": "trl.experimental.cpo.CPOConfig",
    "ORPOConfig": "trl.experimental.orpo.ORPOConfig",
}

_LENGTHS = {"ipo": (True, True), "sigmoid_norm": (True, True), "sft": (True, False)}


def run_dpo_variants(pairs=None) -> list:
    """Every row of :data:`DPO_VARIANTS` on ``pairs`` (default :func:`dpo_toy_pairs`): ``name``, ``config``,
    ``loss``, ``losses`` (per pair), ``grad_chosen``, ``grad_rejected`` (d loss / d policy log-probs) and TRL's
    ``rewards/margins``."""
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
