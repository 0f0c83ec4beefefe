"""The lab's experiment with TRL 1.16.0's trainers: its hyper-parameters by their TRL
names, its reward function and data in TRL's formats, a recorder that recomputes TRL's
logged GRPO metrics with this package, and the ``accelerate`` / DeepSpeed ZeRO
configurations that take the run to several GPUs and nodes (needs ``trl``).

TRL works with Hugging Face models, so the model side is :mod:`dpo_grpo.lab.hf` (a
pretrained instruct model, or its tiny random twin offline); the task, the verifier, the
prompts and the hyper-parameters are the lab's.
"""

from __future__ import annotations

import contextlib
import json
import os

import torch

from .. import _validation as v
from .. import torch_ops
from .config import GRPOTaskConfig, LabConfig, checked_config
from .hf import encode_chat_prompts, hf_logps
from .model import verify
from .runtime import derived_seed
from .task import PromptStream, make_task
from .trl_names import GRPO_NAMES as GRPO_NAMES
from .trl_names import grpo_names_text as grpo_names_text
from .trl_names import trl_defaults_text as trl_defaults_text

#: (lab field, TRL 1.16.0 DPOConfig field, how it maps) for the offline runs
DPO_NAMES = (
    ("dpo_lr", "learning_rate", "same value"),
    ("dpo_batch_size", "per_device_train_batch_size", "same value (pairs per step)"),
    ("dpo_steps", "max_steps", "same value"),
    ("dpo_beta", "beta", "same value"),
    (
        "dpo_loss_type",
        "loss_type",
        "'dpo': [dpo_loss_type]; 'dpo+nll': [dpo_loss_type, 'sft']",
    ),
    ("dpo_sft_weight", "loss_weights", "'dpo+nll': [1.0, dpo_sft_weight]"),
    ("dpo_label_smoothing", "label_smoothing", "same value"),
    ("max_grad_norm", "max_grad_norm", "same value"),
    ("warmup_steps", "warmup_steps", "with lr_scheduler_type='constant_with_warmup'"),
    ("(frozen SFT reference, precomputed)", "precompute_ref_log_probs", "True"),
)


def grpo_args(cfg, output_dir: str, **overrides) -> dict:
    """Keyword arguments of ``trl.GRPOConfig`` that reproduce the lab's GRPO settings
    (one process; see :data:`GRPO_NAMES`). ``overrides`` replace or add TRL fields
    (``use_vllm``, ``bf16``, ...)."""
    checked_config(cfg, GRPOTaskConfig)
    # fields only a LabConfig has (an HFLabConfig takes TRL's defaults of the lab)
    get = lambda name, default=None: getattr(cfg, name, default)  # noqa: E731
    sync = get("ref_sync_steps")
    args = dict(
        output_dir=str(output_dir),
        learning_rate=cfg.grpo_lr,
        num_generations=cfg.num_generations,
        per_device_train_batch_size=cfg.prompts_per_step * cfg.num_generations,
        num_iterations=cfg.num_iterations,
        max_steps=cfg.grpo_steps * cfg.num_iterations,
        epsilon=cfg.epsilon,
        epsilon_high=cfg.epsilon_high,
        delta=cfg.delta,
        beta=cfg.beta,
        loss_type=cfg.loss_type,
        importance_sampling_level=cfg.importance_sampling_level,
        use_bias_correction_kl=cfg.use_bias_correction_kl,
        scale_rewards=cfg.scale_rewards,
        temperature=cfg.temperature,
        top_p=1.0,
        top_k=0,
        max_completion_length=cfg.max_completion_length,
        max_grad_norm=cfg.max_grad_norm,
        weight_decay=get("weight_decay", 0.0),
        lr_scheduler_type="constant_with_warmup",
        # the lab's scheduler steps once per rollout: its warm-up spans
        # warmup_steps x num_iterations optimiser steps, TRL's unit
        warmup_steps=get("warmup_steps", 0) * cfg.num_iterations,
        sync_ref_model=sync is not None,
        ref_model_sync_steps=sync or 512,
        ref_model_mixup_alpha=get("ref_mixup_alpha", 0.6),
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        shuffle_dataset=False,
        disable_dropout=True,
    )
    if isinstance(cfg, LabConfig) and cfg.reward == "length_bonus":
        args["reward_weights"] = [1.0, cfg.length_bonus]
    args.update(overrides)
    return args


