"""The lab's offline methods with TRL 1.16.0's trainers, checked step by step: DPO and
DPO + NLL with ``DPOTrainer`` (:func:`dpo_grpo.lab.trl_scale.dpo_args`), RFT with
``SFTTrainer`` on the chosen completions (:func:`rft_args`, completion-only loss), and
:class:`OfflineLossCheck`, which recomputes the loss TRL logs at every step with this
package's functions on the same tokens (needs ``trl``)."""

from __future__ import annotations

import torch

from .. import torch_ops
from .config import GRPOTaskConfig, LabConfig, checked_config
from .hf import hf_logps
from .offline import OFFLINE
from .trl_scale import chat_messages

#: (lab field, TRL 1.16.0 SFTConfig field, how it maps) for RFT
RFT_NAMES = (
    ("dpo_lr", "learning_rate", "same value"),
    ("dpo_batch_size", "per_device_train_batch_size", "same value (pairs per step)"),
    ("dpo_steps", "max_steps", "same value"),
    ("max_grad_norm", "max_grad_norm", "same value"),
    ("warmup_steps", "warmup_steps", "with lr_scheduler_type='constant_with_warmup'"),
    (
        "(NLL of the chosen completions only)",
        "completion_only_loss",
        "True (a prompt-completion dataset: the prompt tokens carry no loss)",
    ),
)


def rft_args(cfg: LabConfig, output_dir: str, **overrides) -> dict:
    """Keyword arguments of ``trl.SFTConfig`` for the lab's RFT (:data:`RFT_NAMES`):
    supervised fine-tuning on the chosen completions of the lab's pairs, the loss on
    the completion tokens only. ``overrides`` replace or add SFT fields."""
    checked_config(cfg)
    args = {
        "output_dir": str(output_dir),
        "learning_rate": cfg.dpo_lr,
        "per_device_train_batch_size": cfg.dpo_batch_size,
        "max_steps": cfg.dpo_steps,
        "max_grad_norm": cfg.max_grad_norm,
        "lr_scheduler_type": "constant_with_warmup",
        "warmup_steps": cfg.warmup_steps,
        "completion_only_loss": True,
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "no",
    }
    args.update(overrides)
    return args


def rft_dataset(cfg, pairs: dict):
    """The chosen completions of the lab's pairs (``LabRun.pairs``) as a conversational
    prompt-completion ``datasets.Dataset`` for ``SFTTrainer``: RFT's data."""
    from datasets import Dataset

    checked_config(cfg, GRPOTaskConfig)
    if not isinstance(pairs, dict) or not all(
        k in pairs for k in ("prompts", "chosen")
    ):
        raise ValueError(
            "pairs must be a dict with 'prompts' and 'chosen' (LabRun.pairs)"
        )
    if not len(pairs["prompts"]) == len(pairs["chosen"]) > 0:
        raise ValueError(
            "pairs must hold as many prompts as chosen completions, at least one"
        )
    return Dataset.from_dict(
        {
            "prompt": [chat_messages(cfg, p) for p in pairs["prompts"]],
            "completion": [
                [{"role": "assistant", "content": c}] for c in pairs["chosen"]
            ],
        }
    )


def _left(rows, pad, dev):
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long, device=dev)
    mask = torch.zeros_like(ids, dtype=torch.bool)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r) :] = torch.tensor(r, device=dev)
            mask[i, width - len(r) :] = True
    return ids, mask


def _right(rows, pad, dev):
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long, device=dev)
    mask = torch.zeros_like(ids, dtype=torch.bool)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, device=dev)
        mask[i, : len(r)] = True
    return ids, mask


