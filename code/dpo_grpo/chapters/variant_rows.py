"""Chapter 10's tables of variants: each paper's change and the TRL 1.16.0 config that
reproduces its setting (copy-paste ready).

- :class:`Variant`: one row; :func:`config_code` prints its config as Python source,
  with ``cpu=True`` plus :data:`CPU_CONFIG`, the two keywords a CPU runtime needs.
- The GRPO row is DeepSeekMath's GRPO as :data:`~dpo_grpo.chapters.parity.PAPER_GRPO`
  states it (chapter 5's paper column), plus the paper's batch geometry.
- :data:`GRPO_VARIANTS` (GRPOConfig options and RLOOConfig), :data:`DPO_VARIANTS` (the
  ``DPOConfig.loss_type`` values) and :data:`PREFERENCE_TRAINERS` (losses with a trainer
  of their own); :data:`TRL_CONFIG_CLASSES` says where each config class lives.

Each row's ``changes``, its ``extra`` where it is prose, and a name with English words
in it (``"SLiC (hinge)"``) are English marked with :func:`~dpo_grpo.i18n.N_`; the
tables layer shows them in the reader's language (:func:`dpo_grpo.tables.label_text`),
and a config's comment goes through :func:`~dpo_grpo.i18n.tr`.
:mod:`~dpo_grpo.chapters.variants` runs the rows on its toy batches.
"""

from __future__ import annotations

from typing import NamedTuple

from ..i18n import N_
from .parity import PAPER_GRPO

__all__ = [
    "CPU_CONFIG",
    "DPO_VARIANTS",
    "GRPO_VARIANTS",
    "PREFERENCE_TRAINERS",
    "TRL_CONFIG_CLASSES",
    "Variant",
    "config_code",
]


class Variant(NamedTuple):
    """One row of the variants table: ``name``, ``cite`` (bibliography key), ``changes``
    (what it changes in the objective), ``trainer`` (TRL class), ``config`` (keyword
    arguments of that config, copy-paste ready), ``extra`` (what the config cannot
    express, or needs besides it; "" when nothing)."""

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
        N_(
            "group-standardised advantage, token-level clip, k3 KL in the loss, "
            "per-answer token mean"
        ),
        "GRPOConfig",
        dict(
            **{
                k: val
                for k, val in PAPER_GRPO.items()
                # std_ddof is not an option; None leaves TRL's default
                if val is not None and k != "std_ddof"
            },
            max_completion_length=1024,
            per_device_train_batch_size=16,
            gradient_accumulation_steps=64,
        ),
        N_(
            "one process: 1024 answers (16 questions x 64) per rollout and per update; "
            "on N processes divide gradient_accumulation_steps by N"
        ),
    ),
    Variant(
        "Dr. GRPO",
        "liu2025drgrpo",
        N_("no std division, constant length normaliser B x max_completion_length"),
        "GRPOConfig",
        dict(loss_type="dr_grpo", scale_rewards="none", beta=0.0),
    ),
    Variant(
        "DAPO",
        "yu2025dapo",
        N_(
            "clip-higher against entropy collapse, token-level mean over the batch, "
            "no KL, overlong shaping, dynamic sampling"
        ),
        "GRPOConfig",
        dict(
            loss_type="dapo",
            epsilon=0.2,
            epsilon_high=0.28,
            beta=0.0,
            scale_rewards="group",
            num_generations=16,
            max_completion_length=20480,
            mask_truncated_completions=True,
            per_device_train_batch_size=16,
            gradient_accumulation_steps=32,
            steps_per_generation=512,
        ),
        N_(
            "one process: 8192 answers (512 prompts x 16) per rollout, 512 per update, "
            "16 updates per rollout; on N processes divide both step counts by N; "
            "reward_funcs += [get_soft_overlong_punishment(max_completion_len=20480, "
            "soft_punish_cache=4096)]; dynamic sampling (refill the batch with "
            "non-zero-std groups) is not a GRPOConfig option"
        ),
    ),
    Variant(
        "GSPO",
        "zheng2025gspo",
        N_(
            "one ratio per answer (geometric mean of token ratios), clipped per answer "
            "with a narrow band"
        ),
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
        N_(
            "GSPO with each answer's loss scaled by its length (removes GSPO's bias "
            "towards short answers)"
        ),
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
        N_("clip band taken from GSPO's setting"),
    ),
    Variant(
        "CISPO",
        "minimax2025m1",
        N_(
            "clips the importance weight (detached) instead of the surrogate, so every "
            "token keeps a gradient; upper bound only"
        ),
        "GRPOConfig",
        dict(loss_type="cispo", epsilon_high=5.0, beta=0.0),
        N_("epsilon_high=5.0 is ScaleRL's value (khatri2025scalerl)"),
    ),
    Variant(
        "SAPO",
        "gao2025sapo",
        N_(
            "a smooth sigmoid gate of the ratio instead of a hard clip, separate "
            "temperatures for A > 0 and A < 0"
        ),
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
        N_(
            "a Gamma-shaped weight of the sequence ratio (no length normalisation) "
            "replaces the clip"
        ),
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
        N_(
            "group mean baseline, then a division by a batch std, token-level clip; "
            "TRL's 'batch' divides by the std of the raw rewards (PPO-Lite), "
            "REINFORCE++-baseline by the std of the group-centred advantages"
        ),
        "GRPOConfig",
        dict(scale_rewards="batch", loss_type="dapo", beta=0.0),
        N_(
            "not exact: see reinforcepp_baseline_advantages; REINFORCE++-baseline "
            "puts its KL in the loss (set beta), plain REINFORCE++ a k1 KL in the "
            "reward per token, which GRPOConfig cannot express"
        ),
    ),
    Variant(
        "RLOO",
        "ahmadian2024rloo",
        N_(
            "leave-one-out baseline, k1 KL summed per answer subtracted from the "
            "reward; the paper: on-policy REINFORCE, no ratio, no clip; TRL's "
            "RLOOTrainer adds one ratio per answer (product of token ratios) with "
            "PPO's clip, mean over answers"
        ),
        "RLOOConfig",
        dict(
            beta=0.05,
            epsilon=0.2,
            num_generations=4,
            num_iterations=1,
            normalize_advantages=False,
        ),
        N_(
            "a separate trainer: RLOOTrainer(model, reward_funcs, "
            "args=RLOOConfig(...)); one update per rollout (the default) is the "
            "paper's on-policy estimator"
        ),
    ),
)


