"""Lab: DPO versus GRPO on a tiny transformer with a verifiable reward.

One run is: build the task (prompts ``"3+5+2="``, a verifier that checks the sum), train a small decoder-only
transformer by supervised fine-tuning (SFT) on deliberately flawed demonstrations (a fraction of them forget every
carry), so that it starts mediocre, then continue from that SFT policy with either

- ``algorithm="dpo"``: sample the SFT policy offline, keep (correct, wrong) completions of the same prompt as
  (chosen, rejected) pairs, precompute the frozen reference's log-probs, and minimise ``torch_ops.dpo_loss``;
- ``algorithm="dpo+nll"``: the same pairs, loss ``dpo_loss + dpo_sft_weight * NLL(chosen)`` (TRL's
  ``loss_type=["sigmoid", "sft"]``);
- ``algorithm="rft"``: rejection-sampling fine-tuning, the control for the NLL term: the same offline samples and
  the same selected (chosen, verified-correct) completions, loss ``NLL(chosen)`` only, no DPO term; or
- ``algorithm="grpo"``: every step, sample ``num_generations`` completions per prompt from the current policy,
  score them with the verifier, form group advantages (``torch_ops.reward_advantages``) and minimise
  ``torch_ops.grpo_loss`` for ``num_iterations`` epochs on that rollout, with a frozen reference for the KL term.

Every run reports the held-out pass rate (greedy decoding on prompts never trained on; with ``eval_samples > 0``
also the sampled pass@1 at ``temperature``), measured separately from the training reward, and logs both budget
axes: optimiser steps and sampled completions (:func:`budget` gives them before a run). ``run_lab(LabConfig.preset("cpu"), algorithm=..., seed=...)`` returns a :class:`LabHistory`.

Determinism: on CPU a run is a function of ``(config, algorithm, seed)`` (same torch build and CPU type): the
model initialisation, data order and sampling use their own seeded generators, and ``cpu_threads`` fixes the
number of intra-op threads while the run lasts. A checkpoint saved mid-run resumes to the same result, bit for
bit. On a GPU, runs are reproducible only up to the non-determinism of the CUDA kernels.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import os
import random
import sys
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch

from .. import _validation as v
from ..trl_exact.advantages import SCALE_REWARDS as TRL_SCALE_REWARDS
from ..trl_exact.dpo import (
    DPO_LOSS_TYPES as TRL_DPO_LOSS_TYPES,
    LENGTH_NORMALISED_LOSS_TYPES,
)
from ..trl_exact.grpo import IMPORTANCE_SAMPLING_LEVELS, LOSS_TYPES
from .. import torch_ops
from .model import (
    VOCAB,
    AdditionTask,
    TinyTransformer,
    completion_logps,
    count_parameters,
    encode_completions,
    encode_prompts,
    generate,
    verify,
)

ALGORITHMS = ("grpo", "dpo", "dpo+nll", "rft")
#: sample the SFT policy once, then train on the selected data
OFFLINE = (
    "dpo",
    "dpo+nll",
    "rft",
)
REWARDS = ("correct", "length_bonus")
# The options the lab passes to torch_ops, by TRL's names (one definition: the TRL layer's). The DPO loss types that
# divide by completion lengths are left out: the lab's pairs carry sequence log-probs only.
GRPO_LOSS_TYPES = LOSS_TYPES
IS_LEVELS = IMPORTANCE_SAMPLING_LEVELS
SCALE_REWARDS = tuple(s for s in TRL_SCALE_REWARDS if isinstance(s, str))
DPO_LOSS_TYPES = tuple(
    t for t in TRL_DPO_LOSS_TYPES if t not in LENGTH_NORMALISED_LOSS_TYPES
)
CHECKPOINT_FORMAT = 2


# --- Configuration ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LabConfig:
    """Every setting of a lab run. ``LabConfig.preset("cpu" | "gpu")`` gives the two tested configurations; change
    a field with ``dataclasses.replace(cfg, field=value)``. Invalid values raise ``ValueError`` naming the field."""

    # task: sums of n_terms numbers with n_digits digits each; n_heldout multisets of terms (every order of each
    # is a held-out prompt) are never trained on
    n_terms: int = 3
    n_digits: int = 1
    n_heldout: int = 60
    task_seed: int = 1234  # the train/held-out split is fixed across run seeds
    # model
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256
    context_length: int = 16
    # SFT warm-up, deliberately mediocre: a fraction sft_carry_noise of the demonstrations forget every carry
    # (27+45 -> 62). Stopped at the first check (every sft_check_every steps) where the greedy pass rate on
    # sft_probe_size *training* prompts reaches sft_target_pass_rate (None: no early stop); else after sft_steps
    sft_steps: int = 300
    sft_batch_size: int = 128
    sft_lr: float = 3e-3
    sft_carry_noise: float = 0.6
    sft_target_pass_rate: float | None = 0.3
    sft_check_every: int = 5
    sft_probe_size: int = 256
    # generation (rollouts, DPO pair sampling)
    temperature: float = 1.0
    max_completion_length: int = 4
    # optimisation after SFT (AdamW, linear warm-up then constant, gradient clipping)
    weight_decay: float = 0.0
    warmup_steps: int = 10
    max_grad_norm: float = 1.0
    # GRPO (the CPU preset's budgets are matched with the offline methods': grpo_steps * num_iterations optimiser
    # steps = dpo_steps, and grpo_steps * prompts_per_step * num_generations sampled completions =
    # dpo_prompts * dpo_samples_per_prompt; see budget())
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
    ref_sync_steps: int | None = (
        None  # TRL's sync_ref_model: every k steps ref <- a*policy + (1-a)*ref
    )
    ref_mixup_alpha: float = 0.6
    reward: str = "correct"  # "length_bonus": + length_bonus per emitted character (a reward that can be hacked)
    length_bonus: float = 0.5
    # offline methods (algorithm "dpo", "dpo+nll", "rft"): one sampling round from the SFT policy, then
    # dpo_steps optimiser steps on batches of dpo_batch_size selected (chosen, rejected) pairs
    dpo_steps: int = 80
    dpo_lr: float = 3e-4
    dpo_batch_size: int = 32
    dpo_beta: float = 0.1
    dpo_loss_type: str = "sigmoid"
    dpo_label_smoothing: float = 0.0
    dpo_sft_weight: float = (
        1.0  # "dpo+nll" only: TRL loss_type=["sigmoid", "sft"], loss_weights=[1, w]
    )
    dpo_prompts: int = 640
    dpo_samples_per_prompt: int = 8
    # evaluation and runtime
    eval_every: int = 5  # GRPO steps between evaluations
    offline_eval_every: int | None = (
        10  # offline steps between evaluations (None: eval_every)
    )
    eval_samples: int = (
        4  # > 0: also log the sampled pass@1 (this many samples per held-out prompt)
    )
    cpu_threads: int | None = 1
    device: str | None = None  # None: torch_ops.default_device()

    _PRESETS = ("cpu", "gpu")

    @classmethod
    def preset(cls, name: str, **overrides) -> "LabConfig":
        """``"cpu"``: the configuration CI runs (whole DPO + GRPO comparison in well under a minute on two cores);
        ``"gpu"``: a larger model, task, batch and group for a Colab GPU. In both, the SFT start is stopped at a
        target pass rate and the budgets are matched (:func:`budget`). Keyword overrides replace fields."""
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

    def __post_init__(self):
        self.validate()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def validate(self) -> "LabConfig":
        """Check every field; raise ``ValueError("LabConfig.<field> ...")`` on the first bad one."""

        def bad(name, why):
            raise ValueError(f"LabConfig.{name} {why}, got {getattr(self, name)!r}")

        def number(name, kinds, what, optional):
            x = getattr(self, name)
            if x is None and optional:
                return None
            if (
                isinstance(x, bool)
                or not isinstance(x, kinds)
                or (isinstance(x, (float, np.floating)) and not math.isfinite(x))
            ):
                bad(name, what)
            return x

        def integer(name, minimum, maximum=None, optional=False):
            x = number(name, (int, np.integer), "must be an integer", optional)
            if x is not None and (x < minimum or (maximum is not None and x > maximum)):
                bad(
                    name,
                    f"must be in [{minimum}, {maximum}]"
                    if maximum is not None
                    else f"must be >= {minimum}",
                )

        def real(
            name, *, positive=False, nonnegative=False, below=None, optional=False
        ):
            x = number(
                name,
                (int, float, np.floating, np.integer),
                "must be a finite real number",
                optional,
            )
            if x is None:
                return
            if positive and x <= 0:
                bad(name, "must be > 0")
            if nonnegative and x < 0:
                bad(name, "must be >= 0")
            if below is not None and x >= below:
                bad(name, f"must be < {below}")

        def choice(name, options):
            if getattr(self, name) not in options:
                bad(name, f"must be one of {options}")

        integer("n_terms", 2, 4)
        integer("n_digits", 1, 3)
        if self.n_terms * self.n_digits > 6:
            bad(
                "n_digits",
                f"gives 10**{self.n_terms * self.n_digits} problems (n_terms * n_digits must be <= 6)",
            )
        integer("n_heldout", 1)
        n_multisets = math.comb(10**self.n_digits + self.n_terms - 1, self.n_terms)
        if self.n_heldout > n_multisets // 2:
            bad(
                "n_heldout",
                f"must be at most half of the {n_multisets} distinct problems",
            )
        integer("task_seed", 0)
        for name in (
            "d_model",
            "n_layers",
            "n_heads",
            "d_ff",
            "sft_batch_size",
            "prompts_per_step",
            "num_iterations",
            "dpo_batch_size",
            "dpo_prompts",
            "eval_every",
        ):
            integer(name, 1)
        if self.d_model % self.n_heads:
            bad("n_heads", f"must divide d_model ({self.d_model})")
        integer("sft_steps", 0)
        integer("sft_check_every", 1)
        integer("sft_probe_size", 1)
        real("sft_target_pass_rate", positive=True, optional=True)
        real("sft_carry_noise", nonnegative=True)
        if self.sft_carry_noise > 1:
            bad("sft_carry_noise", "must be in [0, 1]")
        if self.sft_target_pass_rate is not None and self.sft_target_pass_rate > 1:
            bad("sft_target_pass_rate", "must be in (0, 1] or None")
        integer("grpo_steps", 0)
        integer("dpo_steps", 0)
        integer("warmup_steps", 0)
        integer("num_generations", 2)
        integer("dpo_samples_per_prompt", 2)
        integer("max_completion_length", 1)
        # BOS, digits, '+' signs and '='
        prompt_tokens = 1 + self.n_terms * (self.n_digits + 1)
        # longest answer + EOS
        answer_tokens = len(str(self.n_terms * (10**self.n_digits - 1))) + 1
        if self.max_completion_length < answer_tokens:
            bad(
                "max_completion_length",
                f"must be >= {answer_tokens} (the longest answer plus EOS)",
            )
        integer("context_length", prompt_tokens + self.max_completion_length)
        for name in (
            "sft_lr",
            "grpo_lr",
            "dpo_lr",
            "temperature",
            "dpo_beta",
            "max_grad_norm",
        ):
            real(name, positive=True)
        for name in ("weight_decay", "beta", "length_bonus", "dpo_sft_weight"):
            real(name, nonnegative=True)
        real("epsilon", positive=True, below=1.0)
        real("epsilon_high", nonnegative=True, optional=True)
        real("delta", optional=True)
        if self.delta is not None and self.delta <= 1.0:
            bad("delta", "must be > 1 (it caps ratios above 1)")
        real("ref_mixup_alpha", positive=True)
        if self.ref_mixup_alpha > 1:
            bad("ref_mixup_alpha", "must be in (0, 1]")
        integer("ref_sync_steps", 1, optional=True)
        real("dpo_label_smoothing", nonnegative=True, below=0.5)
        choice("loss_type", GRPO_LOSS_TYPES)
        choice("importance_sampling_level", IS_LEVELS)
        choice("scale_rewards", SCALE_REWARDS)
        choice("reward", REWARDS)
        choice("dpo_loss_type", DPO_LOSS_TYPES)
        if self.dpo_loss_type != "robust" and self.dpo_label_smoothing != 0:
            bad("dpo_label_smoothing", "must be 0 unless dpo_loss_type='robust'")
        if not isinstance(self.use_bias_correction_kl, bool):
            bad("use_bias_correction_kl", "must be a bool")
        integer("eval_samples", 0)
        integer("offline_eval_every", 1, optional=True)
        integer("cpu_threads", 1, optional=True)
        if self.device is not None:
            if not isinstance(self.device, str):
                bad(
                    "device", "must be a device string such as 'cpu' or 'cuda', or None"
                )
            try:
                torch.device(self.device)
            except (RuntimeError, TypeError):
                bad(
                    "device", "must be a device string such as 'cpu' or 'cuda', or None"
                )
        return self

    @property
    def prompt_tokens(self) -> int:
        return 1 + self.n_terms * (self.n_digits + 1)


def runtime_preset() -> str:
    """The preset for this runtime: ``"gpu"`` when torch can use a CUDA GPU (a Colab GPU runtime), else ``"cpu"``."""
    return "gpu" if torch.cuda.is_available() else "cpu"


# --- History ---------------------------------------------------------------------------------------------------------


@dataclass
class LabHistory:
    """What a run logged. ``eval_*`` lists and ``heldout_pass_rate`` have one entry per evaluation (the first is
    the SFT start, before any update; the last is the final policy); the other lists have one entry per step.

    Cumulative ``tokens_generated`` and ``wall_time_s`` count only post-SFT training work (for DPO this includes
    sampling the preference set, so its first step already carries that cost); evaluation time is excluded.
    ``peak_memory_bytes`` is ``torch.cuda.max_memory_allocated`` for the step on a GPU, the process's resident set
    size after the step on a CPU. GRPO fields stay empty in an offline run and vice versa.
    """

    algorithm: str
    seed: int
    config: dict
    n_parameters: int = 0
    sft_steps: int = 0  #: SFT steps actually taken (early stop at sft_target_pass_rate)
    sft_probe_pass_rate: float = (
        0.0  #: greedy pass rate on the SFT probe of training prompts when SFT stopped
    )
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
    # every step (all algorithms)
    step: list = field(default_factory=list)
    #: cumulative optimiser steps (GRPO: num_iterations a step)
    optimizer_steps: list = field(default_factory=list)
    #: cumulative sampled completions
    completions_sampled: list = field(default_factory=list)
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
            if f.name != "policy"
        }
        if not include_timing:
            for name in self.TIMING_FIELDS:
                d.pop(name)
        return d


# --- Small utilities -------------------------------------------------------------------------------------------------


def _config(cfg) -> "LabConfig":
    if not isinstance(cfg, LabConfig):
        raise TypeError(f"cfg must be a LabConfig, got {type(cfg).__name__}")
    return cfg


def _device(device) -> torch.device:
    """``device`` (a string or ``torch.device``) as a ``torch.device``; a ValueError names it if it is not one."""
    if isinstance(device, torch.device):
        return device
    if not isinstance(device, str):
        raise TypeError(
            f"device must be a device string such as 'cpu' or 'cuda', or a torch.device, got "
            f"{type(device).__name__}"
        )
    try:
        return torch.device(device)
    except RuntimeError as exc:
        raise ValueError(
            f"device must be a device string such as 'cpu' or 'cuda', got {device!r} ({exc})"
        ) from None


def _resolve_device(cfg: LabConfig) -> torch.device:
    return (
        torch.device(cfg.device)
        if cfg.device is not None
        else torch.device(torch_ops.default_device())
    )


@contextlib.contextmanager
def _threads(cfg: LabConfig, device: torch.device):
    """Fix torch's intra-op thread count on CPU while the run lasts (reproducible sums, no oversubscription)."""
    if device.type != "cpu" or cfg.cpu_threads is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(cfg.cpu_threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _derived_seed(seed: int, purpose: str) -> int:
    """A 63-bit seed for one purpose (model init, data order, sampling), independent across purposes."""
    tag = int.from_bytes(purpose.encode(), "little") % (2**31)
    return int(
        np.random.SeedSequence([seed, tag])
        .generate_state(2, dtype=np.uint32)
        .view(np.uint64)[0]
        >> 1
    )


def _memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (
        OSError,
        ValueError,
        AttributeError,
    ):  # not Linux: peak RSS (bytes on macOS, KiB elsewhere)
        try:
            import resource
        except ImportError:  # Windows
            return 0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(rss if sys.platform == "darwin" else rss * 1024)


def _reset_peak(device: torch.device):
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def _sync(device: torch.device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _optimizer(params, lr, cfg: LabConfig):
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=cfg.weight_decay, foreach=False)
    warm = cfg.warmup_steps
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / (warm + 1)) if warm else 1.0
    )
    return opt, sched


