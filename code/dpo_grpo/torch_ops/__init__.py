"""The book's losses in PyTorch, on any device (CPU or CUDA) and float dtype, with autograd.

``import dpo_grpo`` never imports torch; this sub-package needs it.
"""

from .losses import *  # noqa: F401,F403
from .losses import __all__  # noqa: F401
