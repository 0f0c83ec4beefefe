"""The lab's settings: :class:`GRPOTaskConfig` (the addition task and the GRPO
hyper-parameters, by TRL's names) and :class:`LabConfig`, the tiny-transformer run built
on it. :class:`dpo_grpo.lab.hf.HFLabConfig` builds on the same base.

Every check is one of :mod:`dpo_grpo._validation`'s; a bad value raises
``ValueError("<Class>.<field> ...")``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from .. import _validation as v
from ..trl_exact.advantages import SCALE_REWARDS as TRL_SCALE_REWARDS
from ..trl_exact.dpo import (
    DPO_LOSS_TYPES as TRL_DPO_LOSS_TYPES,
    LENGTH_NORMALISED_LOSS_TYPES,
)
from ..trl_exact.grpo import IMPORTANCE_SAMPLING_LEVELS, LOSS_TYPES

REWARDS = ("correct", "length_bonus")
EVAL_SPLITS = ("heldout", "validation")
# The options the lab passes to torch_ops, by TRL's names (one definition: the TRL
# layer's). The DPO loss types that divide by completion lengths are left out: the
# lab's pairs carry sequence log-probs only.
GRPO_LOSS_TYPES = LOSS_TYPES
IS_LEVELS = IMPORTANCE_SAMPLING_LEVELS
SCALE_REWARDS = tuple(s for s in TRL_SCALE_REWARDS if isinstance(s, str))
DPO_LOSS_TYPES = tuple(
    t for t in TRL_DPO_LOSS_TYPES if t not in LENGTH_NORMALISED_LOSS_TYPES
)
#: the fields only algorithm "ppo" reads (its critic, GAE and value loss)
PPO_FIELDS = (
    "vf_coef",
    "critic_lr",
    "critic_warmup",
    "gae_lambda",
    "gamma",
    "cliprange_value",
)


@dataclass(frozen=True)
class GRPOTaskConfig:
    """What every GRPO run of the lab shares, whatever the model: the addition task
    (sums of ``n_terms`` numbers of ``n_digits`` digits; ``n_heldout`` multisets of
    terms, every order of each, are never trained on) and the GRPO hyper-parameters.
    Subclasses add their model's fields and may change defaults; ``validate()`` checks
    every field (``__post_init__`` calls it)."""

    n_terms: int = 3
    n_digits: int = 1
    n_heldout: int = 60
    task_seed: int = 1234  # the train/held-out split is fixed across run seeds
    # generation (rollouts)
    temperature: float = 1.0
    max_completion_length: int = 4
    # GRPO: every step, prompts_per_step prompts x num_generations completions,
    # num_iterations optimiser epochs on that rollout
    grpo_steps: int = 40
    grpo_lr: float = 3e-4
    prompts_per_step: int = 16
    num_generations: int = 8
    num_iterations: int = 2
    epsilon: float = 0.2
    epsilon_high: float | None = None
    delta: float | None = None
    beta: float = 0.04
    loss_type: str = "grpo"
    importance_sampling_level: str = "token"
    use_bias_correction_kl: bool = False
    scale_rewards: str = "group"
    max_grad_norm: float = 1.0
    eval_every: int = 5  # GRPO steps between evaluations

    def __post_init__(self):
        self.validate()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def field_error(self, name: str, why: str) -> ValueError:
        """``ValueError("<Class>.<name> <why>, got <value>")``, to raise."""
        value = getattr(self, name)
        return ValueError(f"{type(self).__name__}.{name} {why}, got {value!r}")

    def validate(self):
        """Check every field; raise ``ValueError("<Class>.<field> ...")`` on the first
        bad one (a value of the wrong type too). Returns ``self``."""
        try:
            self.check_fields()
        except TypeError as exc:
            raise ValueError(str(exc)) from None
        return self

    def check_fields(self):
        """The checks of :meth:`validate` (a subclass extends them with ``super()``)."""
        name = type(self).__name__ + "."
        v.integer(self.n_terms, name + "n_terms", minimum=2, maximum=4)
        v.integer(self.n_digits, name + "n_digits", minimum=1, maximum=3)
        if self.n_terms * self.n_digits > 6:
            raise self.field_error(
                "n_digits",
                f"gives 10**{self.n_terms * self.n_digits} problems "
                "(n_terms * n_digits must be <= 6)",
            )
        v.integer(self.n_heldout, name + "n_heldout", minimum=1)
        n_multisets = math.comb(10**self.n_digits + self.n_terms - 1, self.n_terms)
        if self.n_heldout > n_multisets // 2:
            raise self.field_error(
                "n_heldout",
                f"must be at most half of the {n_multisets} distinct problems",
            )
        v.integer(self.task_seed, name + "task_seed", minimum=0)
        v.scalar(self.temperature, name + "temperature", positive=True)
        v.integer(self.max_completion_length, name + "max_completion_length", minimum=1)
        v.integer(self.grpo_steps, name + "grpo_steps", minimum=0)
        v.scalar(self.grpo_lr, name + "grpo_lr", positive=True)
        for field in ("prompts_per_step", "num_iterations", "eval_every"):
            v.integer(getattr(self, field), name + field, minimum=1)
        v.integer(self.num_generations, name + "num_generations", minimum=2)
        v.scalar(self.epsilon, name + "epsilon", open_unit=True)
        v.scalar(
            self.epsilon_high, name + "epsilon_high", nonnegative=True, allow_none=True
        )
        delta = v.scalar(self.delta, name + "delta", allow_none=True)
        if delta is not None and delta <= 1.0:
            raise self.field_error("delta", "must be > 1 (it caps ratios above 1)")
        v.scalar(self.beta, name + "beta", nonnegative=True)
        v.choice(self.loss_type, name + "loss_type", GRPO_LOSS_TYPES)
        v.choice(
            self.importance_sampling_level,
            name + "importance_sampling_level",
            IS_LEVELS,
        )
        v.boolean(self.use_bias_correction_kl, name + "use_bias_correction_kl")
        v.choice(self.scale_rewards, name + "scale_rewards", SCALE_REWARDS)
        v.scalar(self.max_grad_norm, name + "max_grad_norm", positive=True)


@dataclass(frozen=True)
class LabConfig(GRPOTaskConfig):
    """Every setting of a lab run. ``LabConfig.preset("cpu" | "gpu")`` gives the two
    tested configurations; change a field with ``dataclasses.replace(cfg,
    field=value)``. Invalid values raise ``ValueError`` naming the field."""

    # model
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256
    context_length: int = 16
    # SFT warm-up, deliberately mediocre: a fraction sft_carry_noise of the
    # demonstrations forget every carry (27+45 -> 62). Stopped at the first check
    # (every sft_check_every steps) where the greedy pass rate on sft_probe_size
    # *training* prompts reaches sft_target_pass_rate (None: no early stop); else
    # after sft_steps
    sft_steps: int = 300
    sft_batch_size: int = 128
    sft_lr: float = 3e-3
    sft_carry_noise: float = 0.6
    sft_target_pass_rate: float | None = 0.3
    sft_check_every: int = 5
    sft_probe_size: int = 256
    # optimisation after SFT (AdamW, linear warm-up then constant, gradient clipping)
    weight_decay: float = 0.0
    warmup_steps: int = 10
    # GRPO, besides the base's (the CPU preset's budgets are matched with the
    # offline methods': grpo_steps * num_iterations optimiser steps = dpo_steps, and
    # grpo_steps * prompts_per_step * num_generations sampled completions =
    # dpo_prompts * dpo_samples_per_prompt; see budget()).
    # TRL's sync_ref_model: every k steps ref <- a*policy + (1-a)*ref
    ref_sync_steps: int | None = None
    ref_mixup_alpha: float = 0.6
    # "length_bonus": + length_bonus per emitted character (a reward that can be hacked)
    reward: str = "correct"
    length_bonus: float = 0.5
    # offline methods (algorithm "dpo", "dpo+nll", "rft"): one sampling round from
    # the SFT policy, then dpo_steps optimiser steps on batches of dpo_batch_size
    # selected (chosen, rejected) pairs
    dpo_steps: int = 80
    dpo_lr: float = 3e-4
    dpo_batch_size: int = 32
    dpo_beta: float = 0.1
    dpo_loss_type: str = "sigmoid"
    dpo_label_smoothing: float = 0.0
    # "dpo+nll" only: TRL loss_type=["sigmoid", "sft"], loss_weights=[1, w]
    dpo_sft_weight: float = 1.0
    dpo_prompts: int = 640
    dpo_samples_per_prompt: int = 8
    # PPO (algorithm "ppo"; the rest as GRPO: grpo_steps, grpo_lr, epsilon, beta as
    # the per-token k1 KL coefficient of the reward, num_iterations, prompts_per_step
    # * num_generations completions a step, one per prompt). TRL PPOConfig's names
    # where it has one (vf_coef, cliprange_value, gamma; its lam is gae_lambda).
    # vf_coef: weight of the value loss (it scales the critic's gradient, which has
    # its own optimiser); critic_lr: the critic's learning rate (None: grpo_lr);
    # cliprange_value: new values are clipped to old value +- cliprange_value;
    # critic_warmup: the first critic_warmup steps train the critic alone (verl's
    # trainer.critic_warmup): their rollouts count against the budget, the policy
    # and its learning-rate schedule wait
    vf_coef: float = 0.1
    critic_lr: float | None = None
    critic_warmup: int = 0
    gae_lambda: float = 0.95
    gamma: float = 1.0
    cliprange_value: float = 0.2
    # the held-out split of run seed s is drawn with task_seed + s (so intervals over
    # seeds cover splits; seed 0 has task_seed's); False: task_seed's for every seed
    split_per_seed: bool = True
    # "validation": carve n_heldout multisets from the training problems, train on the
    # rest and evaluate on them (for tuning; the held-out prompts are never seen)
    eval_split: str = "heldout"
    # RLOO (algorithm "rloo"; sampling, steps and learning rate as GRPO): weight of
    # GRPO's k3 KL term (0: none, REINFORCE's loss alone)
    rloo_beta: float = 0.0
    # evaluation and runtime
    # offline steps between evaluations (None: eval_every)
    offline_eval_every: int | None = 10
    # > 0: also log the sampled pass@1 (samples per held-out prompt)
    eval_samples: int = 4
    cpu_threads: int | None = 1
    device: str | None = None  # None: torch_ops.default_device()

    _PRESETS = ("cpu", "gpu")

    @classmethod
    def preset(cls, name: str, **overrides) -> "LabConfig":
        """``"cpu"``: the configuration CI runs (whole DPO + GRPO comparison in well
        under a minute on two cores); ``"gpu"``: a larger model, task, batch and group
        for a Colab GPU. In both, the SFT start is stopped at a target pass rate and
        the budgets are matched (:func:`budget`). Keyword overrides replace fields."""
        if name == "cpu":
            cfg = cls()
        elif name == "gpu":
            cfg = cls(
                n_terms=2,
                n_digits=2,
                n_heldout=400,
                d_model=256,
                n_layers=4,
                n_heads=8,
                d_ff=1024,
                context_length=16,
                sft_steps=1500,
                sft_batch_size=256,
                sft_lr=1e-3,
                sft_target_pass_rate=0.35,
                sft_check_every=50,
                max_completion_length=4,
                grpo_steps=200,
                grpo_lr=3e-4,
                prompts_per_step=64,
                num_generations=16,
                num_iterations=2,
                dpo_steps=400,
                dpo_lr=3e-4,
                dpo_batch_size=64,
                dpo_prompts=12800,
                dpo_samples_per_prompt=16,
                eval_every=10,
                offline_eval_every=20,
                eval_samples=4,
                cpu_threads=None,
            )
        else:
            raise ValueError(f"preset name must be one of {cls._PRESETS}, got {name!r}")
        return dataclasses.replace(cfg, **overrides) if overrides else cfg.validate()

    def check_fields(self):
        super().check_fields()
        name = type(self).__name__ + "."
        for field in (
            "d_model",
            "n_layers",
            "n_heads",
            "d_ff",
            "sft_batch_size",
            "dpo_batch_size",
            "dpo_prompts",
            "sft_check_every",
            "sft_probe_size",
        ):
            v.integer(getattr(self, field), name + field, minimum=1)
        if self.d_model % self.n_heads:
            raise self.field_error("n_heads", f"must divide d_model ({self.d_model})")
        for field in (
            "sft_steps",
            "dpo_steps",
            "warmup_steps",
            "eval_samples",
            "critic_warmup",
        ):
            v.integer(getattr(self, field), name + field, minimum=0)
        v.integer(
            self.dpo_samples_per_prompt, name + "dpo_samples_per_prompt", minimum=2
        )
        v.scalar(
            self.sft_target_pass_rate,
            name + "sft_target_pass_rate",
            positive=True,
            maximum=1,
            allow_none=True,
        )
        v.scalar(
            self.sft_carry_noise, name + "sft_carry_noise", nonnegative=True, maximum=1
        )
        # longest answer + EOS, in the lab's character vocabulary
        answer_tokens = len(str(self.n_terms * (10**self.n_digits - 1))) + 1
        if self.max_completion_length < answer_tokens:
            raise self.field_error(
                "max_completion_length",
                f"must be >= {answer_tokens} (the longest answer plus EOS)",
            )
        v.integer(
            self.context_length,
            name + "context_length",
            minimum=self.prompt_tokens + self.max_completion_length,
        )
        for field in ("sft_lr", "dpo_lr", "dpo_beta"):
            v.scalar(getattr(self, field), name + field, positive=True)
        v.scalar(self.vf_coef, name + "vf_coef", positive=True)
        v.scalar(self.critic_lr, name + "critic_lr", positive=True, allow_none=True)
        v.scalar(self.cliprange_value, name + "cliprange_value", positive=True)
        for field in ("gae_lambda", "gamma"):
            v.scalar(getattr(self, field), name + field, nonnegative=True, maximum=1)
        for field in ("weight_decay", "length_bonus", "dpo_sft_weight", "rloo_beta"):
            v.scalar(getattr(self, field), name + field, nonnegative=True)
        v.scalar(
            self.ref_mixup_alpha, name + "ref_mixup_alpha", positive=True, maximum=1
        )
        for field in ("ref_sync_steps", "offline_eval_every", "cpu_threads"):
            if getattr(self, field) is not None:
                v.integer(getattr(self, field), name + field, minimum=1)
        v.scalar(
            self.dpo_label_smoothing, name + "dpo_label_smoothing", nonnegative=True
        )
        v.boolean(self.split_per_seed, name + "split_per_seed")
        v.choice(self.eval_split, name + "eval_split", EVAL_SPLITS)
        v.choice(self.reward, name + "reward", REWARDS)
        v.choice(self.dpo_loss_type, name + "dpo_loss_type", DPO_LOSS_TYPES)
        # as TRL 1.16.0's DPOTrainer: robust needs [0, 0.5), exo_pair a non-zero value;
        # aot and aot_unpaired read it too, the other types ignore it
        if self.dpo_loss_type == "robust" and self.dpo_label_smoothing >= 0.5:
            raise self.field_error(
                "dpo_label_smoothing", "must be < 0.5 for dpo_loss_type='robust'"
            )
        if self.dpo_loss_type == "exo_pair" and self.dpo_label_smoothing == 0:
            raise self.field_error(
                "dpo_label_smoothing", "must be > 0 for dpo_loss_type='exo_pair'"
            )
        if self.device is not None:
            why = "must be a device string such as 'cpu' or 'cuda', or None"
            if not isinstance(self.device, str):
                raise self.field_error("device", why)
            try:
                torch.device(self.device)
            except (RuntimeError, TypeError):
                raise self.field_error("device", why) from None

    @property
    def prompt_tokens(self) -> int:
        """Tokens of the longest prompt: BOS, the digits, the '+' signs and '='."""
        return 1 + self.n_terms * (self.n_digits + 1)


def runtime_preset() -> str:
    """The preset for this runtime: ``"gpu"`` when torch can use a CUDA GPU (a Colab
    GPU runtime), else ``"cpu"``."""
    return "gpu" if torch.cuda.is_available() else "cpu"


def checked_config(cfg, kind: type = LabConfig):
    """``cfg`` if it is a ``kind`` (default :class:`LabConfig`), else a TypeError
    naming ``cfg``."""
    if not isinstance(cfg, kind):
        raise TypeError(f"cfg must be a {kind.__name__}, got {type(cfg).__name__}")
    return cfg