class PromptStream:
    """Training prompts in a fresh seeded permutation each epoch; the cursor ``(epoch, pos)`` is the whole state."""

    def __init__(self, prompts, seed: int):
        self.prompts = v.sequence(prompts, "prompts")
        if not self.prompts:
            raise ValueError("prompts must not be empty")
        self.seed = v.integer(seed, "seed", minimum=0)
        self.epoch = 0
        self.pos = 0
        self._perm = None

    def _order(self):
        return np.random.default_rng([self.seed, self.epoch]).permutation(
            len(self.prompts)
        )

    def next(self, n: int) -> list:
        n = v.integer(n, "n", minimum=0)
        out = []
        while len(out) < n:
            if self._perm is None:
                self._perm = self._order()
            take = min(n - len(out), len(self.prompts) - self.pos)
            out.extend(self.prompts[i] for i in self._perm[self.pos : self.pos + take])
            self.pos += take
            if self.pos == len(self.prompts):
                self.epoch, self.pos, self._perm = self.epoch + 1, 0, None
        return out

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, state: dict):
        self.epoch, self.pos, self._perm = int(state["epoch"]), int(state["pos"]), None


def _selective_log_softmax(logits, token_ids):
    """``torch_ops.selective_log_softmax`` as one block. The lab's vocabulary has 15 tokens, so a contiguous copy of
    the ``(B, L, V)`` completion logits is tiny, and it lets every position go through one chunk instead of a
    Python loop over rows (the sliced logits cannot be viewed as one block)."""
    return torch_ops.selective_log_softmax(
        logits.contiguous(), token_ids, chunk_size=max(1, token_ids.numel())
    )


