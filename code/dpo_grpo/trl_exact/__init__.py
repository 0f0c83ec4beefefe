"""TRL 1.16.0, option for option: ``GRPOConfig``/``DPOConfig`` loss types, reward
aggregation and logged metrics.

Layer 2: builds on :mod:`dpo_grpo.reference` (proven equal to it at the paper's settings
by ``tests/package/test_layers.py``). Option checks are gathered before the math, the
way TRL's ``__post_init__`` does.
"""

from .advantages import reward_advantages
from .dpo import dpo_loss
from .grpo import grpo_loss

__all__ = ["grpo_loss", "dpo_loss", "reward_advantages"]