def dpo_args(
    cfg: LabConfig, output_dir: str, algorithm: str = "dpo+nll", **overrides
) -> dict:
    """Keyword arguments of ``trl.DPOConfig`` for the lab's offline methods (``"dpo"``
    or ``"dpo+nll"``; RFT is TRL's ``SFTTrainer`` on the chosen completions)."""
    if not isinstance(cfg, LabConfig):
        raise TypeError(f"cfg must be a LabConfig, got {type(cfg).__name__}")
    if algorithm not in ("dpo", "dpo+nll"):
        raise ValueError(f"algorithm must be 'dpo' or 'dpo+nll', got {algorithm!r}")
    loss = [cfg.dpo_loss_type] + (["sft"] if algorithm == "dpo+nll" else [])
    weights = [1.0] + ([cfg.dpo_sft_weight] if algorithm == "dpo+nll" else [])
    args = dict(
        output_dir=str(output_dir),
        learning_rate=cfg.dpo_lr,
        per_device_train_batch_size=cfg.dpo_batch_size,
        max_steps=cfg.dpo_steps,
        beta=cfg.dpo_beta,
        loss_type=loss,
        loss_weights=weights,
        label_smoothing=cfg.dpo_label_smoothing,
        max_grad_norm=cfg.max_grad_norm,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=cfg.warmup_steps,
        precompute_ref_log_probs=True,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
    )
    args.update(overrides)
    return args


def chat_messages(cfg, problem: str) -> list:
    """The chat TRL's trainers receive for ``problem``: ``cfg``'s system message (if
    it has one) and the sum as the user message."""
    system = getattr(cfg, "system_prompt", None)
    return ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": problem}
    ]


def prompt_dataset(cfg, n_prompts: int, seed: int = 0):
    """A ``datasets.Dataset`` of ``n_prompts`` training prompts in the lab's stream
    order (seeded), conversational: column ``prompt`` (system + user messages) and
    column ``problem`` (the sum, for the reward function)."""
    from datasets import Dataset

    checked_config(cfg, GRPOTaskConfig)
    n_prompts = v.integer(n_prompts, "n_prompts", minimum=1)
    seed = v.integer(seed, "seed", minimum=0)
    task = make_task(cfg)
    problems = PromptStream(task.train_prompts(), derived_seed(seed, "data")).next(
        n_prompts
    )
    return Dataset.from_dict(
        {"prompt": [chat_messages(cfg, p) for p in problems], "problem": problems}
    )


def preference_dataset(cfg, pairs: dict):
    """The lab's offline pairs (``LabRun.pairs``: ``prompts``, ``chosen``, ``rejected``
    texts) as a conversational preference ``datasets.Dataset`` for ``DPOTrainer``."""
    from datasets import Dataset

    checked_config(cfg, GRPOTaskConfig)
    if not isinstance(pairs, dict) or not all(
        k in pairs for k in ("prompts", "chosen", "rejected")
    ):
        raise ValueError(
            "pairs must be a dict with 'prompts', 'chosen' and 'rejected' "
            "(LabRun.pairs)"
        )
    if not len(pairs["prompts"]) == len(pairs["chosen"]) == len(pairs["rejected"]) > 0:
        raise ValueError(
            "pairs must hold as many prompts as chosen and rejected completions, at "
            "least one"
        )
    return Dataset.from_dict(
        {
            "prompt": [chat_messages(cfg, p) for p in pairs["prompts"]],
            "chosen": [[{"role": "assistant", "content": c}] for c in pairs["chosen"]],
            "rejected": [
                [{"role": "assistant", "content": r}] for r in pairs["rejected"]
            ],
        }
    )


def verifier_reward(eos_token_id: int):
    """The lab's verifier as a TRL reward function: 1.0 when the completion ended its
    turn (its ids contain ``eos_token_id``) and its text, stripped, is exactly the sum
    in column ``problem``; else 0.0."""
    eos_token_id = v.integer(eos_token_id, "eos_token_id", minimum=0)

    def verifier(prompts, completions, completion_ids, problem, **kwargs):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [
            1.0 if (eos_token_id in ids and verify(p, t.strip())) else 0.0
            for p, t, ids in zip(problem, texts, completion_ids)
        ]

    return verifier