def make_task(cfg: LabConfig) -> AdditionTask:
    _config(cfg)
    return AdditionTask(
        n_terms=cfg.n_terms,
        n_digits=cfg.n_digits,
        n_heldout=cfg.n_heldout,
        seed=cfg.task_seed,
    )


def make_model(cfg: LabConfig) -> TinyTransformer:
    _config(cfg)
    return TinyTransformer(
        len(VOCAB),
        d_model=cfg.d_model,
        n_layers=cfg.n_layers,
        n_heads=cfg.n_heads,
        d_ff=cfg.d_ff,
        max_seq_len=cfg.context_length,
    )


def score(prompts, completion_ids, finished, cfg: LabConfig) -> torch.Tensor:
    """The verifier as reward functions: ``(N, K)`` float tensor. Column 0 is correctness (1 if the completion
    ended with EOS and is exactly the sum); with ``reward="length_bonus"`` column 1 is the number of characters
    emitted (weighted by ``length_bonus``), a reward a policy can earn without being right."""
    _config(cfg)
    prompts = v.sequence(prompts, "prompts")
    if not isinstance(completion_ids, torch.Tensor) or completion_ids.dim() != 2:
        raise TypeError(
            f"completion_ids must be a 2-D tensor of token ids, got {type(completion_ids).__name__}"
        )
    if not isinstance(finished, torch.Tensor) or finished.shape != (
        completion_ids.shape[0],
    ):
        raise ValueError(
            f"finished must be a tensor of shape ({completion_ids.shape[0]},), got "
            f"{type(finished).__name__} {tuple(getattr(finished, 'shape', ()))}"
        )
    if len(prompts) != completion_ids.shape[0]:
        raise ValueError(
            f"prompts must have one entry per completion ({completion_ids.shape[0]}), got {len(prompts)}"
        )
    texts = [VOCAB.decode(row) for row in completion_ids.tolist()]
    done = finished.tolist()
    correct = [
        1.0 if (ok and verify(p, t)) else 0.0 for p, t, ok in zip(prompts, texts, done)
    ]
    cols = [correct]
    if cfg.reward == "length_bonus":
        cols.append([float(len(t)) for t in texts])
    return torch.tensor(cols, dtype=torch.float32).T.contiguous()


