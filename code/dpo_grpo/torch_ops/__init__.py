"""The book's losses in PyTorch, on any device (CPU or CUDA) and float dtype, with
autograd.

Read in this order (``ls`` shows it):

- ``readable.py``: GRPO and DPO in a dozen lines each, differentiated by autograd
  (``torch_ops.readable``);
- ``grpo.py`` (``grpo_loss``), ``dpo.py`` (``dpo_loss``), ``advantages.py``
  (``group_advantages``, ``reward_advantages``): the same losses with every TRL 1.16.0
  option and value checks that do not synchronise the device, tested equal to
  ``readable`` and to NumPy; ``tensors.py``: the shared tensor helpers
  (``default_device``, the compute dtype, argument checks);
- ``logprobs.py``: ``selective_log_softmax`` (per-token log-probs without the (B, T, V)
  log-softmax) and ``saved_tensor_bytes``.

``import dpo_grpo`` never imports torch; this sub-package needs it.
"""

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised by a test that hides torch
    raise ImportError(
        "dpo_grpo.torch_ops needs PyTorch, which is not installed. Install it with "
        "`pip install torch==2.13.0` (the version this book is tested with; in Google "
        "Colab torch is preinstalled). The rest of dpo_grpo works without it."
    ) from exc

from ..trl_exact.grpo import CLIP_METRICS  # noqa: E402
from . import readable  # noqa: E402
from .advantages import (  # noqa: E402
    RewardAdvantages,
    group_advantages,
    reward_advantages,
)
from .dpo import DPOOutput, dpo_loss  # noqa: E402
from .grpo import GRPOOutput, grpo_loss  # noqa: E402
from .logprobs import saved_tensor_bytes, selective_log_softmax  # noqa: E402
from .tensors import default_device  # noqa: E402

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
