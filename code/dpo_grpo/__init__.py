"""dpo_grpo: the executable companion of "From DPO to GRPO".

The public API, re-exported from the layers (``ls code/dpo_grpo`` shows them; README,
"Layout"):

- ``reference/``: the article's formulas as short NumPy functions, the ones the chapters
  print: ``dpo_grpo.dpo_loss``, ``grpo_loss``, ``group_advantages``, ``clip_region``,
  the KL estimators, baselines, the bandit, the closed-form DPO optimum, the memory
  ledger, zero-std groups (plus ``finite_difference`` and ``max_abs_error``, the
  gradient checks of ``chapters/gradcheck.py``, and ``ledger_label`` and
  ``region_label``, the memory ledger's and the clip regions' keys in the reader's
  language, ``chapters/labels.py``);
- ``trl_exact/``: the losses and advantages exactly as TRL 1.16.0 computes them, every
  option under TRL's name, called by the layer's name: ``dpo_grpo.trl_exact.grpo_loss``,
  ``dpo_grpo.trl_exact.dpo_loss``, ``dpo_grpo.trl_exact.reward_advantages``;
- ``torch_ops/`` (needs torch), ``lab/`` (needs torch), ``interactive/``,
  ``chapters/``, ``exercises/``, ``data/``.
"""

from .chapters.gradcheck import finite_difference, max_abs_error
from .chapters.labels import ledger_label, region_label
from .reference.advantages import (
    centered_advantages,
    group_advantages,
    leave_one_out_advantages,
)
from .reference.bandit import (
    BanditRun,
    bandit_seed_table,
    bandit_trajectory,
    train_group_bandit,
)
from .reference.baselines import (
    enumerate_group_gradients,
    score_function_variance,
    true_gradient,
)
from .reference.dpo import (
    bradley_terry_probability,
    dpo_gradient_weight,
    implicit_reward,
    kl_regularised_objective,
    log_sigmoid,
    max_objective_identity_error,
    objective_identity_gap,
    optimal_policy,
    sigmoid,
)
from .reference.kl import (
    estimator_views,
    exact_kl,
    forward_kl_grad_logits,
    k1,
    k2,
    k3,
    k3_expectation,
    k3_per_action,
    k3_surrogate_grad_logits,
    kl_grad_logits,
    policy_gap_family,
)
from .reference.memory import (
    GB,
    GiB,
    algorithm_ledger,
    frozen_model_bytes,
    training_state_ledger,
)
from .reference.softmax import log_softmax, softmax
from .reference.zero_std import (
    expected_zero_std_fraction,
    simulate_zero_std_fraction,
    two_sample_advantage,
    zero_std_monte_carlo,
    zero_std_probability,
)
from .reference.dpo import dpo_loss
from .reference.grpo import (
    clip_region,
    clipped_objective,
    clipped_objective_grad,
    grpo_loss,
)
from . import trl_exact

__version__ = "0.2.0"

__all__ = [name for name in dir() if not name.startswith("_")]