def reward_weights(cfg: LabConfig):
    _config(cfg)
    return None if cfg.reward == "correct" else [1.0, cfg.length_bonus]


@torch.no_grad()
def heldout_pass_rate(
    model,
    prompts,
    cfg: LabConfig,
    device,
    *,
    samples: int = 0,
    generator=None,
    batch_size: int = 1024,
) -> float:
    """Fraction of ``prompts`` whose greedy completion the verifier accepts (``samples=0``; uses no random
    numbers), or the mean verified fraction of ``samples`` completions per prompt sampled at ``cfg.temperature``
    with ``generator`` (pass@1 estimated with ``samples`` draws)."""
    _config(cfg)
    prompts = v.sequence(prompts, "prompts")
    if not prompts:
        raise ValueError("prompts must not be empty")
    samples = v.integer(samples, "samples", minimum=0)
    batch_size = v.integer(batch_size, "batch_size", minimum=1)
    rows = prompts if samples == 0 else [p for p in prompts for _ in range(samples)]
    device = _device(device)
    strict = dataclasses.replace(cfg, reward="correct")
    hits = 0
    with _threads(cfg, device):
        for i in range(0, len(rows), batch_size):
            chunk = rows[i : i + batch_size]
            ids, mask = encode_prompts(chunk, device)
            ro = generate(
                model,
                ids,
                mask,
                cfg.max_completion_length,
                greedy=samples == 0,
                temperature=cfg.temperature,
                generator=generator,
            )
            hits += int(
                score(chunk, ro.completion_ids, ro.finished, strict)[:, 0].sum().item()
            )
    return hits / len(rows)


# --- Sampling cost versus training cost -------------------------------------------------------------------------------


def rollout_vs_train_time(
    cfg: LabConfig, device=None, lengths=(2, 4, 8, 16, 32, 48), batch=128, repeats=3
) -> list:
    """Seconds to sample L tokens (what :func:`generate` runs: L no-grad forward passes over a growing prefix)
    versus one training pass (forward + backward over prompt + L tokens), for ``batch`` sequences of the config's
    model shape (random weights, random tokens: the cost does not depend on them); median of ``repeats``.
    Returns one dict per length: ``completion_length``, ``rollout_s``, ``train_pass_s``, ``rollout_over_train``."""
    _config(cfg)
    device = _resolve_device(cfg) if device is None else _device(device)
    lengths = [
        v.integer(L, "lengths", minimum=1) for L in v.sequence(lengths, "lengths")
    ]
    if not lengths:
        raise ValueError("lengths must not be empty")
    batch = v.integer(batch, "batch", minimum=1)
    repeats = v.integer(repeats, "repeats", minimum=1)
    prompt_len = cfg.prompt_tokens
    with torch.random.fork_rng(
        devices=[device] if device.type == "cuda" else []
    ):  # leave the global RNG alone
        torch.manual_seed(0)
        model = make_model(
            dataclasses.replace(
                cfg,
                context_length=prompt_len + max(*lengths, cfg.max_completion_length),
            )
        ).to(device)
    task = make_task(cfg)
    pids, pmask = encode_prompts(task.train_prompts()[:batch], device)
    gen = torch.Generator(device=device).manual_seed(0)
    rows = []
    with _threads(cfg, device):
        for L in lengths:
            cids = torch.randint(
                len(VOCAB.specials),
                len(VOCAB),
                (pids.shape[0], L),
                generator=gen,
                device=device,
            )
            cmask = torch.ones_like(cids, dtype=torch.bool)
            t_roll, t_train = [], []
            for _ in range(repeats):
                _sync(device)
                t0 = time.perf_counter()
                with torch.no_grad():
                    for t in range(
                        L
                    ):  # what generate() runs: one forward per new token
                        model(
                            torch.cat([pids, cids[:, :t]], 1),
                            torch.cat([pmask, cmask[:, :t]], 1),
                        )
                _sync(device)
                t1 = time.perf_counter()
                logps = completion_logps(model, pids, pmask, cids, cmask)
                (-(logps * cmask).sum()).backward()
                model.zero_grad(set_to_none=True)
                _sync(device)
                t2 = time.perf_counter()
                t_roll.append(t1 - t0)
                t_train.append(t2 - t1)
            r, tr = float(np.median(t_roll)), float(np.median(t_train))
            rows.append(
                {
                    "completion_length": L,
                    "rollout_s": r,
                    "train_pass_s": tr,
                    "rollout_over_train": r / tr,
                }
            )
    return rows


# --- SFT warm-up (cached per process: DPO and GRPO start from the very same weights) ---------------------------------

_SFT_CACHE: dict = {}
_SFT_FIELDS = (
    "n_terms",
    "n_digits",
    "n_heldout",
    "task_seed",
    "d_model",
    "n_layers",
    "n_heads",
    "d_ff",
    "context_length",
    "sft_steps",
    "sft_batch_size",
    "sft_lr",
    "sft_carry_noise",
    "sft_target_pass_rate",
    "cpu_threads",
)
# Only read for early stopping. (max_completion_length is not needed: any valid limit fits the longest correct answer,
# and greedy decoding is the same prefix by prefix, so the probe's pass rate does not depend on it.)
_SFT_STOP_FIELDS = ("sft_check_every", "sft_probe_size")


class SFTResult(NamedTuple):
    model: torch.nn.Module
    seconds: float  #: wall time of the SFT run (of the original run when the result comes from the cache)
    steps: int  #: steps taken
    probe_pass_rate: (
        float  #: greedy pass rate on the probe of training prompts at the last check
    )


def sft_warmup(cfg: LabConfig, seed: int, device) -> SFTResult:
    """Supervised fine-tuning on ``prompt -> answer EOS`` (loss on completion tokens only), stopped early.

    Every ``sft_check_every`` steps the greedy pass rate on a fixed probe of ``sft_probe_size`` *training* prompts
    is measured (held-out prompts are never looked at); SFT stops at the first check that reaches
    ``sft_target_pass_rate``, or after ``sft_steps`` steps. This makes the start mediocre by design, whatever the
    seed. The result is cached in-process by the fields that determine it, so the DPO and GRPO runs of one notebook
    share one SFT; a cached copy is bit-identical to a fresh one.
    """
    _config(cfg)
    seed = v.integer(seed, "seed", minimum=0)
    device = _device(device)
    threads = (
        (cfg.cpu_threads or torch.get_num_threads()) if device.type == "cpu" else None
    )
    fields = _SFT_FIELDS + (
        _SFT_STOP_FIELDS if cfg.sft_target_pass_rate is not None else ()
    )
    key = (tuple(getattr(cfg, f) for f in fields), threads, seed, str(device))
    if key in _SFT_CACHE:
        state, seconds, steps, probe = _SFT_CACHE[key]
        model = make_model(cfg).to(device)
        model.load_state_dict(state)
        return SFTResult(model, seconds, steps, probe)
    with _threads(cfg, device):
        out = _sft(cfg, seed, device)
    _SFT_CACHE[key] = (
        {k: t.detach().clone() for k, t in out.model.state_dict().items()},
        out.seconds,
        out.steps,
        out.probe_pass_rate,
    )
    return out


