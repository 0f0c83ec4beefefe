"""DPO in PyTorch with every TRL 1.16.0 ``DPOConfig.loss_type``, differentiated by
autograd.

Same names, options, checks and results as :func:`dpo_grpo.trl_exact.dpo.dpo_loss`
(tested equal), on tensors of any device and floating dtype (half precision computed in
float32).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import _validation as v
from ..trl_exact import dpo as trl_dpo
from ..trl_exact.dpo import DPOOptions, dpo_options
from .tensors import checked_tensor, compute_dtype, same_shape

__all__ = ["dpo_loss", "DPOOutput"]


class DPOOutput(trl_dpo.DPOOutput):
    """:class:`dpo_grpo.trl_exact.dpo.DPOOutput` holding tensors: ``loss`` 0-d with the
    autograd graph (``sum_k loss_weights[k] * mean`` of loss type k), ``logits`` (P,),
    the implicit rewards, ``losses`` and ``logps_*`` detached (as TRL logs them),
    ``grad_policy_*`` None (autograd computes them); ``metrics`` are 0-d tensors."""

    __slots__ = ()

    def _mean(self, x):
        return x.to(self.chosen_rewards.dtype).mean()


def _dpo_pair_losses(loss_type, pc, pr, rc, rr, o: DPOOptions, lc, lr):
    """Per-pair (or per sorted position, for aot*) losses of one TRL 1.16.0 DPO loss
    type, as TRL writes them; formulas in
    :func:`dpo_grpo.trl_exact.dpo.dpo_pair_losses`."""
    b, s = o.beta, o.label_smoothing
    uc, ur = pc - rc, pr - rr
    z = b * (uc - ur)
    ls = F.logsigmoid
    if loss_type == "sigmoid":
        return -ls(z)
    if loss_type == "hinge":
        return torch.relu(1.0 - z)
    if loss_type == "robust":
        return (-(1 - s) * ls(z) + s * ls(-z)) / (1 - 2 * s)
    if loss_type in ("ipo", "sigmoid_norm"):
        d = uc / lc - ur / lr
        return (d - 1 / (2 * b)) ** 2 if loss_type == "ipo" else -ls(b * d)
    if loss_type == "exo_pair":
        log_pw, log_pl = o.exo_log_p  # float32 values, as TRL's float32 logs
        return torch.sigmoid(z) * (ls(z) - log_pw) + torch.sigmoid(-z) * (
            ls(-z) - log_pl
        )
    if loss_type == "nca_pair":
        return -ls(b * uc) - 0.5 * ls(-b * uc) - 0.5 * ls(-b * ur)
    if loss_type == "bco_pair":
        return -ls(b * uc) - ls(-b * ur)
    if loss_type == "sppo_hard":
        return (uc - 0.5 / b) ** 2 + (ur + 0.5 / b) ** 2
    if loss_type in ("aot", "aot_unpaired"):
        x, y = (pc - pr, rc - rr) if loss_type == "aot" else (uc, ur)
        zs = b * (torch.sort(x, stable=True).values - torch.sort(y, stable=True).values)
        return -ls(zs) * (1 - s) - ls(-zs) * s
    if loss_type == "apo_zero":
        return 1 - torch.sigmoid(b * uc) + torch.sigmoid(b * ur)
    if loss_type == "apo_down":
        return torch.sigmoid(b * uc) + 1 - torch.sigmoid(z)
    if loss_type == "discopop":
        g = torch.sigmoid(z / o.discopop_tau)
        return -ls(z) * (1 - g) + torch.exp(-z) * g
    return (-pc.sum() / lc.sum()).expand(pc.shape)  # sft


def dpo_loss(
    policy_chosen,
    policy_rejected,
    ref_chosen,
    ref_rejected,
    beta=0.1,
    *,
    loss_type="sigmoid",
    label_smoothing=0.0,
    loss_weights=None,
    discopop_tau=0.05,
    chosen_lengths=None,
    rejected_lengths=None,
    validate=True,
) -> DPOOutput:
    """DPO loss on sequence log-probs (all of one shape, e.g. (P,)), every TRL 1.16.0
    ``DPOConfig.loss_type``.

    Same options, checks and results as :func:`dpo_grpo.trl_exact.dpo_loss` (a name or a
    list of names with ``loss_weights``; ``label_smoothing``, ``discopop_tau``;
    ``chosen_lengths``/``rejected_lengths`` for ``ipo``, ``sigmoid_norm``, ``sft``),
    differentiated by autograd. ``validate`` runs the finiteness check (one sync). The
    reference log-probs and the token counts are treated as fixed data (detached).
    """
    pc = checked_tensor(policy_chosen, "policy_chosen")
    pr = checked_tensor(policy_rejected, "policy_rejected", like=pc)
    rc = checked_tensor(ref_chosen, "ref_chosen", like=pc)
    rr = checked_tensor(ref_rejected, "ref_rejected", like=pc)
    same_shape("policy_chosen", pc, policy_rejected=pr, ref_chosen=rc, ref_rejected=rr)
    o = dpo_options(beta, loss_type, loss_weights, label_smoothing, discopop_tau)
    need = dict(zip(("chosen_lengths", "rejected_lengths"), o.needs_lengths))
    lengths = {}
    for name, x in (
        ("chosen_lengths", chosen_lengths),
        ("rejected_lengths", rejected_lengths),
    ):
        if x is None:
            if need[name]:
                raise ValueError(
                    f"{name} is required for loss_type={loss_type!r} (it divides by "
                    "the completion token counts)"
                )
            lengths[name] = None
            continue
        if not need[name]:
            raise ValueError(
                f"{name} has no effect for loss_type={loss_type!r} (only ipo, "
                "sigmoid_norm and sft read token counts; sft reads chosen_lengths "
                "only)"
            )
        t = checked_tensor(x, name, floating=False).to(device=pc.device)
        if t.shape != pc.shape:
            raise ValueError(
                f"{name} must have shape {tuple(pc.shape)} (one token count per pair), "
                f"got {tuple(t.shape)}"
            )
        lengths[name] = t
    if v.boolean(validate, "validate"):
        bad = torch.stack([~torch.isfinite(t).all() for t in (pc, pr, rc, rr)]).tolist()
        for flag, name in zip(
            bad, ("policy_chosen", "policy_rejected", "ref_chosen", "ref_rejected")
        ):
            if flag:
                raise ValueError(
                    f"{name} must contain only finite values (found NaN or inf)"
                )
        for name, t in lengths.items():
            if t is not None and not bool(((t >= 1) & (t == torch.round(t))).all()):
                raise ValueError(f"{name} must hold whole token counts >= 1")
    cdt = compute_dtype(pc.dtype)
    pc, pr = pc.to(cdt), pr.to(cdt)
    rc, rr = rc.detach().to(cdt), rr.detach().to(cdt)
    lc, lr = (None if t is None else t.detach().to(cdt) for t in lengths.values())
    losses = sum(
        w * _dpo_pair_losses(t, pc, pr, rc, rr, o, lc, lr)
        for t, w in zip(o.loss_types, o.loss_weights)
    )
    loss = losses.mean()  # = sum_k w_k mean(losses_k), as TRL adds the weighted means
    logits = o.beta * ((pc - pr) - (rc - rr))
    with torch.no_grad():
        chosen_rewards = o.beta * (pc - rc)
        rejected_rewards = o.beta * (pr - rr)
    return DPOOutput(
        loss=loss,
        logits=logits,
        chosen_rewards=chosen_rewards,
        rejected_rewards=rejected_rewards,
        grad_policy_chosen=None,
        grad_policy_rejected=None,
        losses=losses.detach(),
        logps_chosen=pc.detach().mean(),
        logps_rejected=pr.detach().mean(),
    )
