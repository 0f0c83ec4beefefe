"""The lab's GRPO settings by the names of TRL 1.16.0's ``GRPOConfig``
(:data:`GRPO_NAMES`), and that mapping as the table the TRL page prints
(:func:`grpo_names_text`, with :func:`trl_defaults_text` for the defaults of TRL's that
the lab does not take). :mod:`dpo_grpo.lab.trl_scale` builds the arguments from it and
re-exports all three.

The "how" texts are marked for the catalog (:func:`~dpo_grpo.i18n.N_`) and translated
where they are printed, so the Chinese edition (``DPO_GRPO_LANG=zh``) prints the same
names and values with Chinese words.
"""

from __future__ import annotations

from ..i18n import N_, pad, tr

__all__ = ["GRPO_NAMES", "grpo_names_text", "trl_defaults_text"]

#: (lab field, TRL 1.16.0 GRPOConfig field, how the lab's value maps) for the GRPO run
GRPO_NAMES = (
    ("grpo_lr", "learning_rate", N_("same value")),
    ("num_generations", "num_generations", N_("same value")),
    (
        "prompts_per_step",
        "per_device_train_batch_size",
        N_("x num_generations (TRL counts completions per device)"),
    ),
    ("num_iterations", "num_iterations", N_("same value")),
    (
        "grpo_steps",
        "max_steps",
        N_("x num_iterations (TRL counts optimiser steps)"),
    ),
    ("epsilon", "epsilon", N_("same value")),
    ("epsilon_high", "epsilon_high", N_("same value")),
    ("delta", "delta", N_("same value")),
    ("beta", "beta", N_("same value (TRL's default is 0.0)")),
    ("loss_type", "loss_type", N_("same value (TRL's default is 'dapo')")),
    ("importance_sampling_level", "importance_sampling_level", N_("same value")),
    (
        "use_bias_correction_kl",
        "use_bias_correction_kl",
        N_("same value (TRL's default is True)"),
    ),
    ("scale_rewards", "scale_rewards", N_("same value")),
    (
        "temperature",
        "temperature",
        N_("same value; top_p=1, top_k=0: plain sampling"),
    ),
    ("max_completion_length", "max_completion_length", N_("same value")),
    ("max_grad_norm", "max_grad_norm", N_("same value")),
    ("weight_decay", "weight_decay", N_("same value")),
    (
        "warmup_steps",
        "warmup_steps",
        N_(
            "x num_iterations (the lab's scheduler steps once per rollout, TRL's once "
            "per optimiser step); lr_scheduler_type='constant_with_warmup'"
        ),
    ),
    (
        "ref_sync_steps",
        "sync_ref_model, ref_model_sync_steps",
        N_("None -> sync_ref_model=False"),
    ),
    ("ref_mixup_alpha", "ref_model_mixup_alpha", N_("same value")),
    (
        "reward / reward_weights",
        "reward_funcs, reward_weights",
        N_("the verifier as a TRL reward function"),
    ),
)


def grpo_names_text(args: dict) -> str:
    """:data:`GRPO_NAMES` as a table, one row per lab field: its TRL name, the value
    ``args`` gives the (first) TRL field, and how the lab's value maps. ``args``: the
    keyword arguments of ``trl.GRPOConfig``
    (:func:`~dpo_grpo.lab.trl_scale.grpo_args`)."""
    if not isinstance(args, dict):
        raise TypeError(f"args must be a dict, got {type(args).__name__}")
    lines = [
        f"{pad(tr('lab field'), 26)} {'TRL 1.16.0 GRPOConfig':<38} "
        f"{pad(tr('value'), 9, '>')}  {tr('how')}"
    ]
    for ours, theirs, how in GRPO_NAMES:
        value = args.get(theirs.split(",")[0], "")
        lines.append(f"{ours:<26} {theirs:<38} {str(value):>9}  {tr(how)}")
    return "\n".join(lines)


def trl_defaults_text(defaults: dict) -> str:
    """The line that names TRL's own defaults the lab does not use: ``defaults``, TRL
    field -> ``trl.GRPOConfig``'s default, shown as a dict."""
    if not isinstance(defaults, dict):
        raise TypeError(f"defaults must be a dict, got {type(defaults).__name__}")
    return tr(
        "TRL's own defaults that the lab does not use: {defaults}", defaults=defaults
    )
