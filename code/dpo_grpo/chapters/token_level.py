"""Chapter 3's token-level worked example: three ragged answers from logits to the
per-token gradient.

One prompt, a group of G = 3 answers of different lengths over a six-token vocabulary.
Each answer's tokens are scored by three policies given as logits: the rollout snapshot
pi_old, the updated policy pi_theta and the reference pi_ref.
:func:`token_level_example` turns the logits into per-token log-probs (log-softmax, then
the sampled token's entry); :func:`token_table` adds, for each valid token, the ratio
rho = pi_theta / pi_old (which varies *within* an answer), its clip region, the
normalisation weight of the chosen ``loss_type``, k3, the per-token loss and the
gradient of the loss with respect to that token's new log-prob, all from
:func:`dpo_grpo.trl_exact.grpo.grpo_loss`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validation as v
from ..reference.softmax import log_softmax
from ..reference.advantages import group_advantages
from ..reference.grpo import clip_region
from ..trl_exact.grpo import LOSS_TYPES, grpo_loss

__all__ = [
    "TOKEN_EXAMPLE",
    "TokenExample",
    "token_level_example",
    "TokenTable",
    "token_table",
    "loss_type_weights",
    "LOSS_TYPES_SHOWN",
]

#: The example's fixed inputs: token ids of three answers (padding = -1), their rewards,
#: the vocabulary size and the seed of the logits. Lengths 5, 3 and 7: a right answer
#: and a short and a long wrong one.
TOKEN_EXAMPLE = {
    "token_ids": [
        [2, 0, 4, 1, 5, -1, -1],
        [3, 3, 0, -1, -1, -1, -1],
        [1, 4, 2, 2, 0, 3, 5],
    ],
    "rewards": [1.0, 0.0, 0.0],
    "vocab_size": 6,
    "seed": 3,
    "logit_scale": 1.0,
    "update_scale": 0.3,
    "ref_scale": 0.25,
}
#: The loss types whose weights the chapter compares (TRL 1.16.0 names).
LOSS_TYPES_SHOWN = ("grpo", "bnpo", "dr_grpo", "dapo")


class TokenExample(NamedTuple):
    token_ids: np.ndarray  #: (B, T) sampled token ids, -1 at padding
    mask: np.ndarray  #: (B, T) 1 at valid tokens
    lengths: np.ndarray  #: (B,) |y_i|
    rewards: np.ndarray  #: (B,)
    advantages: np.ndarray  #: (B,) group-standardised (population std, eps = 1e-4)
    logits: dict  #: "old", "new", "ref" -> (B, T, V)
    #: "old", "new", "ref" -> (B, T) log-prob of the sampled token, 0 at padding
    logps: dict


def token_level_example(
    token_ids=None,
    rewards=None,
    *,
    vocab_size=None,
    seed=None,
    logit_scale=None,
    update_scale=None,
    ref_scale=None,
) -> TokenExample:
    """Build the example (defaults: :data:`TOKEN_EXAMPLE`). The logits are seeded
    normals: ``old`` with standard deviation ``logit_scale``;
    ``new = old + update_scale * noise`` and ``ref = old + ref_scale * noise'`` (the
    reference is an earlier policy, not the rollout snapshot). Log-probs are gathered at
    the sampled tokens."""
    d = TOKEN_EXAMPLE
    ids = v.integer_array(
        d["token_ids"] if token_ids is None else token_ids, "token_ids", ndim=2
    )
    r = v.as_float_array(
        d["rewards"] if rewards is None else rewards, "rewards", ndim=1
    )
    vocab = v.integer(
        d["vocab_size"] if vocab_size is None else vocab_size, "vocab_size", minimum=2
    )
    seed = v.integer(d["seed"] if seed is None else seed, "seed", minimum=0)
    scales = {
        name: v.scalar(d[name] if val is None else val, name, nonnegative=True)
        for name, val in (
            ("logit_scale", logit_scale),
            ("update_scale", update_scale),
            ("ref_scale", ref_scale),
        )
    }
    if r.shape != (ids.shape[0],):
        raise ValueError(
            f"rewards must have one entry per answer ({ids.shape[0]}), got shape "
            f"{r.shape}"
        )
    mask = ids >= 0
    if (ids >= vocab).any():
        raise ValueError(f"token_ids must be < vocab_size ({vocab})")
    if not mask[:, 0].all() or (np.diff(mask.astype(int), axis=1) > 0).any():
        raise ValueError(
            "token_ids: each answer must be left-aligned, with padding (-1) only at "
            "its end"
        )
    rng = np.random.default_rng(seed)
    shape = ids.shape + (vocab,)
    old = scales["logit_scale"] * rng.standard_normal(shape)
    new = old + scales["update_scale"] * rng.standard_normal(shape)
    ref = old + scales["ref_scale"] * rng.standard_normal(shape)
    safe = np.where(mask, ids, 0)
    logits = {"old": old, "new": new, "ref": ref}
    logps = {
        k: np.where(
            mask,
            np.take_along_axis(log_softmax(z), safe[..., None], axis=-1)[..., 0],
            0.0,
        )
        for k, z in logits.items()
    }
    adv = group_advantages(r[None, :])[0]
    return TokenExample(
        ids, mask.astype(float), mask.sum(axis=1), r, adv, logits, logps
    )


def loss_type_weights(mask, loss_type, *, max_completion_length=None):
    """The weight each valid token's loss gets in the total, per ``loss_type`` (one
    generation batch, one process): ``grpo`` 1/(B |y_i|), ``bnpo`` and ``dapo``
    1/(number of valid tokens), ``dr_grpo`` 1/(B L_max). Shape (B, T).
    """
    m = v.binary_mask(mask, "mask", np.shape(mask)).astype(float)
    v.choice(loss_type, "loss_type", LOSS_TYPES)
    bsz, width = m.shape
    max_len = (
        width
        if max_completion_length is None
        else v.integer(max_completion_length, "max_completion_length", minimum=width)
    )
    if loss_type == "grpo":
        w = 1.0 / (bsz * m.sum(axis=1, keepdims=True))
    elif loss_type == "dr_grpo":
        w = np.full((bsz, 1), 1.0 / (bsz * max_len))
    else:  # bnpo, dapo: the token count of the (whole generation) batch
        w = np.full((bsz, 1), 1.0 / m.sum())
    return w * m


class TokenTable(NamedTuple):
    loss: float
    ratio: np.ndarray  #: (B, T), 1 at padding
    #: (B, T) "inside" | "platform" | "wrong_direction" ("" at padding)
    region: np.ndarray
    weight: np.ndarray  #: (B, T) the loss_type's normalisation weight
    k3: np.ndarray  #: (B, T)
    #: (B, T) -min(rho A, clip(rho) A) + beta k3, before the weight
    per_token_loss: np.ndarray
    grad: np.ndarray  #: (B, T) d loss / d log pi_theta(token)
    rows: list  #: one dict per valid token, for a table


def token_table(
    example: TokenExample | None = None,
    *,
    epsilon=0.2,
    beta=0.04,
    loss_type="grpo",
    max_completion_length=None,
) -> TokenTable:
    """Every per-token quantity of one GRPO loss evaluation on the example (TRL 1.16.0's
    computation)."""
    ex = token_level_example() if example is None else example
    if not isinstance(ex, TokenExample):
        raise TypeError(f"example must be a TokenExample, got {type(ex).__name__}")
    out = grpo_loss(
        ex.logps["new"],
        ex.logps["old"],
        ex.logps["ref"],
        ex.advantages,
        ex.mask,
        epsilon=epsilon,
        beta=beta,
        loss_type=loss_type,
        max_completion_length=max_completion_length,
    )
    valid = ex.mask > 0
    region = np.where(
        valid, clip_region(out.ratio, ex.advantages[:, None], epsilon=epsilon), ""
    )
    weight = loss_type_weights(
        ex.mask, loss_type, max_completion_length=max_completion_length
    )
    rows = []
    for i, t in zip(*np.nonzero(valid)):
        rows.append(
            {
                "answer": int(i),
                "t": int(t),
                "token": int(ex.token_ids[i, t]),
                "A": float(ex.advantages[i]),
                "logp_old": float(ex.logps["old"][i, t]),
                "logp_new": float(ex.logps["new"][i, t]),
                "logp_ref": float(ex.logps["ref"][i, t]),
                "ratio": float(out.ratio[i, t]),
                "region": str(region[i, t]),
                "weight": float(weight[i, t]),
                "k3": float(out.per_token_kl[i, t]),
                "loss": float(out.per_token_loss[i, t]),
                "grad": float(out.grad[i, t]),
            }
        )
    return TokenTable(
        out.loss,
        out.ratio,
        region,
        weight,
        out.per_token_kl,
        out.per_token_loss,
        out.grad,
        rows,
    )