class OfflineLossCheck:
    """Recomputes, with this package, the loss TRL logs at every optimiser step of a
    ``DPOTrainer`` (``algorithm`` ``"dpo"`` or ``"dpo+nll"``) or an ``SFTTrainer``
    (``"rft"``) whose batch is its whole training set (``per_device_train_batch_size``
    = the number of rows), so that every step sees every row.

    Add :meth:`callback` to the trainer and set ``check.trainer``. At the start of each
    step it reads the tokens from the trainer's tokenised ``train_dataset`` (DPO:
    ``prompt_ids``, ``chosen_ids``, ``rejected_ids``; SFT: ``input_ids`` and
    ``labels``, the prompt being the tokens before the first label) and computes, from
    the trainer's current model, the per-token log-probs
    (:func:`dpo_grpo.lab.hf.hf_logps`) and the lab's loss on them, as
    :class:`dpo_grpo.lab.offline.Offline` does: :func:`torch_ops.dpo_loss` against the
    log-probs of ``ref_model`` (a frozen copy of the initial model), plus
    ``dpo_sft_weight`` times the token-mean NLL of the chosen completions for
    ``"dpo+nll"``; that NLL alone for ``"rft"``. :meth:`compare` lines the results up
    with ``trainer.state.log_history``."""

    def __init__(self, cfg: LabConfig, algorithm: str, ref_model=None):
        self.cfg = checked_config(cfg)
        if algorithm not in OFFLINE:
            raise ValueError(f"algorithm must be one of {OFFLINE}, got {algorithm!r}")
        self.algorithm = algorithm
        if algorithm != "rft" and not isinstance(ref_model, torch.nn.Module):
            raise TypeError(
                "ref_model must be a torch.nn.Module for DPO, "
                f"got {type(ref_model).__name__}"
            )
        self.ref = None if ref_model is None else ref_model.eval().requires_grad_(False)
        self.trainer = None  # set after the trainer is built
        self.steps = []

    def callback(self):
        """A ``transformers.TrainerCallback`` that recomputes each step's loss at its
        start (``trainer.add_callback``)."""
        from transformers import TrainerCallback

        check = self

        class _Recompute(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                check.steps.append(check.loss())

        return _Recompute()

    def _batch(self, dev):
        data = self.trainer.train_dataset
        n = len(data)
        if self.trainer.args.per_device_train_batch_size != n:
            raise ValueError(
                "per_device_train_batch_size must equal the number of training rows "
                f"({n}), so that every step sees the whole set"
            )
        pad = self.trainer.processing_class.pad_token_id
        if self.algorithm == "rft":
            prompts, completions = [], []
            for ids, labels in zip(data["input_ids"], data["labels"]):
                start = next(i for i, x in enumerate(labels) if x != -100)
                prompts.append(ids[:start])
                completions.append(ids[start:])
            return _left(prompts, pad, dev), _right(completions, pad, dev), None
        pids = _left(data["prompt_ids"], pad, dev)
        return (
            pids,
            _right(data["chosen_ids"], pad, dev),
            _right(data["rejected_ids"], pad, dev),
        )

    @torch.no_grad()
    def _logps(self, model, prompt, completion):
        was_training = model.training
        model.eval()
        out = hf_logps(model, *prompt, *completion) * completion[1]
        model.train(was_training)
        return out

    @torch.no_grad()
    def loss(self) -> dict:
        """The lab's loss on the whole training set under the trainer's current model:
        ``loss``, and its terms ``nll`` (token-mean NLL of the chosen completions) and,
        for DPO, ``dpo`` (the preference loss) and ``rewards/margins`` (mean implicit
        reward margin, as TRL logs it)."""
        model = self.trainer.model
        dev = next(model.parameters()).device
        prompt, chosen, rejected = self._batch(dev)
        tok_c = self._logps(model, prompt, chosen)
        nll = float(-tok_c.sum() / chosen[1].sum())
        if self.algorithm == "rft":
            return {"loss": nll, "nll": nll}
        cfg = self.cfg
        out = torch_ops.dpo_loss(
            tok_c.sum(1),
            self._logps(model, prompt, rejected).sum(1),
            self._logps(self.ref.to(dev), prompt, chosen).sum(1),
            self._logps(self.ref, prompt, rejected).sum(1),
            beta=cfg.dpo_beta,
            loss_type=cfg.dpo_loss_type,
            label_smoothing=cfg.dpo_label_smoothing,
        )
        dpo = float(out.loss)
        weight = cfg.dpo_sft_weight if self.algorithm == "dpo+nll" else 0.0
        margin = out.chosen_rewards - out.rejected_rewards
        return {
            "loss": dpo + weight * nll,
            "dpo": dpo,
            "nll": nll,
            "rewards/margins": float(margin.mean()),
        }

    def compare(self, log_history) -> list:
        """One row per optimiser step: ``{metric: (TRL's logged value, ours)}`` for
        ``loss`` and, for DPO, ``rewards/margins``."""
        logged = [h for h in log_history if "loss" in h and "train_loss" not in h]
        if len(logged) != len(self.steps):
            raise ValueError(
                f"TRL logged {len(logged)} steps and the check {len(self.steps)}: "
                "add check.callback() to the trainer, and log every step"
            )
        keys = ("loss", "rewards/margins")
        return [
            {k: (float(h[k]), ours[k]) for k in keys if k in h and k in ours}
            for h, ours in zip(logged, self.steps)
        ]
