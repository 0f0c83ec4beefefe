"""The lab: a tiny transformer trained with GRPO or DPO on a verifiable addition task (needs torch).

``LabConfig`` and ``run_lab`` are the entry points; the model and task live in :mod:`dpo_grpo.lab.model`.
"""

from .experiment import *  # noqa: F401,F403
from .experiment import LabConfig, LabHistory, LabRun, run_lab  # noqa: F401
