"""Step 6 of the GRPO update (section 5.1): the per-token loss with masks, its reduction
per ``loss_type``, the masks of a batch with tool tokens, and the inference-engine
importance weights applied to the policy loss."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validation as v
from ..trl_exact.grpo import LOSS_TYPES, NORMALISER, grpo_loss
from .rollout import Rollout, as_array, require_rollout

#: a clipped loss type of each of TRL's normalisers (trl_exact.grpo.NORMALISER): the
#: type whose token aggregation a loss type shares (sapo: grpo's; cispo, vespo: dapo's)
_CLIPPED_WITH = {
    "sequence_mean": "grpo",
    "batch_tokens": "bnpo",
    "max_length": "dr_grpo",
    "sequence_sum": "luspo",
    "generation_tokens": "dapo",
}


# --------------------------------------------------------------------------------------
# Step 6: the per-token loss with masks
# --------------------------------------------------------------------------------------


def aggregate(
    per_token_loss,
    mask,
    loss_type="grpo",
    *,
    max_completion_length=None,
    num_items_in_batch=None,
):
    """Reduce a masked per-token loss (B, T) to a scalar as ``loss_type`` does (one
    process, no accumulation).

    ``grpo``: mean over each row's valid tokens, then over rows; ``bnpo``/``dapo``: sum
    over all valid tokens divided by their count (``dapo``: by ``num_items_in_batch`` if
    given); ``dr_grpo``: divided by ``B x max_completion_length`` (default T);
    ``luspo``: sum over each row's valid tokens, then mean over rows; ``sapo`` as
    ``grpo``, ``cispo`` and ``vespo`` as ``dapo``.
    """
    lt = v.as_float_array(per_token_loss, "per_token_loss", ndim=2)
    active = v.binary_mask(mask, "mask", lt.shape)
    m = active.astype(np.float64)
    v.choice(loss_type, "loss_type", LOSS_TYPES)
    loss_type = _CLIPPED_WITH[NORMALISER[loss_type]]
    masked = lt * m
    if loss_type == "luspo":
        return float(masked.sum(axis=1).mean())
    if loss_type == "grpo":
        return float((masked.sum(axis=1) / m.sum(axis=1)).mean())
    if loss_type == "bnpo":
        return float(masked.sum() / m.sum())
    if loss_type == "dr_grpo":
        max_len = (
            lt.shape[1]
            if max_completion_length is None
            else v.integer(
                max_completion_length, "max_completion_length", minimum=lt.shape[1]
            )
        )
        return float(masked.sum() / (lt.shape[0] * max_len))
    n_items = (
        m.sum()
        if num_items_in_batch is None
        else v.scalar(num_items_in_batch, "num_items_in_batch", positive=True)
    )
    return float(masked.sum() / n_items)


#: Token roles in a concatenated row ``[prompt | completion (model and tool/environment
#: tokens) | padding]``.
PAD, PROMPT, MODEL, TOOL = 0, 1, 2, 3


def masks_from_roles(roles):
    """The masks of a concatenated batch, from token roles (B, L) in {PAD, PROMPT,
    MODEL, TOOL}.

    ``attention``: every real token (prompt, model, tool); ``completion``: everything
    after the prompt except padding (model and tool tokens, TRL's ``completion_mask``);
    ``tool``: 0 on tool/environment tokens, 1 elsewhere (TRL's ``tool_mask``); ``loss``:
    the policy's own actions only, ``completion * tool`` = role MODEL.
    """
    r = as_array(roles, "roles")
    if r.ndim != 2 or r.size == 0 or not np.issubdtype(r.dtype, np.integer):
        raise ValueError(
            f"roles must be a non-empty 2-D integer array, got {r.dtype} shape "
            f"{r.shape}"
        )
    if not np.isin(r, (PAD, PROMPT, MODEL, TOOL)).all():
        raise ValueError("roles must contain only PAD=0, PROMPT=1, MODEL=2, TOOL=3")
    f = lambda x: x.astype(np.float64)  # noqa: E731
    return {
        "attention": f(r != PAD),
        "completion": f((r == MODEL) | (r == TOOL)),
        "tool": f(r != TOOL),
        "loss": f(r == MODEL),
    }


#: The letters of :func:`roles_from_text`
ROLE_LETTERS = {"P": PROMPT, "M": MODEL, "T": TOOL, ".": PAD}


def roles_from_text(rows):
    """Token roles (B, L) from one string per row, a letter per position: ``P``
    prompt, ``M`` model, ``T`` tool or environment, ``.`` padding (all rows one
    length), for :func:`masks_from_roles`."""
    rows = v.sequence(rows, "rows")
    if not all(isinstance(r, str) for r in rows):
        raise TypeError("rows must be strings, one per row")
    if not rows or not all(rows):
        raise ValueError("rows must be non-empty strings, one per row")
    if len({len(r) for r in rows}) != 1:
        raise ValueError(f"rows must all have one length, got {[len(r) for r in rows]}")
    bad = sorted(set("".join(rows)) - set(ROLE_LETTERS))
    if bad:
        raise ValueError(f"rows may hold only P, M, T and '.', got {bad}")
    return np.array([[ROLE_LETTERS[c] for c in r] for r in rows], dtype=np.int64)


class LossOutput(NamedTuple):
    """Output of :func:`loss_and_grad`: ``loss``, ``grad`` = d loss / d new_logps (N,
    T), the :class:`~dpo_grpo.trl_exact.grpo.GRPOOutput` ``grpo`` (before any engine
    correction) and the engine ``weights``."""

    loss: float
    grad: np.ndarray
    grpo: object
    weights: np.ndarray | None


def loss_and_grad(
    new_logps,
    rollout: Rollout,
    advantages,
    ref_logps=None,
    *,
    engine_weights=None,
    **grpo_options,
):
    """Step 6: the GRPO loss of ``rollout`` at the current log-probs, and d loss / d
    new_logps (N, T).

    Old log-probs, advantages and reference log-probs are constants (no gradient flows
    into rewards, group statistics or sampling). ``engine_weights`` (B, T) or (B, 1),
    from :func:`~.rollout.engine_importance_weights`, multiply the per-token *policy*
    loss, as TRL does; the KL term is not reweighted. ``grpo_options`` go to
    :func:`dpo_grpo.trl_exact.grpo_loss`.
    """
    require_rollout(rollout)
    full = grpo_loss(
        new_logps,
        rollout.old_logps,
        ref_logps,
        advantages,
        rollout.mask,
        **grpo_options,
    )
    if engine_weights is None:
        return LossOutput(full.loss, full.grad, full, None)
    shape = rollout.mask.shape
    w = v.as_float_array(engine_weights, "engine_weights", ndim=2)
    if w.shape[0] != shape[0] or w.shape[1] not in (1, shape[1]):
        raise ValueError(
            f"engine_weights must have shape ({shape[0]}, 1) or {shape}, got {w.shape}"
        )
    if (w < 0).any():
        raise ValueError("engine_weights must be >= 0")
    loss_type = grpo_options.get("loss_type", "grpo")
    if loss_type == "vespo":
        raise ValueError(
            "engine_weights are not supported for loss_type='vespo': TRL folds the "
            "engine's importance "
            "ratios into VESPO's sequence weight instead of multiplying the per-token "
            "loss"
        )
    sequence_level = (
        grpo_options.get("importance_sampling_level", "token") == "sequence"
    )
    if sequence_level and w.shape[1] > 1 and np.ndim(advantages) == 2:
        raise ValueError(
            "per-token engine_weights with importance_sampling_level='sequence' need "
            "one advantage "
            "per sequence (1-D advantages)"
        )
    m = rollout.mask.astype(np.float64)
    w = np.broadcast_to(w, shape) * m
    policy_opts = dict(grpo_options, beta=0.0)
    policy = grpo_loss(
        new_logps, rollout.old_logps, None, advantages, rollout.mask, **policy_opts
    )
    # The normaliser of each token (it depends on the mask and the options only):
    # on-policy, advantage -1, every token's loss is exactly 1 and its gradient is its
    # weight.
    probe_opts = dict(
        policy_opts,
        importance_sampling_level="token",
        delta=None,
        loss_type=_CLIPPED_WITH[NORMALISER[loss_type]],
    )
    zeros = np.zeros(shape)
    token_weight = grpo_loss(
        zeros, zeros, None, -np.ones(shape[0]), rollout.mask, **probe_opts
    ).grad
    policy_loss = float((token_weight * w * policy.per_token_loss).sum())
    if sequence_level and loss_type != "cispo":
        # every valid token of a row has the same loss l(c_row): the row's gradient
        # scales by sum(W w) / sum(W) (not so for cispo, whose token loss -sg(c_row) A
        # log pi_t has its own gradient at each token)
        factor = (token_weight * w).sum(axis=1, keepdims=True) / (
            token_weight.sum(axis=1, keepdims=True)
        )
        policy_grad = policy.grad * factor
    else:
        policy_grad = policy.grad * w
    loss = policy_loss + (full.loss - policy.loss)
    grad = (policy_grad + (full.grad - policy.grad)) * m
    return LossOutput(float(loss), grad, full, np.asarray(w))
