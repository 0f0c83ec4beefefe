"""A lab run: :class:`LabRun` holds its state (policy, frozen reference, optimiser,
prompt stream, counters, history) and checkpoints it exactly; :func:`run_lab` runs one
to the end. What a step does is the algorithm's (:data:`ALGORITHM_STEPS`: GRPO in
:mod:`dpo_grpo.lab.grpo`, PPO with a critic in :mod:`dpo_grpo.lab.ppo`, the offline
methods in :mod:`dpo_grpo.lab.offline`); a new algorithm is one more
:class:`dpo_grpo.lab.algorithm.Algorithm` in that table.

Determinism: on CPU a run is a function of ``(config, algorithm, seed)`` (same torch
build and CPU type): the model initialisation, data order and sampling use their own
seeded generators, and ``cpu_threads`` fixes the number of intra-op threads while the
run lasts. A checkpoint saved mid-run resumes to the same result, bit for bit. On a
GPU, runs are reproducible only up to the non-determinism of the CUDA kernels.
"""

from __future__ import annotations

import copy
import multiprocessing
import random
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import numpy as np
import torch

from .. import _validation as v
from .algorithm import Algorithm
from .config import LabConfig, checked_config
from .evaluation import heldout_pass_rate
from .grpo import GRPO
from .history import LabHistory
from .model import count_parameters, make_model
from .offline import OFFLINE, Offline, build_preference_set, pair_margin
from .online_rft import OnlineRFT
from .ppo import PPO
from .progress import bar, wanted
from .rloo import RLOO
from .runtime import (
    as_device,
    derived_seed,
    memory_bytes,
    reset_peak_memory,
    resolve_device,
    rng_state,
    set_rng_state,
    synchronize,
    torch_threads,
)
from .sft import SFTResult, sft_warmup
from .task import PromptStream, make_task, policy_logps

#: what each algorithm's step is (add an entry to add an algorithm); the first five
#: are the chain that changes one ingredient at a time, offline RFT to PPO
ALGORITHM_STEPS: dict[str, type[Algorithm]] = {
    "rft": Offline,
    "online_rft": OnlineRFT,
    "rloo": RLOO,
    "grpo": GRPO,
    "ppo": PPO,
    **{name: Offline for name in OFFLINE if name != "rft"},
}
ALGORITHMS = tuple(ALGORITHM_STEPS)
CHECKPOINT_FORMAT = 2


def checked_algorithm(algorithm) -> str:
    """``algorithm`` if it is one of :data:`ALGORITHMS`, else a ValueError."""
    if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    return algorithm


def budget(cfg: LabConfig, algorithm: str) -> dict:
    """The two budget axes of a run, before it starts: ``optimizer_steps`` (online
    methods, GRPO, PPO, online RFT and RLOO: ``grpo_steps * num_iterations``; offline:
    ``dpo_steps``) and ``completions_sampled`` (online: ``grpo_steps *
    prompts_per_step * num_generations``, from the current policy; offline:
    ``dpo_prompts * dpo_samples_per_prompt``, all from the SFT policy). Token passes
    (``forward_tokens``, ``backward_tokens``) are counted as a run goes."""
    checked_config(cfg)
    return ALGORITHM_STEPS[checked_algorithm(algorithm)].budget(cfg)


def make_optimizer(params, lr: float, cfg: LabConfig):
    """``(AdamW, LambdaLR)``: weight decay ``cfg.weight_decay``, linear warm-up over
    ``cfg.warmup_steps`` steps, then constant."""
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=cfg.weight_decay, foreach=False)
    warm = cfg.warmup_steps
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / (warm + 1)) if warm else 1.0
    )
    return opt, sched


