"""The settings under which the lab's sweep reruns GRPO against RFT
(:data:`ROBUSTNESS`), each applied to a method's own config, tuned or not
(:func:`robustness_settings`); :func:`dpo_grpo.lab.sweep.run_sweep` runs them and
:func:`dpo_grpo.lab.sweep.robustness_table` reads their runs."""

from __future__ import annotations

import dataclasses


def _robust_preset(own, preset) -> dict:
    # the preset's value of every field tuning changed
    return {
        k: x
        for k, x in preset.to_dict().items()
        if getattr(own, k) != x and k != "device"
    }


def _robust_budget(own, preset) -> dict:
    return {
        "grpo_steps": 2 * own.grpo_steps,
        "dpo_steps": 2 * own.dpo_steps,
        "dpo_prompts": 2 * own.dpo_prompts,
    }


def _robust_on_policy(own, preset) -> dict:
    # one epoch per rollout, as many rollouts as optimiser steps: the same optimiser
    # steps, num_iterations times the sampled completions
    return {
        "num_iterations": 1,
        "grpo_steps": own.grpo_steps * own.num_iterations,
        "eval_every": own.eval_every * own.num_iterations,
    }


def _robust_beta0(own, preset) -> dict:
    return {"beta": 0.0}


#: the changed settings under which the GRPO-versus-RFT comparison is rerun: a label,
#: the overrides (a function of a method's own config, tuned or not, and of the
#: preset's) and the methods rerun. A method whose config the overrides leave as it
#: is, or that a setting does not rerun, keeps its main runs
ROBUSTNESS = {
    "preset": ("the preset's settings (untuned)", _robust_preset, ("grpo", "rft")),
    "budget_x2": ("twice the budget", _robust_budget, ("grpo", "rft")),
    "on_policy": ("on-policy GRPO (1 epoch a rollout)", _robust_on_policy, ("grpo",)),
    "beta_0": ("GRPO without a KL term (beta = 0)", _robust_beta0, ("grpo",)),
}


def robustness_settings(own: dict, preset, methods) -> dict:
    """``{name: {"label", "overrides": {method: fields}, "methods", "configs"}}``: the
    settings of :data:`ROBUSTNESS` for the methods' own configs ``own`` (``{method:
    LabConfig}``), each method rerun only where the overrides change its config; a
    setting that changes none is left out."""
    out = {}
    for name, (label, change, rerun) in ROBUSTNESS.items():
        configs, overrides = {}, {}
        for m in rerun:
            if m not in methods:
                continue
            changed = dataclasses.replace(own[m], **change(own[m], preset))
            if changed != own[m]:
                configs[m] = changed
                overrides[m] = {
                    k: x
                    for k, x in changed.to_dict().items()
                    if x != getattr(own[m], k)
                }
        if configs:
            out[name] = {
                "label": label,
                "overrides": overrides,
                "methods": list(configs),
                "configs": configs,
            }
    return out
