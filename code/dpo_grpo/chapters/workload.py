"""The workload of one training step, shared by PPO, GRPO and DPO: the input of every
estimate in :mod:`dpo_grpo.chapters.costs` (chapter 6)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import _validation as v


@dataclass(frozen=True)
class Workload:
    """One training step's workload, shared by the three algorithms (all counts per
    step).

    ``critic_params=None`` means a critic of the policy's size; ``reward_params=None``
    means a rule-based reward (an answer checker or unit tests: no model, one call per
    answer). ``inner_epochs`` is the number of updates per rollout; old log-probs need
    their own forward pass only when it exceeds 1 (with one update they equal the
    current log-probs, as in TRL). ``trainable_fraction < 1`` models LoRA: a frozen bf16
    base plus a trainable adapter of that fraction of the parameters; the reference is
    then the base with the adapter disabled (no extra weights). ``shard_states`` divides
    every model's state over ``n_gpus`` (ZeRO-3/FSDP). ``separate_generation`` means
    generation runs in its own engine (e.g. vLLM), so weights are synced to it and
    rollouts shipped back; ``critic_remote`` and ``reward_remote`` place the critic or
    the reward scorer in a separate service. ``kv_bytes_per_token`` is the KV cache of
    one token (default 131072 = 32 layers x 8 KV heads x 128 dims x K and V x 2 bytes, a
    grouped-query-attention 8B model); it only enters the generation time.
    """

    n_params: int
    prompts: int = 64
    group_size: int = 8
    ppo_samples: int = 1
    prompt_len: int = 256
    answer_len: int = 1024
    critic_params: int | None = None
    reward_params: int | None = None
    inner_epochs: int = 1
    precomputed_reference: bool = False
    trainable_fraction: float = 1.0
    n_gpus: int = 8
    shard_states: bool = False
    separate_generation: bool = True
    critic_remote: bool = False
    reward_remote: bool = False
    kv_bytes_per_token: int = 131072

    def __post_init__(self):
        v.integer(self.n_params, "n_params", minimum=1)
        v.integer(self.prompts, "prompts", minimum=1)
        v.integer(self.group_size, "group_size", minimum=2)
        v.integer(self.ppo_samples, "ppo_samples", minimum=1)
        v.integer(self.prompt_len, "prompt_len", minimum=1)
        v.integer(self.answer_len, "answer_len", minimum=1)
        if self.critic_params is not None:
            v.integer(self.critic_params, "critic_params", minimum=1)
        if self.reward_params is not None:
            v.integer(self.reward_params, "reward_params", minimum=1)
        v.integer(self.inner_epochs, "inner_epochs", minimum=1)
        f = v.scalar(self.trainable_fraction, "trainable_fraction", positive=True)
        if f > 1:
            raise ValueError(f"trainable_fraction must lie in (0, 1], got {f}")
        v.integer(self.n_gpus, "n_gpus", minimum=1)
        v.integer(self.kv_bytes_per_token, "kv_bytes_per_token", minimum=0)
        for name in (
            "precomputed_reference",
            "shard_states",
            "separate_generation",
            "critic_remote",
            "reward_remote",
        ):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(
                    f"{name} must be True or False, got "
                    f"{type(getattr(self, name)).__name__}"
                )

    @property
    def seq_len(self) -> int:
        """Tokens of one prompt + answer sequence."""
        return self.prompt_len + self.answer_len

    @property
    def lora(self) -> bool:
        return self.trainable_fraction < 1.0

    def with_(self, **changes) -> "Workload":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)
