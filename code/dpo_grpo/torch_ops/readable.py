"""The book's two losses in PyTorch, written to be read: autograd does the calculus
(chapter 5, "The torch path").

Same formulas as :func:`dpo_grpo.reference.grpo.grpo_loss` and
:func:`dpo_grpo.reference.dpo.dpo_loss` (the tests prove it); the production versions,
with every TRL option and value checks, are :func:`dpo_grpo.torch_ops.grpo_loss` and
:func:`dpo_grpo.torch_ops.dpo_loss`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def grpo_loss(
    new_logps, old_logps, ref_logps, advantages, mask, epsilon=0.2, beta=0.04
):
    """DeepSeekMath's GRPO loss (section 3.5), a 0-d tensor differentiable in new_logps.

    Log-probs and mask (B, T), advantages (B,). The loss is
    ``1/B Σ_i 1/|y_i| Σ_t [-min(ρ_t A_i, clip(ρ_t, 1-ε, 1+ε) A_i) + β k3_t]``.
    """
    _check(new_logps, old_logps, ref_logps, advantages, mask)
    valid = mask.bool()
    new = torch.where(valid, new_logps, 0.0)  # padding -> 0 before any exp
    # π_old and π_ref are data, not parameters
    old = torch.where(valid, old_logps, 0.0).detach()
    ref = torch.where(valid, ref_logps, 0.0).detach()
    mask = valid.to(new.dtype)
    A = advantages[:, None]
    ratio = torch.exp(new - old)  # ρ = π_θ / π_old, per token
    pg_loss1 = ratio * A
    pg_loss2 = torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * A
    surrogate = torch.min(pg_loss1, pg_loss2)
    log_ref_ratio = ref - new
    k3 = torch.exp(log_ref_ratio) - log_ref_ratio - 1
    per_token = -surrogate + beta * k3
    per_answer = (per_token * mask).sum(dim=1) / mask.sum(dim=1)  # 1/|y_i| Σ_t
    return per_answer.mean()  # 1/B Σ_i


def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    """DPO loss (section 3.2) on sequence log-probs (P,), a 0-d tensor:
    ``mean -log σ(β [(π_w - π_l) - (ref_w - ref_l)])``."""
    _check(policy_chosen, policy_rejected, ref_chosen, ref_rejected)
    logits = beta * (
        (policy_chosen - policy_rejected) - (ref_chosen - ref_rejected).detach()
    )
    return -F.logsigmoid(logits).mean()


def _check(*tensors):
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        raise TypeError(
            "the readable losses take torch tensors "
            "(use dpo_grpo.torch_ops.* for arrays and checks)"
        )
    if len({t.shape[0] for t in tensors}) != 1:
        raise ValueError(
            "all inputs must have the same first dimension, got "
            f"{[tuple(t.shape) for t in tensors]}"
        )