class GRPORecorder:
    """Recomputes, with this package, the GRPO metrics TRL logs at every optimiser step.

    It wraps the reward functions for ``GRPOTrainer``. At each call (once per
    rollout, right after sampling, before the rollout's first update) it records the
    rewards' statistics (:func:`torch_ops.reward_advantages`) and, from the trainer's
    current model, the rollout's old per-token log-probs
    (:func:`dpo_grpo.lab.hf.hf_logps`), and those of ``ref_model``, a frozen copy of
    the initial model (load it from the same checkpoint before the trainer is built;
    a ``deepcopy`` of the trainer's model would share its wrapped ``forward``). Each
    optimiser step's loss, KL and clip ratios are :func:`torch_ops.grpo_loss` on the
    log-probs of the model as it is when the step starts: at a rollout's first step
    they are the old ones (ratio 1); at its later steps (``num_iterations`` > 1) the
    recorder's :meth:`callback`, added to the trainer, recomputes them after the
    earlier updates, so the ratios differ from 1 and clipping acts.
    ``recorder.steps`` holds one dict per optimiser step; :meth:`compare` lines them
    up with ``trainer.state.log_history``.
    """

    METRICS = (
        "reward",
        "reward_std",
        "frac_reward_zero_std",
        "kl",
        "loss",
        "clip_ratio/low_mean",
        "clip_ratio/high_mean",
        "clip_ratio/region_mean",
        "completions/mean_length",
    )

    def __init__(self, cfg, tokenizer, reward_funcs, ref_model, reward_weights=None):
        self.cfg = checked_config(cfg, GRPOTaskConfig)
        self.tokenizer = tokenizer
        self.reward_funcs = list(v.sequence(reward_funcs, "reward_funcs"))
        if not self.reward_funcs or not all(callable(f) for f in self.reward_funcs):
            raise TypeError("reward_funcs must be a non-empty list of callables")
        if not isinstance(ref_model, torch.nn.Module):
            raise TypeError(
                f"ref_model must be a torch.nn.Module, got {type(ref_model).__name__}"
            )
        self.reward_weights = reward_weights
        self.trainer = None  # set after the trainer is built
        self.ref = ref_model.eval().requires_grad_(False)
        self.steps = []
        self._pending = {}
        self._rollout = None

    def funcs(self) -> list:
        """One TRL reward function per wrapped function, recording what they return."""
        wrapped = []
        for k, fn in enumerate(self.reward_funcs):

            def call(prompts, completions, completion_ids, _k=k, _fn=fn, **kwargs):
                out = _fn(
                    prompts=prompts,
                    completions=completions,
                    completion_ids=completion_ids,
                    **kwargs,
                )
                self._pending[_k] = out
                if len(self._pending) == len(self.reward_funcs):
                    self._record(prompts, completion_ids, kwargs)
                return out

            call.__name__ = getattr(fn, "__name__", f"reward_{k}")
            wrapped.append(call)
        return wrapped

    def callback(self):
        """A ``transformers.TrainerCallback`` for ``trainer.add_callback``: at the
        start of every optimiser step that reuses a rollout, it records the step."""
        from transformers import TrainerCallback

        recorder = self

        class _Reuse(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                if recorder._rollout is not None and state.global_step % (
                    recorder.cfg.num_iterations
                ):
                    recorder._record_step(recorder._rollout, {})

        return _Reuse()

    @torch.no_grad()
    def _logps(self, model, r):
        was_training = model.training
        model.eval()
        out = hf_logps(
            model, r["pids"], r["pmask"], r["cids"], r["cmask"], self.cfg.temperature
        )
        model.train(was_training)
        return out

    @torch.no_grad()
    def _record(self, prompts, completion_ids, kwargs):
        cfg, tok = self.cfg, self.tokenizer
        model = self.trainer.model
        dev = next(model.parameters()).device
        rpf = torch.tensor(
            [self._pending[k] for k in range(len(self.reward_funcs))],
            dtype=torch.float32,
        ).T
        self._pending = {}
        adv, _, rm = torch_ops.reward_advantages(
            rpf.to(dev),
            cfg.num_generations,
            reward_weights=self.reward_weights,
            scale_rewards=cfg.scale_rewards,
        )
        width = max(len(c) for c in completion_ids)
        cids = torch.full(
            (len(completion_ids), width), tok.pad_token_id, dtype=torch.long, device=dev
        )
        cmask = torch.zeros_like(cids, dtype=torch.bool)
        for i, c in enumerate(completion_ids):
            cids[i, : len(c)] = torch.tensor(c, device=dev)
            cmask[i, : len(c)] = True
        problems = [p[-1]["content"] for p in prompts]
        pids, pmask = encode_chat_prompts(tok, problems, cfg, dev)
        r = {"pids": pids, "pmask": pmask, "cids": cids, "cmask": cmask, "adv": adv}
        r["old"] = self._logps(model, r)
        r["ref"] = self._logps(self.ref, r) if cfg.beta else None
        self._rollout = r
        self._record_step(
            r,
            {
                "reward": float(rm["reward"]),
                "reward_std": float(rm["reward_std"]),
                "frac_reward_zero_std": float(rm["frac_reward_zero_std"]),
                "completions/mean_length": float(cmask.sum(1).float().mean()),
            },
            new=r["old"],
        )

    @torch.no_grad()
    def _record_step(self, r, row, new=None):
        cfg = self.cfg
        if new is None:
            new = self._logps(self.trainer.model, r)
        out = torch_ops.grpo_loss(
            new,
            r["old"],
            r["ref"],
            r["adv"],
            r["cmask"].float(),
            epsilon=cfg.epsilon,
            epsilon_high=cfg.epsilon_high,
            delta=cfg.delta,
            beta=cfg.beta,
            loss_type=cfg.loss_type,
            importance_sampling_level=cfg.importance_sampling_level,
            use_bias_correction_kl=cfg.use_bias_correction_kl,
            max_completion_length=cfg.max_completion_length,
        )
        row = dict(row, loss=float(out.loss))
        row["kl"] = float(out.metrics["kl"]) if "kl" in out.metrics else 0.0
        for k in ("low_mean", "high_mean", "region_mean"):
            row[f"clip_ratio/{k}"] = float(out.metrics[f"clip_ratio/{k}"])
        self.steps.append(row)

    def compare(self, log_history) -> list:
        """One row per optimiser step: ``{metric: (TRL's logged value, ours)}`` for
        every metric both have (the reward statistics only at a rollout's first)."""
        logged = [h for h in log_history if "loss" in h and "train_loss" not in h]
        if len(logged) != len(self.steps):
            raise ValueError(
                f"TRL logged {len(logged)} steps and the recorder {len(self.steps)}: "
                "add recorder.callback() to the trainer, and log every step"
            )
        return [
            {k: (float(h[k]), ours[k]) for k in self.METRICS if k in h and k in ours}
            for h, ours in zip(logged, self.steps)
        ]


def deepspeed_config(zero_stage: int = 2) -> dict:
    """A DeepSpeed config for the GRPO/DPO trainers: ZeRO stage 1 (optimizer states
    sharded), 2 (+ gradients) or 3 (+ parameters); ``"auto"`` values are filled in by
    the Trainer from its own arguments, so batch sizes and learning rates stay defined
    in one place (the TRL config)."""
    if zero_stage not in (1, 2, 3):
        raise ValueError(f"zero_stage must be 1, 2 or 3, got {zero_stage!r}")
    zero = {"stage": zero_stage, "overlap_comm": True, "contiguous_gradients": True}
    if zero_stage == 3:
        zero.update(
            stage3_gather_16bit_weights_on_model_save=True,
            stage3_prefetch_bucket_size="auto",
            stage3_param_persistence_threshold="auto",
            reduce_bucket_size="auto",
        )
    return {
        "bf16": {"enabled": "auto"},
        "zero_optimization": zero,
        "gradient_clipping": "auto",
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
    }


def accelerate_config(
    num_machines: int = 1,
    gpus_per_machine: int = 8,
    zero_stage: int = 2,
    machine_rank: int = 0,
    main_process_ip: str = "10.0.0.1",
    main_process_port: int = 29500,
    deepspeed_config_file: str = "ds_config.json",
) -> str:
    """The ``accelerate launch --config_file`` YAML for ``num_machines`` x
    ``gpus_per_machine`` processes with DeepSpeed (each machine runs the same file with
    its own ``--machine_rank``).

    DeepSpeed's settings live in one place, the JSON file ``deepspeed_config_file``
    (:func:`deepspeed_config`): the YAML only names it, so it carries no ``zero_stage``,
    offload, clipping or top-level ``mixed_precision`` (which accelerate 1.16 rejects
    next to a config file), and the training script passes no ``deepspeed=`` of its own.
    ``zero_stage`` only sets ``zero3_init_flag`` (build a stage-3 model sharded from the
    start). Several machines use ``deepspeed_multinode_launcher: standard``:
    ``accelerate launch`` then starts ``torchrun`` on each node with that node's
    ``--machine_rank``; without it accelerate falls back to ``pdsh``, which logs into
    every node from node 0 and needs a hostfile."""
    for name, value, low in (
        ("num_machines", num_machines, 1),
        ("gpus_per_machine", gpus_per_machine, 1),
        ("machine_rank", machine_rank, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if machine_rank >= num_machines:
        raise ValueError(
            f"machine_rank must be < num_machines ({num_machines}), got {machine_rank}"
        )
    deepspeed_config(zero_stage)  # validates zero_stage
    lines = [
        "compute_environment: LOCAL_MACHINE",
        "distributed_type: DEEPSPEED",
        "deepspeed_config:",
        f"  deepspeed_config_file: {deepspeed_config_file}",
        f"  zero3_init_flag: {'true' if zero_stage == 3 else 'false'}",
    ]
    if num_machines > 1:
        lines.append("  deepspeed_multinode_launcher: standard")
    lines += [
        f"num_machines: {num_machines}",
        f"num_processes: {num_machines * gpus_per_machine}",
        f"machine_rank: {machine_rank}",
    ]
    if num_machines > 1:
        lines += [
            f"main_process_ip: {main_process_ip}",
            f"main_process_port: {main_process_port}",
            "rdzv_backend: static",
            "same_network: true",
        ]
    lines += ["main_training_function: main", "use_cpu: false"]
    return "\n".join(lines) + "\n"


def check_launch_files(directory, machine_rank: int | None = None) -> dict:
    """Run accelerate 1.16's own start-up checks on the files :func:`write_launch_files`
    wrote into ``directory``, as ``accelerate launch --config_file accelerate.yaml
    [--machine_rank k] train_grpo.py`` would on node ``k``: its argument parser and
    ``_validate_launch_command`` on the YAML, ``prepare_deepspeed_cmd_env`` (the command
    and the environment it exports), then, in that environment and in ``directory``, the
    ``DeepSpeedPlugin`` that ``TrainingArguments`` builds for the script (from
    ``deepspeed=`` if the script passes one, else from the exported config file), which
    raises where accelerate would refuse to start. Needs no GPU and no ``deepspeed``.
    Returns ``launcher`` (``"torchrun"``, or the external command accelerate would run,
    e.g. ``"deepspeed --launcher pdsh"``), ``nnodes``, ``nproc_per_node``,
    ``node_rank``, ``zero_stage``, ``mixed_precision``, ``zero3_init_flag`` and ``env``
    (the ``ACCELERATE_*`` variables it exports)."""
    import ast
    import pathlib

    from accelerate.commands.launch import (
        _validate_launch_command,
        launch_command_parser,
    )
    from accelerate.utils import DeepSpeedPlugin
    from accelerate.utils.launch import prepare_deepspeed_cmd_env

    d = pathlib.Path(directory)
    argv = ["--config_file", str(d / "accelerate.yaml")]
    if machine_rank is not None:
        argv += [
            "--machine_rank",
            str(v.integer(machine_rank, "machine_rank", minimum=0)),
        ]
    args = launch_command_parser().parse_args(argv + [str(d / "train_grpo.py")])
    args, defaults, mp_from_config = _validate_launch_command(args)
    if not args.use_deepspeed:
        raise ValueError("accelerate.yaml does not select DeepSpeed")
    # what launch_command does before deepspeed_launcher
    fields = list(defaults.deepspeed_config) if defaults else []
    if mp_from_config:
        fields.append("mixed_precision")
    args.deepspeed_fields_from_accelerate_config = ",".join(fields)
    cmd, env = prepare_deepspeed_cmd_env(args)
    env = {k: x for k, x in env.items() if k.startswith("ACCELERATE_")}
    # the script's own deepspeed= keyword, if any (TrainingArguments passes it on)
    script = ast.parse((d / "train_grpo.py").read_text(encoding="utf-8"))
    passed = [
        kw.value.value
        for node in ast.walk(script)
        if isinstance(node, ast.Call)
        for kw in node.keywords
        if kw.arg == "deepspeed" and isinstance(kw.value, ast.Constant)
    ]
    with launched(d, env):
        plugin = DeepSpeedPlugin(hf_ds_config=passed[0] if passed else None)
    launcher = "torchrun"
    if cmd is not None:  # an external launcher: deepspeed --launcher pdsh, ...
        k = cmd.index("--launcher") if "--launcher" in cmd else len(cmd)
        launcher = " ".join(cmd[:1] + cmd[k : k + 2])
    return {
        "launcher": launcher,
        "nnodes": int(getattr(args, "nnodes", 1)),
        "nproc_per_node": int(getattr(args, "nproc_per_node", 0)) or None,
        "node_rank": int(getattr(args, "node_rank", args.machine_rank or 0)),
        "zero_stage": plugin.zero_stage,
        "mixed_precision": env["ACCELERATE_MIXED_PRECISION"],
        "zero3_init_flag": plugin.zero3_init_flag,
        "env": env,
    }


def scaled_grpo_args(
    cfg, output_dir: str, num_processes: int, vllm: str | None = None, **overrides
) -> dict:
    """:func:`grpo_args` for ``num_processes`` GPUs, keeping the lab's global batch
    (prompts x generations per optimiser step) fixed: each process holds
    ``1 / num_processes`` of it. ``vllm="colocate"`` samples with vLLM inside each
    training process; ``vllm="server"`` sends generation to a separate
    ``trl vllm-serve`` process."""
    if (
        isinstance(num_processes, bool)
        or not isinstance(num_processes, int)
        or num_processes < 1
    ):
        raise ValueError(
            f"num_processes must be a positive integer, got {num_processes!r}"
        )
    global_batch = cfg.prompts_per_step * cfg.num_generations
    if global_batch % num_processes:
        raise ValueError(
            f"num_processes ({num_processes}) must divide the global batch of "
            f"{global_batch} completions"
        )
    if vllm not in (None, "colocate", "server"):
        raise ValueError(f"vllm must be None, 'colocate' or 'server', got {vllm!r}")
    args = grpo_args(
        cfg,
        output_dir,
        per_device_train_batch_size=global_batch // num_processes,
        bf16=True,
    )
    if vllm is not None:
        args.update(use_vllm=True, vllm_mode=vllm)
        if vllm == "colocate":
            args["vllm_gpu_memory_utilization"] = 0.3
    args.update(overrides)
    return args


def reference_zero_stage(zero_stage: int) -> int:
    """The ZeRO stage TRL 1.16.0's ``prepare_deepspeed`` gives a frozen model (the
    reference, a reward model) when the policy runs at ``zero_stage``: 3 stays 3
    (sharded like the policy); 1 and 2 become 0, a whole copy on every GPU."""
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage!r}")
    return 3 if zero_stage == 3 else 0


def zero_memory_per_gpu(
    n_parameters: int, num_gpus: int, zero_stage: int, reference: bool = False
) -> float:
    """Bytes of model state per GPU under mixed-precision AdamW (ZeRO paper's
    accounting: 2 bytes of bf16 weights, 2 of bf16 gradients, 12 of fp32 master weights
    and Adam moments per parameter): stage 0 keeps all 16 on every GPU; stage 1 shards
    the 12 optimizer bytes, stage 2 also the gradients, stage 3 also the weights.
    ``reference=True`` adds a frozen bf16 reference of the same size at the stage TRL
    gives it (:func:`reference_zero_stage`): 2 bytes per parameter, sharded only at
    stage 3. Activations and the KV cache of generation come on top."""
    for name, x, low in (("n_parameters", n_parameters, 1), ("num_gpus", num_gpus, 1)):
        if isinstance(x, bool) or not isinstance(x, int) or x < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {x!r}")
    sharded_reference = reference_zero_stage(zero_stage) == 3  # checks zero_stage
    w, g, o = 2.0, 2.0, 12.0
    if zero_stage >= 1:
        o /= num_gpus
    if zero_stage >= 2:
        g /= num_gpus
    if zero_stage >= 3:
        w /= num_gpus
    ref = 2.0 / (num_gpus if sharded_reference else 1) * reference
    return (w + g + o + ref) * n_parameters


@contextlib.contextmanager
def launched(directory, env: dict):
    """The block runs in ``directory`` with ``env`` exported, as a launched script."""
    saved = {k: os.environ.get(k) for k in env}
    with contextlib.chdir(directory):
        try:
            os.environ.update(env)
            yield
        finally:
            os.environ.update({k: x for k, x in saved.items() if x is not None})
            for k in (k for k, x in saved.items() if x is None):
                os.environ.pop(k, None)


def deepspeed_precision(directory, env: dict, grpo_kwargs: dict) -> dict:
    """The precision the script trains in on a launched node (``directory``, ``env``:
    :func:`check_launch_files`), by transformers 5.24's ``TrainingArguments`` steps:
    ``GRPOConfig(**grpo_kwargs)`` sets ``mixed_precision`` from ``bf16`` over the
    launcher's flag; the ``DeepSpeedPlugin`` of the exported config file then sets its
    ``"auto"`` ``bf16`` / ``fp16`` from it (the plugin's weak reference, which needs
    ``deepspeed``, left out). Returns ``launcher``, ``mixed_precision``, ``bf16``,
    ``fp16``."""
    import trl
    from accelerate.utils import DeepSpeedPlugin

    flag = env["ACCELERATE_MIXED_PRECISION"]
    with launched(directory, {"ACCELERATE_MIXED_PRECISION": flag}):
        args = trl.GRPOConfig(**grpo_kwargs)
    with launched(directory, env):
        plugin = DeepSpeedPlugin()
        plugin.set_mixed_precision(args.mixed_precision)
    ds = plugin.deepspeed_config
    return {
        "launcher": flag,
        "mixed_precision": args.mixed_precision,
        "bf16": ds["bf16"]["enabled"],
        "fp16": ds["fp16"]["enabled"],
    }


TRAIN_SCRIPT = '''"""GRPO on the lab's addition task with TRL.

On node K (K = 0, 1, ...):
  accelerate launch --config_file accelerate.yaml --machine_rank K train_grpo.py"""
from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from dpo_grpo.lab import hf, trl_scale

cfg = hf.HFLabConfig.preset("qwen2.5-0.5b")
tokenizer = AutoTokenizer.from_pretrained(cfg.model_name, padding_side="left")
# DeepSpeed's settings: ds_config.json, which accelerate.yaml names (none here)
args = GRPOConfig(
    **trl_scale.scaled_grpo_args(
        cfg, "grpo-out", num_processes={num_processes}, vllm={vllm!r},
    )
)
trainer = GRPOTrainer(
    model=cfg.model_name,
    reward_funcs=[trl_scale.verifier_reward(tokenizer.eos_token_id)],
    args=args,
    train_dataset=trl_scale.prompt_dataset(
        cfg, cfg.grpo_steps * cfg.prompts_per_step,
    ),
    processing_class=tokenizer,
)
trainer.train()
'''


def write_launch_files(
    directory,
    num_machines: int = 2,
    gpus_per_machine: int = 8,
    zero_stage: int = 2,
    vllm: str | None = "colocate",
) -> dict:
    """Write ``accelerate.yaml``, ``ds_config.json`` and ``train_grpo.py`` for a
    multi-node GRPO run of the ``qwen2.5-0.5b`` preset into ``directory``; return
    ``{name: path}``. Each node runs
    ``accelerate launch --config_file accelerate.yaml train_grpo.py`` with its own
    ``machine_rank``."""
    import pathlib

    d = pathlib.Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    n = num_machines * gpus_per_machine
    files = {
        "accelerate.yaml": accelerate_config(
            num_machines, gpus_per_machine, zero_stage
        ),
        "ds_config.json": json.dumps(deepspeed_config(zero_stage), indent=2) + "\n",
        "train_grpo.py": TRAIN_SCRIPT.format(num_processes=n, vllm=vllm),
    }
    out = {}
    for name, text in files.items():
        (d / name).write_text(text, encoding="utf-8")
        out[name] = d / name
    return out