class LabRun:
    """One online (GRPO, PPO, online RFT, RLOO) or offline (DPO, DPO+NLL, RFT) run
    after SFT: state, one
    ``step()``, evaluation, exact checkpoints."""

    def __init__(
        self,
        cfg: LabConfig,
        algorithm: str,
        seed: int,
        *,
        device=None,
        _skip_sft: bool = False,
    ):
        checked_config(cfg)
        self.method = ALGORITHM_STEPS[checked_algorithm(algorithm)]
        if (
            isinstance(seed, bool)
            or not isinstance(seed, (int, np.integer))
            or seed < 0
        ):
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.cfg, self.algorithm, self.seed = cfg, algorithm, int(seed)
        self.device = as_device(device) if device is not None else resolve_device(cfg)
        self.task = make_task(cfg, self.seed)
        self.heldout = self.task.heldout_prompts()
        carry = [
            self.task.answer(t) != self.task.no_carry_answer(t)
            for t in self.task.heldout_problems
        ]
        self.heldout_by_class = {
            "carry": [p for p, c in zip(self.heldout, carry) if c],
            "nocarry": [p for p, c in zip(self.heldout, carry) if not c],
        }
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(derived_seed(self.seed, "sampling"))
        if _skip_sft:
            # resuming: the checkpoint supplies every weight (and the history the SFT
            # facts)
            sft = SFTResult(make_model(cfg).to(self.device), 0.0, 0, float("nan"))
        else:
            sft = sft_warmup(cfg, self.seed, self.device)
        self.policy = sft.model
        self.ref = copy.deepcopy(self.policy).requires_grad_(False)
        self.ref_version = 0
        self.stream = PromptStream(
            self.task.train_prompts(), derived_seed(self.seed, "data")
        )
        self.opt, self.sched = make_optimizer(
            self.policy.parameters(), self.method.learning_rate(cfg), cfg
        )
        self.total_steps = self.method.total_steps(cfg)
        self.eval_interval = self.method.eval_interval(cfg)
        self.step_count = 0
        self.optimizer_steps = 0
        self.completions_sampled = 0
        self.tokens_generated = 0
        self.forward_tokens = 0
        self.backward_tokens = 0
        self.wall_time = 0.0
        self.pairs = None  # offline preference set (token ids, masks, ref log-probs)
        self.pair_cursor = {"epoch": 0, "pos": 0}
        self.history = LabHistory(
            algorithm=algorithm,
            seed=self.seed,
            config=cfg.to_dict(),
            n_parameters=count_parameters(self.policy),
            n_heldout_prompts=len(self.heldout),
            sft_steps=sft.steps,
            sft_probe_pass_rate=sft.probe_pass_rate,
            sft_wall_time_s=sft.seconds,
        )
        self.method.setup(self)  # the algorithm's own state (PPO: the critic)
        torch.manual_seed(derived_seed(self.seed, "global-torch"))
        np.random.seed(derived_seed(self.seed, "global-numpy") % 2**32)
        random.seed(derived_seed(self.seed, "global-python"))

    # -- evaluation --
    def evaluate(self):
        """Append the held-out pass rates, whole and by class (and, offline, the margin
        on all pairs) at the current step."""
        with torch_threads(self.cfg, self.device):
            self._evaluate()

    def _evaluate(self):
        h = self.history
        h.eval_step.append(self.step_count)
        # each class of held-out prompts (carry / no carry) is scored on its own; the
        # whole set's pass rates are their prompt-weighted means
        n = len(self.heldout)
        whole = {"": 0.0, "sampled_": 0.0}
        for cls, prompts in self.heldout_by_class.items():
            if not prompts:
                continue
            rates = {"": heldout_pass_rate(self.policy, prompts, self.cfg, self.device)}
            if self.cfg.eval_samples:
                # its own generator, reseeded per evaluation: the training stream is
                # untouched
                gen = torch.Generator(device=self.device)
                gen.manual_seed(
                    derived_seed(self.seed, f"eval-{cls}-{self.step_count}")
                )
                rates["sampled_"] = heldout_pass_rate(
                    self.policy,
                    prompts,
                    self.cfg,
                    self.device,
                    samples=self.cfg.eval_samples,
                    generator=gen,
                )
            for kind, rate in rates.items():
                getattr(h, f"heldout_pass_rate_{kind}{cls}").append(rate)
                whole[kind] += rate * len(prompts) / n
        h.heldout_pass_rate.append(whole[""])
        if self.cfg.eval_samples:
            h.heldout_pass_rate_sampled.append(whole["sampled_"])
        h.eval_forward_tokens.append(self.forward_tokens)
        h.eval_backward_tokens.append(self.backward_tokens)
        h.eval_tokens_generated.append(self.tokens_generated)
        h.eval_optimizer_steps.append(self.optimizer_steps)
        h.eval_completions_sampled.append(self.completions_sampled)
        h.eval_wall_time_s.append(self.wall_time)
        self.method.evaluate(self)

    # -- the algorithms' pieces, as methods of the run --
    def new_optimizer(self, params, lr: float):
        """:func:`make_optimizer` with this run's config (the policy's conventions)."""
        return make_optimizer(params, lr, self.cfg)

    def logps(self, model, pids, pmask, cids, cmask, temperature=1.0):
        """Per-token completion log-probs ``(B, L)`` of ``model`` (policy or
        reference): :func:`dpo_grpo.lab.task.policy_logps`."""
        return policy_logps(model, pids, pmask, cids, cmask, temperature)

    def build_preference_set(self):
        """:func:`dpo_grpo.lab.offline.build_preference_set` on this run."""
        build_preference_set(self)

    def pair_margin(self) -> float:
        """:func:`dpo_grpo.lab.offline.pair_margin` on this run."""
        return pair_margin(self)

    # -- driver --
    def step(self):
        """One optimisation step (GRPO, PPO: one rollout and ``num_iterations``
        updates; offline: one batch of pairs)."""
        if self.step_count >= self.total_steps:
            raise RuntimeError("the run is finished")
        with torch_threads(self.cfg, self.device):
            self._step()

    def _step(self):
        reset_peak_memory(self.device)
        t0 = time.perf_counter()
        rec = self.method.step(self)
        synchronize(self.device)
        seconds = time.perf_counter() - t0
        self.wall_time += seconds
        self.step_count += 1
        h = self.history
        h.step.append(self.step_count)
        h.tokens_generated.append(self.tokens_generated)
        h.optimizer_steps.append(self.optimizer_steps)
        h.completions_sampled.append(self.completions_sampled)
        h.forward_tokens.append(self.forward_tokens)
        h.backward_tokens.append(self.backward_tokens)
        h.wall_time_s.append(self.wall_time)
        h.tokens_per_s.append(rec.pop("tokens") / max(seconds, 1e-9))
        h.peak_memory_bytes.append(memory_bytes(self.device))
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
            "forward_tokens": self.forward_tokens,
            "backward_tokens": self.backward_tokens,
            "policy": cpu(self.policy.state_dict()),
            "reference": cpu(self.ref.state_dict()),
            "ref_version": self.ref_version,
            "optimizer": copy.deepcopy(self.opt.state_dict()),
            "scheduler": self.sched.state_dict(),
            "rng": rng_state(self.gen),
            "data_cursor": self.stream.state_dict(),
            "pair_cursor": dict(self.pair_cursor),
            "pairs": pairs,
            "algorithm_state": self.method.state_dict(self),
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
        else:
            # our own file: it holds numpy/python RNG states, hence weights_only=False
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
        # checkpoints written before token passes were counted have none
        run.forward_tokens = state.get("forward_tokens", 0)
        run.backward_tokens = state.get("backward_tokens", 0)
        # checkpoints written before algorithms had their own state have none
        run.method.load_state_dict(run, state.get("algorithm_state") or {})
        run.history = LabHistory(**state["history"])
        set_rng_state(state["rng"], run.gen)
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
    progress: bool | None = None,
) -> LabHistory:
    """SFT warm-up, then ``config.grpo_steps`` steps of an online method (``"grpo"``;
    ``"ppo"``, with a critic: :mod:`dpo_grpo.lab.ppo`; ``"online_rft"``:
    :mod:`dpo_grpo.lab.online_rft`; ``"rloo"``: :mod:`dpo_grpo.lab.rloo`), or
    ``config.dpo_steps`` steps of an offline method (``algorithm`` in ``"dpo"``,
    ``"dpo+nll"``, ``"rft"``); returns the history.

    ``checkpoint_path`` + ``checkpoint_every=k`` write a checkpoint after every k-th
    step (overwriting); ``resume_from`` continues a saved run exactly (config, algorithm
    and seed come from the checkpoint and must agree with the ones given, if given);
    ``stop_after=n`` returns after step n (to simulate an interruption).
    ``progress``: a bar over the steps with the time left (None: where someone
    watches, :mod:`dpo_grpo.lab.progress`). ``history.policy`` is the final policy
    (and, for PPO, ``history.critic`` the final critic)."""
    cfg = LabConfig.preset("cpu") if config is None else config
    if not isinstance(cfg, LabConfig):
        raise TypeError(f"config must be a LabConfig, got {type(cfg).__name__}")
    cfg.validate()
    checked_algorithm(algorithm)
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
    show = wanted(progress)
    dev = as_device(device) if device is not None else resolve_device(cfg)
    with torch_threads(cfg, dev):
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
        shown = bar(run.total_steps - run.step_count, f"{algorithm} seed {seed}", show)
        try:
            while not run.finished and (
                stop_after is None or run.step_count < stop_after
            ):
                run.step()
                shown.update(1)
                if (
                    checkpoint_every is not None
                    and run.step_count % checkpoint_every == 0
                ):
                    run.save(checkpoint_path)
        finally:
            shown.close()
        run.history.policy = run.policy
        run.history.critic = getattr(run, "critic", None)
        return run.history


def _run_and_record(job, record):
    cfg, algorithm, seed = job
    return record(run_lab(cfg, algorithm=algorithm, seed=seed, progress=False))


def run_many(jobs, record, workers: int = 1):
    """Run :func:`run_lab` for every ``(config, algorithm, seed)`` of ``jobs`` and
    yield ``(index, record(history))`` as each run ends: in order with ``workers=1``,
    else in ``workers`` processes, in the order they finish. ``record`` must be a
    module-level function (it crosses processes). Every run is seeded, so what a run
    records does not depend on ``workers``."""
    jobs = list(jobs)
    workers = v.integer(workers, "workers", minimum=1)
    if workers == 1:
        for i, job in enumerate(jobs):
            yield i, _run_and_record(job, record)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        futures = {
            pool.submit(_run_and_record, job, record): i for i, job in enumerate(jobs)
        }
        for done in as_completed(futures):
            yield futures[done], done.result()
