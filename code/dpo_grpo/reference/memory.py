"""The training-state memory ledger (section 01): bytes per parameter by precision and
optimizer.

Logical state only: no activations, communication buffers or temporaries, no ZeRO/FSDP
sharding. GB = 1e9 bytes (decimal), GiB = 2**30 bytes (binary).
"""

from __future__ import annotations

from typing import NamedTuple

from .. import _validation as v

GB = 10**9
GiB = 2**30
BYTES_PER_VALUE = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
#: optimizer state values per parameter, stored in fp32
OPTIMIZER_STATES = {"adamw": 2, "sgd_momentum": 1, "sgd": 0}


class Ledger(NamedTuple):
    """Bytes of each component (ordered dict) and their total."""

    components: dict
    total_bytes: int

    @property
    def gb(self) -> float:
        return self.total_bytes / GB

    @property
    def gib(self) -> float:
        return self.total_bytes / GiB


def training_state_ledger(
    n_params,
    *,
    weight_dtype="bf16",
    grad_dtype="bf16",
    optimizer="adamw",
    master_weights=True,
) -> Ledger:
    """Logical training state of one full-parameter trainable model.

    Default (mixed-precision AdamW): bf16 weights 2 B + bf16 grads 2 B + fp32 master
    copy 4 B + two fp32 moments 8 B = 16 bytes per parameter (7e9 parameters: 14 + 14 +
    84 = 112 GB).
    """
    n = v.integer(n_params, "n_params", minimum=1)
    v.choice(weight_dtype, "weight_dtype", tuple(BYTES_PER_VALUE))
    v.choice(grad_dtype, "grad_dtype", tuple(BYTES_PER_VALUE))
    v.choice(optimizer, "optimizer", tuple(OPTIMIZER_STATES))
    master_weights = v.boolean(master_weights, "master_weights")
    comps = {
        f"weights ({weight_dtype})": n * BYTES_PER_VALUE[weight_dtype],
        f"gradients ({grad_dtype})": n * BYTES_PER_VALUE[grad_dtype],
    }
    if master_weights and weight_dtype != "fp32":
        comps["master weights (fp32)"] = n * 4
    if OPTIMIZER_STATES[optimizer]:
        comps[f"{optimizer} states (fp32)"] = n * 4 * OPTIMIZER_STATES[optimizer]
    return Ledger(comps, sum(comps.values()))


def frozen_model_bytes(n_params, dtype="bf16") -> int:
    """Weights of a model used only for forward passes (reference or reward model)."""
    n = v.integer(n_params, "n_params", minimum=1)
    v.choice(dtype, "dtype", tuple(BYTES_PER_VALUE))
    return n * BYTES_PER_VALUE[dtype]


def algorithm_ledger(
    algorithm,
    n_params,
    *,
    critic_params=None,
    reward_params=None,
    use_reference=True,
    precomputed_reference=False,
    **state_kwargs,
) -> dict:
    """Per-model logical state (bytes) for ``algorithm`` in {"ppo", "grpo", "dpo"}.

    PPO-RLHF trains actor and critic (``critic_params`` defaults to ``n_params``) and
    runs a frozen reference and reward model; GRPO trains the policy only; DPO trains
    the policy against a reference whose log-probs may be precomputed.
    ``reward_params=None`` means a rule-based reward (no model). ``state_kwargs`` go to
    :func:`training_state_ledger`.
    """
    v.choice(algorithm, "algorithm", ("ppo", "grpo", "dpo"))
    if critic_params is not None:
        v.integer(critic_params, "critic_params", minimum=1)
    if reward_params is not None:
        v.integer(reward_params, "reward_params", minimum=1)
    use_reference = v.boolean(use_reference, "use_reference")
    precomputed_reference = v.boolean(precomputed_reference, "precomputed_reference")
    out = {
        "policy (trainable)": training_state_ledger(
            n_params, **state_kwargs
        ).total_bytes
    }
    if algorithm == "ppo":
        critic = n_params if critic_params is None else critic_params
        out["critic (trainable)"] = training_state_ledger(
            critic, **state_kwargs
        ).total_bytes
    if use_reference and not (algorithm == "dpo" and precomputed_reference):
        out["reference (frozen)"] = frozen_model_bytes(n_params)
    if reward_params is not None and algorithm != "dpo":
        out["reward model (frozen)"] = frozen_model_bytes(reward_params)
    return out
