"""Data of the memory-ledger explorable: the logical training state per component for
PPO, GRPO and DPO (:mod:`dpo_grpo.reference.memory`), no plotly. Split from
:mod:`dpo_grpo.interactive.explorables`, which re-exports :func:`memory_ledger_data`
and :data:`MEMORY_RECIPES`.
"""

from __future__ import annotations

from .. import _validation as v
from ..i18n import N_, tr
from ..reference.memory import (
    BYTES_PER_VALUE,
    GB,
    GiB,
    algorithm_ledger,
    frozen_model_bytes,
    training_state_ledger,
)

#: Named precision/optimizer recipes: keyword arguments of
#: :func:`~dpo_grpo.reference.memory.training_state_ledger`.
MEMORY_RECIPES = {
    "bf16 + fp32 master + AdamW": dict(
        weight_dtype="bf16", grad_dtype="bf16", optimizer="adamw", master_weights=True
    ),
    "fp32 + AdamW": dict(
        weight_dtype="fp32", grad_dtype="fp32", optimizer="adamw", master_weights=False
    ),
    "bf16 + AdamW, no master": dict(
        weight_dtype="bf16", grad_dtype="bf16", optimizer="adamw", master_weights=False
    ),
    "bf16 + fp32 master + SGD-momentum": dict(
        weight_dtype="bf16",
        grad_dtype="bf16",
        optimizer="sgd_momentum",
        master_weights=True,
    ),
}

#: Short names of the recipes (slider labels, shown through tr).
MEMORY_RECIPE_SHORT = {
    "bf16 + fp32 master + AdamW": N_("mixed AdamW"),
    "fp32 + AdamW": N_("fp32 AdamW"),
    "bf16 + AdamW, no master": N_("bf16 AdamW"),
    "bf16 + fp32 master + SGD-momentum": N_("mixed SGD-m"),
}

ALGORITHMS = ("ppo", "grpo", "dpo")
# two lines: the category must fit under its bar on a phone
ALGORITHM_LABELS = {"ppo": N_("PPO<br>(actor + critic)"), "grpo": "GRPO", "dpo": "DPO"}
#: Stacked components, bottom to top.
MEMORY_COMPONENTS = (
    "policy weights",
    "policy gradients",
    "policy fp32 master weights",
    "policy optimizer states",
    "critic (trainable state)",
    "reference (frozen)",
    "reward model (frozen)",
)


def memory_ledger_data(
    n_params=7_000_000_000,
    weight_dtype="bf16",
    grad_dtype="bf16",
    optimizer="adamw",
    master_weights=True,
    reward_model=True,
    grpo_reward_model=True,
    precomputed_reference=False,
):
    """Logical state in bytes per component for PPO, GRPO and DPO training a model of
    ``n_params`` parameters.

    PPO trains actor and critic (same size) and runs a frozen reference and
    (``reward_model=True``) a reward model of the same size; GRPO trains the policy only
    and runs the reference and (``grpo_reward_model=True``) the same reward model, so
    that by default the two differ by the critic alone (``grpo_reward_model=False``: a
    rule-based reward); DPO trains the policy against a reference, whose log-probs may
    be precomputed (``precomputed_reference``). Components follow
    :func:`~dpo_grpo.reference.memory.training_state_ledger` (the policy's breakdown)
    and :func:`~dpo_grpo.reference.memory.algorithm_ledger` (per-model totals). Returns
    ``algorithms``, ``components`` ``{name: [bytes per algorithm]}`` in
    :data:`MEMORY_COMPONENTS` order, ``totals_bytes``, ``totals_gb``, ``totals_gib``,
    ``per_model`` (the algorithm ledgers) and ``policy_bytes_per_param``. Default (7B,
    mixed-precision AdamW): 112 GB of trainable state per model; PPO 252 GB, GRPO 140
    GB, DPO 126 GB.
    """
    n = v.integer(n_params, "n_params", minimum=1)
    master_weights = v.boolean(master_weights, "master_weights")
    reward_model = v.boolean(reward_model, "reward_model")
    grpo_reward_model = v.boolean(grpo_reward_model, "grpo_reward_model")
    precomputed_reference = v.boolean(precomputed_reference, "precomputed_reference")
    state = dict(
        weight_dtype=weight_dtype,
        grad_dtype=grad_dtype,
        optimizer=optimizer,
        master_weights=bool(master_weights),
    )
    policy = training_state_ledger(n, **state)
    keys = list(policy.components)
    named = {
        "policy weights": policy.components[keys[0]],
        "policy gradients": policy.components[keys[1]],
        "policy fp32 master weights": next(
            (b for k, b in policy.components.items() if k.startswith("master")), 0
        ),
        "policy optimizer states": next(
            (b for k, b in policy.components.items() if "states" in k), 0
        ),
    }
    per_model = {}
    components = {c: [] for c in MEMORY_COMPONENTS}
    uses_reward_model = {
        "ppo": bool(reward_model),
        "grpo": bool(grpo_reward_model),
        "dpo": False,
    }
    for alg in ALGORITHMS:
        led = algorithm_ledger(
            alg,
            n,
            reward_params=n if uses_reward_model[alg] else None,
            precomputed_reference=bool(precomputed_reference),
            **state,
        )
        per_model[alg] = led
        assert led["policy (trainable)"] == policy.total_bytes
        for c in MEMORY_COMPONENTS[:4]:
            components[c].append(named[c])
        components["critic (trainable state)"].append(led.get("critic (trainable)", 0))
        components["reference (frozen)"].append(led.get("reference (frozen)", 0))
        components["reward model (frozen)"].append(led.get("reward model (frozen)", 0))
    totals = [sum(per_model[a].values()) for a in ALGORITHMS]
    return {
        "params": {
            "n_params": n,
            **state,
            "reward_model": bool(reward_model),
            "grpo_reward_model": bool(grpo_reward_model),
            "precomputed_reference": bool(precomputed_reference),
        },
        "algorithms": ALGORITHMS,
        "labels": [tr(ALGORITHM_LABELS[a]) for a in ALGORITHMS],
        "components": components,
        "component_labels": {
            "policy weights": f"policy weights ({weight_dtype})",
            "policy gradients": f"policy gradients ({grad_dtype})",
            "policy fp32 master weights": "policy fp32 master weights",
            "policy optimizer states": f"policy {optimizer} states (fp32)",
            "critic (trainable state)": "critic: full trainable state",
            "reference (frozen)": (
                f"reference model (frozen, bf16: {BYTES_PER_VALUE['bf16']} bytes/param)"
            ),
            "reward model (frozen)": "reward model (frozen, bf16)",
        },
        "totals_bytes": totals,
        "totals_gb": [t / GB for t in totals],
        "totals_gib": [t / GiB for t in totals],
        "per_model": per_model,
        "policy_bytes": policy.total_bytes,
        "policy_bytes_per_param": policy.total_bytes / n,
        "frozen_bytes": frozen_model_bytes(n),
    }