#: What every config of the tables needs on a CPU runtime: TRL 1.16.0's configs default
#: to ``bf16=True``, and building one without a bf16-capable GPU raises "Your setup
#: doesn't support bf16/gpu"; ``bf16=False`` alone builds it, ``use_cpu=True`` also
#: keeps the run on the CPU where a GPU is present
CPU_CONFIG = {"use_cpu": True, "bf16": False}


def config_code(variant: Variant, cpu: bool = False) -> str:
    """The TRL 1.16.0 config of ``variant`` as Python source, e.g.
    ``GRPOConfig(loss_type="dapo", ...)``; ``cpu=True`` appends :data:`CPU_CONFIG`."""
    if not isinstance(variant, Variant):
        raise TypeError(f"variant must be a Variant, got {type(variant).__name__}")
    if not isinstance(cpu, bool):
        raise TypeError(f"cpu must be a bool, got {type(cpu).__name__}")
    config = {**variant.config, **(CPU_CONFIG if cpu else {})}
    args = ", ".join(f"{k}={v!r}" for k, v in config.items()).replace("'", '"')
    return f"{variant.trainer}({args})"


DPO_VARIANTS = (
    Variant(
        "DPO",
        "rafailov2023dpo",
        N_("-log sigmoid(beta m)"),
        "DPOConfig",
        dict(loss_type="sigmoid", beta=0.1),
    ),
    Variant(
        N_("SLiC (hinge)"),
        "zhao2023slic",
        N_("hinge max(0, 1 - beta m): no gradient once the margin passes 1/beta"),
        "DPOConfig",
        dict(loss_type="hinge", beta=0.1),
    ),
    Variant(
        "IPO",
        "azar2023ipo",
        N_(
            "squared loss (m / length - 1 / (2 beta))^2 on length-averaged log-ratios: "
            "a target margin instead of an ever-growing one"
        ),
        "DPOConfig",
        dict(loss_type="ipo", beta=0.1),
    ),
    Variant(
        N_("robust DPO"),
        "chowdhury2024robust",
        N_("unbiased under a label-flip rate label_smoothing"),
        "DPOConfig",
        dict(loss_type="robust", beta=0.1, label_smoothing=0.1),
    ),
    Variant(
        "EXO",
        "ji2024exo",
        N_("reverse-KL matching of the pair distribution (exo_pair)"),
        "DPOConfig",
        dict(loss_type="exo_pair", beta=0.1, label_smoothing=1e-3),
    ),
    Variant(
        "NCA",
        "chen2024nca",
        N_(
            "noise-contrastive: absolute rewards of chosen and rejected, not only "
            "their difference (keeps the chosen likelihood up)"
        ),
        "DPOConfig",
        dict(loss_type="nca_pair", beta=0.1),
    ),
    Variant(
        "BCO",
        "jung2024bco",
        N_(
            "binary classifier on each answer's own reward, the chosen above 0 and the "
            "rejected below; no reward shift (TRL's bco_pair drops the paper's "
            "running mean)"
        ),
        "DPOConfig",
        dict(loss_type="bco_pair", beta=0.1),
    ),
    Variant(
        N_("SPPO (hard)"),
        "wu2024sppo",
        N_("squared distance of each reward to +-1/2 (self-play preference)"),
        "DPOConfig",
        dict(loss_type="sppo_hard", beta=0.1),
    ),
    Variant(
        "AOT",
        "melnyk2024aot",
        N_(
            "optimal transport: sorts the batch's policy margins (chosen minus "
            "rejected log-prob) and the reference's, and matches them by rank; "
            "aot_unpaired sorts the chosen and the rejected log-ratios instead"
        ),
        "DPOConfig",
        dict(loss_type="aot", beta=0.1),
    ),
    Variant(
        N_("APO-zero"),
        "doosterlinck2024apo",
        N_(
            "anchored: pushes the chosen reward up and the rejected down, each "
            "against zero"
        ),
        "DPOConfig",
        dict(loss_type="apo_zero", beta=0.1),
    ),
    Variant(
        N_("APO-down"),
        "doosterlinck2024apo",
        N_("anchored: pushes both down, the rejected more"),
        "DPOConfig",
        dict(loss_type="apo_down", beta=0.1),
    ),
    Variant(
        "DiscoPOP",
        "lu2024discopop",
        N_(
            "a discovered blend of logistic and exponential losses, gated by the "
            "margin (discopop_tau)"
        ),
        "DPOConfig",
        dict(loss_type="discopop", beta=0.1, discopop_tau=0.05),
    ),
    Variant(
        N_("DPO + SFT (RPO-style)"),
        "pang2024irpo",
        N_(
            "adds an NLL on the chosen answers, averaged over all chosen tokens of "
            "the batch"
        ),
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
        N_(
            "single answers labelled desirable or undesirable, not pairs; a "
            "prospect-theory value function"
        ),
        "KTOConfig",
        dict(beta=0.1, desirable_weight=1.0, undesirable_weight=1.0),
        N_("trl.KTOTrainer with an unpaired dataset"),
    ),
    Variant(
        "SimPO",
        "meng2024simpo",
        N_(
            "no reference model; the reward is beta x the length-averaged log-prob, "
            "with a target margin gamma"
        ),
        "CPOConfig",
        dict(loss_type="simpo", cpo_alpha=0.0, beta=2.0, simpo_gamma=1.0),
        "trl.experimental.cpo.CPOTrainer",
    ),
    Variant(
        "ORPO",
        "hong2024orpo",
        N_(
            "no reference model; an odds-ratio term added to the SFT loss on the "
            "chosen answer"
        ),
        "ORPOConfig",
        dict(beta=0.1),
        "trl.experimental.orpo.ORPOTrainer",
    ),
)


#: Where each config class of the tables lives in TRL 1.16.0
TRL_CONFIG_CLASSES = {
    "GRPOConfig": "trl.GRPOConfig",
    "RLOOConfig": "trl.RLOOConfig",
    "DPOConfig": "trl.DPOConfig",
    "KTOConfig": "trl.KTOConfig",
    "CPOConfig": "trl.experimental.cpo.CPOConfig",
    "ORPOConfig": "trl.experimental.orpo.ORPOConfig",
}
