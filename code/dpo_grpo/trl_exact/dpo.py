"""Direct Preference Optimisation: the loss, its gradient, and the closed-form optimum it is derived from.

Shapes: every log-prob argument is a sequence log-prob array of one common shape ``(P,)`` (one entry per pair).
Formula: ``logits = beta * ((pi_c - pi_r) - (ref_c - ref_r))`` and, for ``loss_type="sigmoid"``,
``loss = mean(-log sigmoid(logits))``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validation as v
from ..reference.dpo import log_sigmoid, sigmoid

DPO_LOSS_TYPES = ("sigmoid", "hinge", "robust")


class DPOOutput(NamedTuple):
    """Result of :func:`dpo_loss`. The first two fields are ``loss, logits``."""

    loss: float
    logits: np.ndarray  #: beta * (policy gap - reference gap), shape (P,)
    chosen_rewards: np.ndarray  #: implicit reward beta * (pi_c - ref_c), shape (P,)
    rejected_rewards: np.ndarray  #: implicit reward beta * (pi_r - ref_r), shape (P,)
    grad_policy_chosen: np.ndarray  #: d loss / d policy_chosen, shape (P,)
    grad_policy_rejected: np.ndarray  #: d loss / d policy_rejected = -grad_policy_chosen

    @property
    def metrics(self) -> dict:
        """TRL's logged names: ``rewards/chosen``, ``rewards/rejected``, ``rewards/accuracies``, ``rewards/margins``."""
        margins = self.chosen_rewards - self.rejected_rewards
        return {
            "rewards/chosen": float(self.chosen_rewards.mean()),
            "rewards/rejected": float(self.rejected_rewards.mean()),
            "rewards/accuracies": float((self.chosen_rewards > self.rejected_rewards).mean()),
            "rewards/margins": float(margins.mean()),
        }


def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1, *,
             loss_type="sigmoid", label_smoothing=0.0) -> DPOOutput:
    """DPO loss on sequence log-probs, with TRL 1.16.0's ``sigmoid``, ``hinge`` and ``robust`` forms.

    With ``u = (pi_c - pi_r) - (ref_c - ref_r)`` and ``z = beta * u`` (returned as ``logits``):

    - ``sigmoid``: ``-log sigmoid(z)`` (the DPO paper's loss);
    - ``hinge``: ``max(0, 1 - z)`` (SLiC);
    - ``robust``: ``(-(1 - s) log sigmoid(z) + s log sigmoid(-z)) / (1 - 2s)`` with ``s = label_smoothing`` in
      [0, 0.5): an unbiased loss under labels flipped with probability ``s``.

    The loss is the mean over pairs. TRL 1.16.0 reads ``label_smoothing`` only for ``robust`` (and losses we do not
    implement); its ``sigmoid`` silently ignores it. Rather than ignore an argument, we raise ``ValueError``
    when ``label_smoothing != 0`` with ``sigmoid`` or ``hinge``.
    """
    pc = v.as_float_array(policy_chosen, "policy_chosen")
    pr = v.as_float_array(policy_rejected, "policy_rejected")
    rc = v.as_float_array(ref_chosen, "ref_chosen")
    rr = v.as_float_array(ref_rejected, "ref_rejected")
    v.same_shape(policy_chosen=pc, policy_rejected=pr, ref_chosen=rc, ref_rejected=rr)
    beta = v.scalar(beta, "beta", positive=True)
    v.choice(loss_type, "loss_type", DPO_LOSS_TYPES)
    s = v.scalar(label_smoothing, "label_smoothing", nonnegative=True)
    if loss_type == "robust" and not s < 0.5:
        raise ValueError(f"label_smoothing must lie in [0, 0.5) for loss_type='robust', got {s}")
    if loss_type != "robust" and s != 0.0:
        raise ValueError(
            f"label_smoothing={s} has no effect for loss_type={loss_type!r} in TRL 1.16.0; "
            "use loss_type='robust' for noisy labels, or label_smoothing=0"
        )

    chosen_rewards = beta * (pc - rc)
    rejected_rewards = beta * (pr - rr)
    logits = beta * ((pc - pr) - (rc - rr))
    n = logits.size
    if loss_type == "sigmoid":
        per_pair = -log_sigmoid(logits)
        dz = -sigmoid(-logits)  # d/dz of -log sigmoid(z)
    elif loss_type == "hinge":
        per_pair = np.maximum(0.0, 1.0 - logits)
        dz = np.where(logits < 1.0, -1.0, 0.0)
    else:  # robust
        per_pair = (-(1 - s) * log_sigmoid(logits) + s * log_sigmoid(-logits)) / (1 - 2 * s)
        dz = (-(1 - s) * sigmoid(-logits) - s * sigmoid(logits)) / (1 - 2 * s)
    grad_chosen = dz * beta / n
    return DPOOutput(
        loss=float(per_pair.mean()),
        logits=logits,
        chosen_rewards=chosen_rewards,
        rejected_rewards=rejected_rewards,
        grad_policy_chosen=grad_chosen,
        grad_policy_rejected=-grad_chosen,
    )
