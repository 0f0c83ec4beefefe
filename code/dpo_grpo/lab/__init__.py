"""The lab: a tiny transformer trained with GRPO, PPO (with a critic) or DPO on a
verifiable addition task (needs torch).

``LabConfig`` and ``run_lab`` are the entry points. The modules, one thing each:
:mod:`~dpo_grpo.lab.config` (settings), :mod:`~dpo_grpo.lab.model` (the task, the
vocabulary and the transformer), :mod:`~dpo_grpo.lab.task` (the parts a run builds from
its config), :mod:`~dpo_grpo.lab.sft` (the SFT warm-up), :mod:`~dpo_grpo.lab.grpo` (the
GRPO update, shared with the Hugging Face run), :mod:`~dpo_grpo.lab.ppo` (PPO with a
critic, the value network GRPO removes), :mod:`~dpo_grpo.lab.offline` (DPO,
DPO+NLL, RFT), :mod:`~dpo_grpo.lab.online_rft` and :mod:`~dpo_grpo.lab.rloo` (the
chain's middle steps), :mod:`~dpo_grpo.lab.run` (a run, its checkpoints),
:mod:`~dpo_grpo.lab.history`, :mod:`~dpo_grpo.lab.evaluation`,
:mod:`~dpo_grpo.lab.timing`, :mod:`~dpo_grpo.lab.runtime` and
:mod:`~dpo_grpo.lab.progress` (progress bars); the multi-seed comparison
is :mod:`dpo_grpo.lab.sweep` (``python -m dpo_grpo.lab.sweep``, whose options are
:mod:`~dpo_grpo.lab.sweep_command`'s), read as a chain of ingredients by
:mod:`~dpo_grpo.lab.ablation`. With ``transformers``
installed, :mod:`dpo_grpo.lab.hf` runs the task on a pretrained Hugging Face model, and
with ``trl``, :mod:`dpo_grpo.lab.trl_scale` runs it with TRL's trainers (both imported
on demand, not here).
"""

from .config import (
    DPO_LOSS_TYPES,
    GRPO_LOSS_TYPES,
    IS_LEVELS,
    PPO_FIELDS,
    REWARDS,
    SCALE_REWARDS,
    GRPOTaskConfig,
    LabConfig,
    runtime_preset,
)
from .evaluation import heldout_pass_rate
from .history import LabHistory
from .model import make_model
from .offline import OFFLINE
from .run import ALGORITHMS, CHECKPOINT_FORMAT, LabRun, budget, run_lab
from .sft import SFTResult, clear_sft_cache, sft_warmup
from .task import PromptStream, make_task, reward_weights, score
from .timing import ppo_vs_grpo_cost, rollout_vs_train_time

__all__ = [
    "ALGORITHMS",
    "CHECKPOINT_FORMAT",
    "DPO_LOSS_TYPES",
    "GRPO_LOSS_TYPES",
    "IS_LEVELS",
    "OFFLINE",
    "PPO_FIELDS",
    "REWARDS",
    "SCALE_REWARDS",
    "GRPOTaskConfig",
    "LabConfig",
    "LabHistory",
    "LabRun",
    "PromptStream",
    "SFTResult",
    "budget",
    "clear_sft_cache",
    "heldout_pass_rate",
    "make_model",
    "make_task",
    "ppo_vs_grpo_cost",
    "reward_weights",
    "rollout_vs_train_time",
    "run_lab",
    "runtime_preset",
    "score",
    "sft_warmup",
]
