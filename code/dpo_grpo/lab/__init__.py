"""The lab: a tiny transformer trained with GRPO or DPO on a verifiable addition task (needs torch).

``LabConfig`` and ``run_lab`` are the entry points; the model and task live in :mod:`dpo_grpo.lab.model`, the
multi-seed comparison in :mod:`dpo_grpo.lab.sweep` (``python -m dpo_grpo.lab.sweep``). With ``transformers``
installed, :mod:`dpo_grpo.lab.hf` runs the task on a pretrained Hugging Face model, and with ``trl``,
:mod:`dpo_grpo.lab.trl_scale` runs it with TRL's trainers (both imported on demand, not here).
"""

from .experiment import *  # noqa: F401,F403
from .experiment import LabConfig, LabHistory, LabRun, run_lab  # noqa: F401