def _sft(cfg: LabConfig, seed: int, device: torch.device) -> SFTResult:
    t0 = time.perf_counter()
    task = make_task(cfg)
    torch.manual_seed(_derived_seed(seed, "init"))
    model = make_model(cfg).to(device)
    opt = torch.optim.AdamW(
        model.parameters(), lr=cfg.sft_lr, weight_decay=0.0, foreach=False
    )
    rng = np.random.default_rng(_derived_seed(seed, "sft-data"))
    pairs = task.train_problems
    train = task.train_prompts()
    # every training problem encoded once; a step gathers its rows and trims the all-padding columns
    all_pids, all_pmask = encode_prompts(train, device)
    width = cfg.max_completion_length
    good_ids, good_mask = encode_completions(
        [task.answer(x) for x in pairs], width, device
    )
    flaw_ids, flaw_mask = encode_completions(
        [task.no_carry_answer(x) for x in pairs], width, device
    )
    probe_idx = np.random.default_rng(_derived_seed(seed, "sft-probe")).permutation(
        len(train)
    )[: cfg.sft_probe_size]
    probe = [train[i] for i in probe_idx]
    steps, probe_pass = 0, float("nan")
    target = cfg.sft_target_pass_rate
    while steps < cfg.sft_steps:
        if target is not None and steps % cfg.sft_check_every == 0 and steps > 0:
            # greedy: uses no random numbers
            probe_pass = heldout_pass_rate(model, probe, cfg, device)
            if probe_pass >= target:
                break
        idx = torch.as_tensor(
            rng.integers(0, len(pairs), cfg.sft_batch_size), device=device
        )
        noisy = torch.as_tensor(
            rng.random(cfg.sft_batch_size) < cfg.sft_carry_noise, device=device
        )[:, None]
        pids, pmask = all_pids[idx], all_pmask[idx]
        first = int(pmask.any(0).long().argmax())
        pids, pmask = pids[:, first:], pmask[:, first:]
        cids = torch.where(noisy, flaw_ids[idx], good_ids[idx])
        cmask = torch.where(noisy, flaw_mask[idx], good_mask[idx])
        last = int(cmask.sum(1).max())
        cids, cmask = cids[:, :last], cmask[:, :last]
        logps = completion_logps(
            model, pids, pmask, cids, cmask, log_softmax_fn=_selective_log_softmax
        )
        loss = -(logps * cmask).sum() / cmask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        steps += 1
    if target is None or steps == cfg.sft_steps:
        probe_pass = heldout_pass_rate(model, probe, cfg, device)
    _sync(device)
    return SFTResult(model, time.perf_counter() - t0, steps, probe_pass)


def clear_sft_cache():
    _SFT_CACHE.clear()


# --- RNG state capture -----------------------------------------------------------------------------------------------


