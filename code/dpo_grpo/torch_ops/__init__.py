"""The book's losses in PyTorch, on any device (CPU or CUDA) and float dtype, with autograd.

Read in this order (``ls`` shows it):

- ``readable.py``: GRPO and DPO in a dozen lines each, differentiated by autograd (``torch_ops.readable``);
- ``losses.py``: the same losses with every TRL 1.16.0 option, value checks that do not synchronise the device,
  a fused analytic-gradient kernel and ``compile=True`` (the names re-exported here: ``grpo_loss``, ``dpo_loss``,
  ``group_advantages``, ``reward_advantages``, ``default_device``), tested equal to ``readable`` and to NumPy;
- ``logprobs.py``: ``selective_log_softmax`` (per-token log-probs without the (B, T, V) log-softmax) and
  ``saved_tensor_bytes``.

``import dpo_grpo`` never imports torch; this sub-package needs it.
"""

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised by a test that hides torch
    raise ImportError(
        "dpo_grpo.torch_ops needs PyTorch, which is not installed. Install it with "
        "`pip install torch==2.13.0` (the version this book is tested with; in Google Colab torch is "
        "preinstalled). The rest of dpo_grpo works without it."
    ) from exc

from . import readable  # noqa: E402
from .logprobs import saved_tensor_bytes, selective_log_softmax  # noqa: E402
from .losses import (
    CLIP_METRICS,
    DPOOutput,
    GRPOOutput,
    RewardAdvantages,
    default_device,
    dpo_loss,  # noqa: E402
    group_advantages,
    grpo_loss,
    reward_advantages,
)

__all__ = [
    "readable",
    "default_device",
    "grpo_loss",
    "GRPOOutput",
    "group_advantages",
    "reward_advantages",
    "RewardAdvantages",
    "dpo_loss",
    "DPOOutput",
    "selective_log_softmax",
    "saved_tensor_bytes",
    "CLIP_METRICS",
]
