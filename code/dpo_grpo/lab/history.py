"""What a lab run logs: :class:`LabHistory`, one list per metric."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field

import torch


@dataclass
class LabHistory:
    """What a run logged. ``eval_*`` lists and ``heldout_pass_rate`` have one entry per
    evaluation (the first is the SFT start, before any update; the last is the final
    policy); the other lists have one entry per step.

    Cumulative ``tokens_generated`` and ``wall_time_s`` count only post-SFT training
    work (for DPO this includes sampling the preference set, so its first step already
    carries that cost); evaluation time is excluded. ``peak_memory_bytes`` is
    ``torch.cuda.max_memory_allocated`` for the step on a GPU, the process's resident
    set size after the step on a CPU. GRPO fields stay empty in an offline run and vice
    versa. A PPO run logs the GRPO fields that apply to it (all but the group ones:
    ``frac_reward_zero_std``, ``frac_groups_*``) and its critic's (``value_loss``,
    ``explained_variance``, ...); ``kl`` is the same k3 token mean in both."""

    algorithm: str
    seed: int
    config: dict
    n_parameters: int = 0
    #: held-out prompts of this run's split
    n_heldout_prompts: int = 0
    #: PPO: the critic's parameters (0 without a critic)
    n_critic_parameters: int = 0
    sft_steps: int = 0  #: SFT steps actually taken (early stop at sft_target_pass_rate)
    #: greedy pass rate on the SFT probe of training prompts when SFT stopped
    sft_probe_pass_rate: float = 0.0
    sft_wall_time_s: float = 0.0
    # evaluation points
    eval_step: list = field(default_factory=list)
    heldout_pass_rate: list = field(default_factory=list)
    #: at ``temperature``, if ``eval_samples > 0``
    heldout_pass_rate_sampled: list = field(default_factory=list)
    eval_tokens_generated: list = field(default_factory=list)
    eval_wall_time_s: list = field(default_factory=list)
    eval_optimizer_steps: list = field(default_factory=list)
    eval_completions_sampled: list = field(default_factory=list)
    #: cumulative token passes at each evaluation (see ``forward_tokens``)
    eval_forward_tokens: list = field(default_factory=list)
    eval_backward_tokens: list = field(default_factory=list)
    #: greedy and sampled held-out pass rates of the prompts whose answer needs a
    #: carry (``_carry``) and of those that need none (``_nocarry``)
    heldout_pass_rate_carry: list = field(default_factory=list)
    heldout_pass_rate_nocarry: list = field(default_factory=list)
    heldout_pass_rate_sampled_carry: list = field(default_factory=list)
    heldout_pass_rate_sampled_nocarry: list = field(default_factory=list)
    # every step (all algorithms)
    step: list = field(default_factory=list)
    #: cumulative optimiser steps (GRPO: num_iterations a step)
    optimizer_steps: list = field(default_factory=list)
    #: cumulative sampled completions
    completions_sampled: list = field(default_factory=list)
    #: cumulative completion tokens through a forward pass (sampling, reference,
    #: critic and training passes) and through a backward pass (policy and critic),
    #: evaluation excluded; prompt tokens are not counted
    forward_tokens: list = field(default_factory=list)
    backward_tokens: list = field(default_factory=list)
    loss: list = field(default_factory=list)
    grad_norm: list = field(default_factory=list)
    lr: list = field(default_factory=list)
    tokens_generated: list = field(default_factory=list)
    wall_time_s: list = field(default_factory=list)
    tokens_per_s: list = field(default_factory=list)
    peak_memory_bytes: list = field(default_factory=list)
    # GRPO
    reward_mean: list = field(default_factory=list)
    reward_std: list = field(default_factory=list)
    frac_reward_zero_std: list = field(default_factory=list)
    train_pass_rate: list = field(default_factory=list)
    #: groups whose G completions all pass
    frac_groups_all_correct: list = field(default_factory=list)
    #: groups whose G completions all fail
    frac_groups_all_wrong: list = field(default_factory=list)
    clip_ratio_low: list = field(default_factory=list)
    clip_ratio_high: list = field(default_factory=list)
    clip_ratio_region: list = field(default_factory=list)
    kl: list = field(default_factory=list)
    completion_length: list = field(default_factory=list)
    frac_truncated: list = field(default_factory=list)
    sampler_logp_gap: list = field(default_factory=list)
    rollout_time_s: list = field(default_factory=list)
    score_time_s: list = field(default_factory=list)
    reference_time_s: list = field(default_factory=list)
    train_time_s: list = field(default_factory=list)
    ref_version: list = field(default_factory=list)
    # PPO (its critic)
    #: 0.5 * token mean of max((V - R)^2, (clip(V) - R)^2), epoch mean
    value_loss: list = field(default_factory=list)
    #: 1 - Var[R - V] / Var[R] over the rollout's valid tokens, V = the critic's
    #: values before this step's update (out of sample)
    explained_variance: list = field(default_factory=list)
    #: fraction of valid tokens where the clipped value loss is the larger one
    value_clip_fraction: list = field(default_factory=list)
    critic_grad_norm: list = field(default_factory=list)
    #: token means of the rollout's values V and returns R = A + V
    value_mean: list = field(default_factory=list)
    return_mean: list = field(default_factory=list)
    #: mean over completions of the summed KL penalty -beta * k1 (TRL's name)
    non_score_reward: list = field(default_factory=list)
    # offline methods (dpo, dpo+nll, rft)
    n_pairs: int = 0
    #: token-mean NLL of the chosen completions in the batch
    nll: list = field(default_factory=list)
    frac_prompts_without_pair: float | None = None
    rewards_chosen: list = field(default_factory=list)
    rewards_rejected: list = field(default_factory=list)
    rewards_margin: list = field(default_factory=list)
    rewards_accuracy: list = field(default_factory=list)
    #: mean implicit reward margin over all training pairs
    eval_pair_margin: list = field(default_factory=list)
    policy: torch.nn.Module | None = field(default=None, repr=False, compare=False)
    #: PPO: the final critic (None for the other algorithms)
    critic: torch.nn.Module | None = field(default=None, repr=False, compare=False)

    #: fields that depend on the clock or the machine, not on the computation
    TIMING_FIELDS = (
        "sft_wall_time_s",
        "eval_wall_time_s",
        "wall_time_s",
        "tokens_per_s",
        "peak_memory_bytes",
        "rollout_time_s",
        "score_time_s",
        "reference_time_s",
        "train_time_s",
    )

    def as_dict(self, include_timing: bool = True) -> dict:
        d = {
            f.name: copy.deepcopy(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name not in ("policy", "critic")
        }
        if not include_timing:
            for name in self.TIMING_FIELDS:
                d.pop(name)
        return d