def _rng_state(gen: torch.Generator, device: torch.device) -> dict:
    state = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
        "sampler": gen.get_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict, gen: torch.Generator):
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    gen.set_state(state["sampler"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# --- The run ---------------------------------------------------------------------------------------------------------


def budget(cfg: LabConfig, algorithm: str) -> dict:
    """The two budget axes of a run, before it starts: ``optimizer_steps`` (GRPO: ``grpo_steps * num_iterations``;
    offline: ``dpo_steps``) and ``completions_sampled`` (GRPO: ``grpo_steps * prompts_per_step * num_generations``,
    from the current policy; offline: ``dpo_prompts * dpo_samples_per_prompt``, all from the SFT policy)."""
    _config(cfg)
    _algorithm(algorithm)
    if algorithm == "grpo":
        return {
            "optimizer_steps": cfg.grpo_steps * cfg.num_iterations,
            "completions_sampled": cfg.grpo_steps
            * cfg.prompts_per_step
            * cfg.num_generations,
        }
    return {
        "optimizer_steps": cfg.dpo_steps,
        "completions_sampled": cfg.dpo_prompts * cfg.dpo_samples_per_prompt,
    }


def _algorithm(algorithm) -> str:
    if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    return algorithm


class LabRun:
    """One GRPO or offline (DPO, DPO+NLL, RFT) run after SFT: state, one ``step()``, evaluation, exact checkpoints."""

    def __init__(
        self,
        cfg: LabConfig,
        algorithm: str,
        seed: int,
        *,
        device=None,
        _skip_sft: bool = False,
    ):
        _config(cfg)
        _algorithm(algorithm)
        if (
            isinstance(seed, bool)
            or not isinstance(seed, (int, np.integer))
            or seed < 0
        ):
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.cfg, self.algorithm, self.seed = cfg, algorithm, int(seed)
        self.device = _device(device) if device is not None else _resolve_device(cfg)
        self.task = make_task(cfg)
        self.heldout = self.task.heldout_prompts()
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(_derived_seed(self.seed, "sampling"))
        if _skip_sft:  # resuming: the checkpoint supplies every weight (and the history the SFT facts)
            sft = SFTResult(make_model(cfg).to(self.device), 0.0, 0, float("nan"))
        else:
            sft = sft_warmup(cfg, self.seed, self.device)
        self.policy = sft.model
        self.ref = copy.deepcopy(self.policy).requires_grad_(False)
        self.ref_version = 0
        self.stream = PromptStream(
            self.task.train_prompts(), _derived_seed(self.seed, "data")
        )
        lr = cfg.grpo_lr if algorithm == "grpo" else cfg.dpo_lr
        self.opt, self.sched = _optimizer(self.policy.parameters(), lr, cfg)
        self.total_steps = cfg.grpo_steps if algorithm == "grpo" else cfg.dpo_steps
        self.eval_interval = (
            cfg.eval_every
            if algorithm == "grpo"
            else (cfg.offline_eval_every or cfg.eval_every)
        )
        self.step_count = 0
        self.optimizer_steps = 0
        self.completions_sampled = 0
        self.tokens_generated = 0
        self.wall_time = 0.0
        self.pairs = None  # DPO preference set (token ids, masks, reference log-probs)
        self.pair_cursor = {"epoch": 0, "pos": 0}
        self.history = LabHistory(
            algorithm=algorithm,
            seed=self.seed,
            config=cfg.to_dict(),
            n_parameters=count_parameters(self.policy),
            sft_steps=sft.steps,
            sft_probe_pass_rate=sft.probe_pass_rate,
            sft_wall_time_s=sft.seconds,
        )
        torch.manual_seed(_derived_seed(self.seed, "global-torch"))
        np.random.seed(_derived_seed(self.seed, "global-numpy") % 2**32)
        random.seed(_derived_seed(self.seed, "global-python"))

    # -- evaluation --
    def evaluate(self):
        """Append the held-out pass rate (and, for DPO, the margin on all pairs) at the current step."""
        with _threads(self.cfg, self.device):
            self._evaluate()

    def _evaluate(self):
        h = self.history
        h.eval_step.append(self.step_count)
        h.heldout_pass_rate.append(
            heldout_pass_rate(self.policy, self.heldout, self.cfg, self.device)
        )
        if self.cfg.eval_samples:  # its own generator, reseeded per evaluation: the training stream is untouched
            gen = torch.Generator(device=self.device)
            gen.manual_seed(_derived_seed(self.seed, f"eval-{self.step_count}"))
            h.heldout_pass_rate_sampled.append(
                heldout_pass_rate(
                    self.policy,
                    self.heldout,
                    self.cfg,
                    self.device,
                    samples=self.cfg.eval_samples,
                    generator=gen,
                )
            )
        h.eval_tokens_generated.append(self.tokens_generated)
        h.eval_optimizer_steps.append(self.optimizer_steps)
        h.eval_completions_sampled.append(self.completions_sampled)
        h.eval_wall_time_s.append(self.wall_time)
        if self.algorithm in OFFLINE and self.pairs is not None:
            h.eval_pair_margin.append(self.pair_margin())

    # -- DPO --
    @torch.no_grad()
    def build_preference_set(self):
        """Sample the SFT policy offline; one (correct, wrong) pair per prompt that has both; reference log-probs
        precomputed once (the reference is the frozen SFT copy, so it never has to be run again)."""
        cfg, dev = self.cfg, self.device
        k = cfg.dpo_samples_per_prompt
        prompts = self.stream.next(cfg.dpo_prompts)
        rows = {"prompt": [], "chosen": [], "rejected": []}
        n_tokens = 0
        per_chunk = 128 if dev.type == "cpu" else 1024  # prompts per sampling batch
        for i in range(0, len(prompts), per_chunk):
            chunk = prompts[i : i + per_chunk]
            rep = [p for p in chunk for _ in range(k)]
            pids, pmask = encode_prompts(rep, dev)
            ro = generate(
                self.policy,
                pids,
                pmask,
                cfg.max_completion_length,
                temperature=cfg.temperature,
                generator=self.gen,
            )
            n_tokens += int(ro.completion_mask.sum().item())
            ok = score(
                rep,
                ro.completion_ids,
                ro.finished,
                dataclasses.replace(cfg, reward="correct"),
            )[:, 0]
            texts = [VOCAB.decode(r) for r in ro.completion_ids.tolist()]
            fin = ro.finished.tolist()
            for j, p in enumerate(chunk):
                group = range(j * k, (j + 1) * k)
                good = [g for g in group if ok[g] > 0]
                # a truncated sample is not a clean answer
                wrong = [g for g in group if ok[g] == 0 and fin[g]]
                if good and wrong:
                    rows["prompt"].append(p)
                    rows["chosen"].append(texts[good[0]])
                    rows["rejected"].append(texts[wrong[0]])
        self.tokens_generated += n_tokens
        self.completions_sampled += len(prompts) * k
        n = len(rows["prompt"])
        self.history.n_pairs = n
        self.history.frac_prompts_without_pair = 1.0 - n / len(prompts)
        if n == 0:
            raise RuntimeError(
                "the SFT policy produced no (correct, wrong) pair; raise dpo_prompts or sft_steps"
            )
        width = cfg.max_completion_length
        pids, pmask = encode_prompts(rows["prompt"], dev)
        cids, cmask = encode_completions(rows["chosen"], width, dev)
        rids, rmask = encode_completions(rows["rejected"], width, dev)
        ref_c = (self.logps(self.ref, pids, pmask, cids, cmask) * cmask).sum(1)
        ref_r = (self.logps(self.ref, pids, pmask, rids, rmask) * rmask).sum(1)
        self.pairs = {
            "prompt_ids": pids,
            "prompt_mask": pmask,
            "chosen_ids": cids,
            "chosen_mask": cmask,
            "rejected_ids": rids,
            "rejected_mask": rmask,
            "ref_chosen": ref_c,
            "ref_rejected": ref_r,
            "prompts": rows["prompt"],
            "chosen": rows["chosen"],
            "rejected": rows["rejected"],
        }

    def logps(self, model, pids, pmask, cids, cmask, temperature=1.0):
        """Per-token completion log-probs ``(B, L)`` of ``model`` (policy or reference), via selective_log_softmax."""
        return completion_logps(
            model,
            pids,
            pmask,
            cids,
            cmask,
            temperature=temperature,
            log_softmax_fn=_selective_log_softmax,
        )

    def _pair_batch(self):
        n = self.pairs["prompt_ids"].shape[0]
        c = self.pair_cursor
        idx = []
        while len(idx) < min(self.cfg.dpo_batch_size, n):
            perm = np.random.default_rng(
                [_derived_seed(self.seed, "pairs"), c["epoch"]]
            ).permutation(n)
            take = min(self.cfg.dpo_batch_size - len(idx), n - c["pos"])
            idx.extend(perm[c["pos"] : c["pos"] + take].tolist())
            c["pos"] += take
            if c["pos"] == n:
                c["epoch"], c["pos"] = c["epoch"] + 1, 0
        return torch.tensor(idx, device=self.device)

    def _dpo_forward(self, idx):
        p = self.pairs
        pids, pmask = p["prompt_ids"][idx], p["prompt_mask"][idx]
        both_p = torch.cat([pids, pids]), torch.cat([pmask, pmask])
        both_c = torch.cat([p["chosen_ids"][idx], p["rejected_ids"][idx]])
        both_m = torch.cat([p["chosen_mask"][idx], p["rejected_mask"][idx]])
        # one forward, as TRL does
        tok = self.logps(self.policy, *both_p, both_c, both_m) * both_m
        seq = tok.sum(1)
        k = idx.shape[0]
        # TRL's "sft" loss: token mean over chosen completions
        nll_chosen = -tok[:k].sum() / both_m[:k].sum()
        return seq[:k], seq[k:], int(both_m.sum().item()), nll_chosen

    @torch.no_grad()
    def pair_margin(self) -> float:
        """Mean implicit reward margin ``beta * [(pi_c - ref_c) - (pi_r - ref_r)]`` over all training pairs."""
        idx = torch.arange(self.pairs["prompt_ids"].shape[0], device=self.device)
        pc, pr, _, _ = self._dpo_forward(idx)
        out = torch_ops.dpo_loss(
            pc,
            pr,
            self.pairs["ref_chosen"],
            self.pairs["ref_rejected"],
            beta=self.cfg.dpo_beta,
            loss_type=self.cfg.dpo_loss_type,
            label_smoothing=self.cfg.dpo_label_smoothing,
        )
        return float((out.chosen_rewards - out.rejected_rewards).mean())

    def dpo_step(self) -> dict:
        """One offline step on a batch of pairs: ``dpo`` minimises the DPO loss, ``dpo+nll`` adds
        ``dpo_sft_weight`` times the chosen completions' NLL, ``rft`` minimises that NLL alone (the same forward
        pass on the same batch in all three, so the implicit-reward metrics are logged for each)."""
        cfg = self.cfg
        idx = self._pair_batch()
        pc, pr, n_tok, nll_chosen = self._dpo_forward(idx)
        out = torch_ops.dpo_loss(
            pc,
            pr,
            self.pairs["ref_chosen"][idx],
            self.pairs["ref_rejected"][idx],
            beta=cfg.dpo_beta,
            loss_type=cfg.dpo_loss_type,
            label_smoothing=cfg.dpo_label_smoothing,
        )
        if self.algorithm == "dpo":
            loss = out.loss
        elif self.algorithm == "dpo+nll":
            loss = out.loss + cfg.dpo_sft_weight * nll_chosen
        else:  # rft
            loss = nll_chosen
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(
            self.policy.parameters(), cfg.max_grad_norm
        )
        lr = self.opt.param_groups[0]["lr"]
        self.opt.step()
        self.sched.step()
        cr, rr = out.chosen_rewards.detach(), out.rejected_rewards.detach()
        return {
            "loss": float(loss.detach()),
            "grad_norm": float(gnorm),
            "lr": lr,
            "tokens": n_tok,
            "nll": float(nll_chosen.detach()),
            "rewards_chosen": float(cr.mean()),
            "rewards_rejected": float(rr.mean()),
            "rewards_margin": float((cr - rr).mean()),
            "rewards_accuracy": float((cr > rr).float().mean()),
        }

    # -- GRPO: the seven steps of one update --
    def grpo_step(self) -> dict:
        cfg, dev = self.cfg, self.device
        g = cfg.num_generations
        t0 = time.perf_counter()
        # (1) pick prompts; each appears num_generations times in a row (one group)
        prompts = self.stream.next(cfg.prompts_per_step)
        rep = [p for p in prompts for _ in range(g)]
        pids, pmask = encode_prompts(rep, dev)
        # (2) freeze the sampling snapshot: sample from pi_old, keep ids, masks and old log-probs (never re-tokenise)
        ro = generate(
            self.policy,
            pids,
            pmask,
            cfg.max_completion_length,
            temperature=cfg.temperature,
            generator=self.gen,
        )
        cids, cmask, old_logps = ro.completion_ids, ro.completion_mask, ro.logps
        _sync(dev)
        t1 = time.perf_counter()
        # (3) score with the verifier; (4) group statistics -> one advantage per completion
        rpf = score(rep, cids, ro.finished, cfg).to(dev)
        adv, rewards, rmetrics = torch_ops.reward_advantages(
            rpf, g, reward_weights=reward_weights(cfg), scale_rewards=cfg.scale_rewards
        )
        _sync(dev)
        t2 = time.perf_counter()
        # (5) reference log-probs (frozen), then current log-probs inside the update loop
        ref_logps = None
        if cfg.beta != 0:
            with torch.no_grad():
                ref_logps = self.logps(
                    self.ref, pids, pmask, cids, cmask, cfg.temperature
                )
        _sync(dev)
        t3 = time.perf_counter()
        sums = {
            "loss": 0.0,
            "grad_norm": 0.0,
            "low": 0.0,
            "high": 0.0,
            "region": 0.0,
            "kl": 0.0,
        }
        gap = float("nan")
        m = cmask.float()
        for it in range(cfg.num_iterations):
            new_logps = self.logps(
                self.policy, pids, pmask, cids, cmask, cfg.temperature
            )
            if (
                it == 0
            ):  # sampler vs trainer: same weights, different kernels/shapes -> tiny log-prob gap
                gap = float(((new_logps.detach() - old_logps).abs() * m).max())
            # (6) per-token clipped loss + beta * k3, masked and normalised by loss_type
            out = torch_ops.grpo_loss(
                new_logps,
                old_logps,
                ref_logps,
                adv,
                m,
                epsilon=cfg.epsilon,
                beta=cfg.beta,
                loss_type=cfg.loss_type,
                importance_sampling_level=cfg.importance_sampling_level,
                epsilon_high=cfg.epsilon_high,
                delta=cfg.delta,
                use_bias_correction_kl=cfg.use_bias_correction_kl,
                max_completion_length=cfg.max_completion_length,
            )
            # (7) update and monitor
            self.opt.zero_grad(set_to_none=True)
            out.loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(
                self.policy.parameters(), cfg.max_grad_norm
            )
            self.opt.step()
            mt = out.metrics
            sums["loss"] += float(out.loss.detach())
            sums["grad_norm"] += float(gnorm)
            sums["low"] += float(mt["clip_ratio/low_mean"])
            sums["high"] += float(mt["clip_ratio/high_mean"])
            sums["region"] += float(mt["clip_ratio/region_mean"])
            sums["kl"] += float(mt["kl"]) if "kl" in mt else float("nan")
        lr = self.opt.param_groups[0]["lr"]
        self.sched.step()
        if (
            cfg.ref_sync_steps is not None
            and (self.step_count + 1) % cfg.ref_sync_steps == 0
        ):
            with torch.no_grad():
                for pr, pp in zip(self.ref.parameters(), self.policy.parameters()):
                    pr.mul_(1 - cfg.ref_mixup_alpha).add_(
                        pp.detach(), alpha=cfg.ref_mixup_alpha
                    )
            self.ref_version += 1
        _sync(dev)
        t4 = time.perf_counter()
        k = cfg.num_iterations
        n_tok = int(cmask.sum().item())
        correct = rpf[:, 0]
        groups = correct.view(-1, g)
        return {
            "loss": sums["loss"] / k,
            "grad_norm": sums["grad_norm"] / k,
            "lr": lr,
            "tokens": n_tok,
            "reward_mean": float(rmetrics["reward"]),
            "reward_std": float(rmetrics["reward_std"]),
            "frac_reward_zero_std": float(rmetrics["frac_reward_zero_std"]),
            "train_pass_rate": float(correct.mean()),
            "frac_groups_all_correct": float(
                (groups.min(1).values == 1).float().mean()
            ),
            "frac_groups_all_wrong": float((groups.max(1).values == 0).float().mean()),
            "clip_ratio_low": sums["low"] / k,
            "clip_ratio_high": sums["high"] / k,
            "clip_ratio_region": sums["region"] / k,
            "kl": sums["kl"] / k,
            "completion_length": float(m.sum(1).mean()),
            "frac_truncated": float((~ro.finished).float().mean()),
            "sampler_logp_gap": gap,
            "rollout_time_s": t1 - t0,
            "score_time_s": t2 - t1,
            "reference_time_s": t3 - t2,
            "train_time_s": t4 - t3,
            "ref_version": self.ref_version,
        }

    # -- driver --
    def step(self):
        """One optimisation step (GRPO: one rollout and ``num_iterations`` updates; DPO: one batch of pairs)."""
        if self.step_count >= self.total_steps:
            raise RuntimeError("the run is finished")
        with _threads(self.cfg, self.device):
            self._step()

    def _step(self):
        _reset_peak(self.device)
        t0 = time.perf_counter()
        if self.algorithm in OFFLINE:
            if self.pairs is None:
                self.build_preference_set()
            rec = self.dpo_step()
            self.optimizer_steps += 1
        else:
            rec = self.grpo_step()
            self.tokens_generated += rec["tokens"]
            self.optimizer_steps += self.cfg.num_iterations
            self.completions_sampled += (
                self.cfg.prompts_per_step * self.cfg.num_generations
            )
        _sync(self.device)
        seconds = time.perf_counter() - t0
        self.wall_time += seconds
        self.step_count += 1
        h = self.history
        h.step.append(self.step_count)
        h.tokens_generated.append(self.tokens_generated)
        h.optimizer_steps.append(self.optimizer_steps)
        h.completions_sampled.append(self.completions_sampled)
        h.wall_time_s.append(self.wall_time)
        h.tokens_per_s.append(rec.pop("tokens") / max(seconds, 1e-9))
        h.peak_memory_bytes.append(_memory_bytes(self.device))
        for name, value in rec.items():
            getattr(h, name).append(value)
        if (
            self.step_count % self.eval_interval == 0
            or self.step_count == self.total_steps
        ):
            self.evaluate()

    @property
    def finished(self) -> bool:
        return self.step_count >= self.total_steps

    # -- checkpoints --
    def state_dict(self) -> dict:
        """Everything that determines the rest of the run (tensors on CPU)."""

        def cpu(sd):
            return {
                k: v.detach().cpu().clone() if torch.is_tensor(v) else copy.deepcopy(v)
                for k, v in sd.items()
            }

        pairs = None
        if self.pairs is not None:
            pairs = {
                k: (v.cpu() if torch.is_tensor(v) else list(v))
                for k, v in self.pairs.items()
            }
        return {
            "format": CHECKPOINT_FORMAT,
            "algorithm": self.algorithm,
            "seed": self.seed,
            "config": self.cfg.to_dict(),
            "generation": {
                "temperature": self.cfg.temperature,
                "max_completion_length": self.cfg.max_completion_length,
                "num_generations": self.cfg.num_generations,
            },
            "step": self.step_count,
            "tokens_generated": self.tokens_generated,
            "wall_time_s": self.wall_time,
            "optimizer_steps": self.optimizer_steps,
            "completions_sampled": self.completions_sampled,
            "policy": cpu(self.policy.state_dict()),
            "reference": cpu(self.ref.state_dict()),
            "ref_version": self.ref_version,
            "optimizer": copy.deepcopy(self.opt.state_dict()),
            "scheduler": self.sched.state_dict(),
            "rng": _rng_state(self.gen, self.device),
            "data_cursor": self.stream.state_dict(),
            "pair_cursor": dict(self.pair_cursor),
            "pairs": pairs,
            "history": self.history.as_dict(),
        }

    def save(self, path):
        torch.save(self.state_dict(), path)

    @classmethod
    def from_checkpoint(
        cls, path_or_state, *, cfg: LabConfig | None = None, device=None
    ) -> "LabRun":
        if isinstance(path_or_state, dict):
            state = path_or_state
        else:  # our own file: it holds numpy/python RNG states, hence weights_only=False
            state = torch.load(path_or_state, map_location="cpu", weights_only=False)
        if state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"unknown checkpoint format {state.get('format')!r}")
        saved_cfg = LabConfig(**state["config"])
        if cfg is not None and cfg != saved_cfg:
            diff = [k for k, v in cfg.to_dict().items() if state["config"][k] != v]
            raise ValueError(
                f"the checkpoint was written with a different config (fields {diff})"
            )
        run = cls(
            saved_cfg, state["algorithm"], state["seed"], device=device, _skip_sft=True
        )
        run.policy.load_state_dict(state["policy"])
        run.ref.load_state_dict(state["reference"])
        run.ref_version = state["ref_version"]
        run.opt.load_state_dict(state["optimizer"])
        run.sched.load_state_dict(state["scheduler"])
        run.stream.load_state_dict(state["data_cursor"])
        run.pair_cursor = dict(state["pair_cursor"])
        if state["pairs"] is not None:
            run.pairs = {
                k: (v.to(run.device) if torch.is_tensor(v) else list(v))
                for k, v in state["pairs"].items()
            }
        run.step_count, run.tokens_generated = state["step"], state["tokens_generated"]
        run.optimizer_steps, run.completions_sampled = (
            state["optimizer_steps"],
            state["completions_sampled"],
        )
        run.wall_time = state["wall_time_s"]
        run.history = LabHistory(**state["history"])
        _set_rng_state(state["rng"], run.gen)
        return run


def run_lab(
    config: LabConfig | None = None,
    algorithm: str = "grpo",
    seed: int = 0,
    *,
    device=None,
    checkpoint_path=None,
    checkpoint_every: int | None = None,
    resume_from=None,
    stop_after: int | None = None,
) -> LabHistory:
    """SFT warm-up, then ``config.grpo_steps`` GRPO steps or ``config.dpo_steps`` steps of an offline method
    (``algorithm`` in ``"dpo"``, ``"dpo+nll"``, ``"rft"``); returns the history.

    ``checkpoint_path`` + ``checkpoint_every=k`` write a checkpoint after every k-th step (overwriting);
    ``resume_from`` continues a saved run exactly (config, algorithm and seed come from the checkpoint and must
    agree with the ones given, if given); ``stop_after=n`` returns after step n (to simulate an interruption).
    ``history.policy`` is the final policy.
    """
    cfg = LabConfig.preset("cpu") if config is None else config
    if not isinstance(cfg, LabConfig):
        raise TypeError(f"config must be a LabConfig, got {type(cfg).__name__}")
    cfg.validate()
    _algorithm(algorithm)
    if checkpoint_every is not None and (
        not isinstance(checkpoint_every, int) or checkpoint_every < 1
    ):
        raise ValueError(
            f"checkpoint_every must be a positive integer, got {checkpoint_every!r}"
        )
    if checkpoint_every is not None and checkpoint_path is None:
        raise ValueError("checkpoint_every needs checkpoint_path")
    if stop_after is not None and (not isinstance(stop_after, int) or stop_after < 0):
        raise ValueError(
            f"stop_after must be a non-negative integer, got {stop_after!r}"
        )
    dev = _device(device) if device is not None else _resolve_device(cfg)
    with _threads(cfg, dev):
        if resume_from is not None:
            run = LabRun.from_checkpoint(resume_from, cfg=cfg, device=dev)
            if run.algorithm != algorithm or run.seed != seed:
                raise ValueError(
                    f"the checkpoint is a {run.algorithm!r} run with seed {run.seed}, "
                    f"not {algorithm!r} with seed {seed}"
                )
        else:
            run = LabRun(cfg, algorithm, seed, device=dev)
            run.evaluate()  # the SFT start
        while not run.finished and (stop_after is None or run.step_count < stop_after):
            run.step()
            if checkpoint_every is not None and run.step_count % checkpoint_every == 0:
                run.save(checkpoint_path)
        run.history.policy = run.policy
        return run.history
