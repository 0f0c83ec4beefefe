"""Exercises of chapter 5 (Production I, a trainer side by side: 05.1-05.5; Production
II, six silent pitfalls: 05.6-05.7)."""

import numpy as np

from ..trl_exact.grpo import grpo_loss
from ..reference.examples import exercise_batch
from .core import choice, code, numeric

# --- Production I (05_production) -----------------------------------------------------


def _loss(loss_type, **kw):
    b = exercise_batch()
    opts = dict(beta=0.04, epsilon=0.2, loss_type=loss_type)
    opts.update(kw)
    return grpo_loss(
        b["new_logps"],
        b["old_logps"],
        b["ref_logps"],
        b["advantages"],
        b["mask"],
        **opts,
    ).loss


numeric(
    "05.1",
    "The dr_grpo loss (beta 0.04, epsilon 0.2, max_completion_length 8) of "
    "exercise_batch().",
    lambda: _loss("dr_grpo", max_completion_length=8),
    mistakes={
        "grpo": (
            lambda: _loss("grpo"),
            "This is the per-answer mean (loss_type='grpo').",
        ),
        "bnpo": (
            lambda: _loss("bnpo"),
            "This divides by the number of valid tokens (bnpo), not by a fixed size.",
        ),
        "max_len = T": (
            lambda: _loss("dr_grpo"),
            "dr_grpo divides by B x max_completion_length; the batch's width is not "
            "that length here.",
        ),
        "no KL": (
            lambda: _loss("dr_grpo", max_completion_length=8, beta=0.0),
            "The KL penalty (beta = 0.04) is part of the loss.",
        ),
    },
    level=1,
)


def _seq_weight():
    r = np.array([[2.0, 0.5, 4.0]])
    return grpo_loss(
        np.log(r),
        np.zeros((1, 3)),
        None,
        np.ones(1),
        np.ones((1, 3)),
        beta=0.0,
        importance_sampling_level="sequence",
    ).ratio[0, 0]


numeric(
    "05.2",
    "Token ratios [2, 0.5, 4]: the importance weight of "
    "importance_sampling_level='sequence' (before clipping).",
    _seq_weight,
    mistakes={
        "product": (
            4.0,
            "That is the sequence probability ratio (the product); TRL uses the mean "
            "log-ratio.",
        ),
        "arithmetic mean": (
            np.mean([2.0, 0.5, 4.0]),
            "That is the arithmetic mean of the ratios; TRL averages the log-ratios.",
        ),
    },
    level=1,
)


choice(
    "05.3",
    "Row [3 prompt | 4 model | 2 tool output | 2 model | 1 padding]: which loss mask "
    "is right?",
    {
        "a": "The attention mask: 1 on the 11 real tokens.",
        "b": "The completion mask: 1 on the 8 tokens after the prompt, padding 0.",
        "c": "Completion mask x tool mask: 1 on the 6 model tokens only.",
        "d": "1 on the 4 model tokens before the tool call only.",
    },
    "c",
    explanations={
        "a": (
            "Prompt tokens are conditioning, not actions: they do not belong in the "
            "completion loss."
        ),
        "b": (
            "The tool's output was not chosen by the policy; counting it also changes "
            "the denominator."
        ),
        "d": "The model's tokens after the tool result are its own actions too.",
    },
    level=2,
)


choice(
    "05.4",
    "Resume with the reference re-initialised from the loaded actor (beta > 0): what "
    "changes?",
    {
        "a": "Nothing: the reference is frozen anyway.",
        "b": (
            "The KL term anchors to the resumed policy: it restarts at zero and lets "
            "the policy drift further."
        ),
        "c": "Only the logged KL value, not the gradient.",
    },
    "b",
    explanations={
        "a": (
            "Frozen means 'not trained', not 'the same weights as before the "
            "interruption'."
        ),
        "c": (
            "The KL penalty's gradient depends on the reference log-probs, so the "
            "update changes too."
        ),
    },
    level=2,
)


#: 05.5: one position's logits, the sampling temperature, the sampled token
_LOGITS_055, _T_055, _TOKEN_055 = np.array([2.0, 0.5, 0.0, -1.0]), 0.7, 0


def _logp(logits, t, token):
    z = np.asarray(logits) / t
    return float(z[token] - np.log(np.exp(z).sum()))


numeric(
    "05.5",
    "A completion token (id 0) was sampled at temperature T = 0.7 from logits [2.0, "
    "0.5, 0.0, -1.0]. The trainer computes the current log-prob as TRL does (logits / "
    "T), but the old log-prob was stored from the untempered logits (T = 1). Before "
    "any update (same weights), derive the ratio pi_theta / pi_old that the clipped "
    "loss sees for this token.",
    lambda: float(np.exp(_logp(_LOGITS_055, _T_055, 0) - _logp(_LOGITS_055, 1.0, 0))),
    mistakes={
        "on-policy": (
            1.0,
            "The ratio is 1 only when both log-probs come from the same distribution; "
            "here one is softmax(z / T) and the other softmax(z).",
        ),
        "inverted": (
            lambda: float(
                np.exp(_logp(_LOGITS_055, 1.0, 0) - _logp(_LOGITS_055, _T_055, 0))
            ),
            "That is pi_old / pi_theta: the current (tempered) log-prob goes in the "
            "numerator.",
        ),
        "logit ratio": (
            lambda: float(np.exp(2.0 / _T_055 - 2.0)),
            "The normalisers differ too: subtract each distribution's own logsumexp.",
        ),
    },
    level=3,
)


# --- Production II (05b_silent_pitfalls) ----------------------------------------------


def _group_blocks_ok(prompt_ids, g):
    ids = np.asarray(prompt_ids)
    if ids.size == 0 or ids.size % g:
        return 0.0
    blocks = ids.reshape(-1, g)
    if (blocks != blocks[:, :1]).any():
        return 0.0
    return float(len(set(blocks[:, 0].tolist())) == blocks.shape[0])


def _blocks_only(prompt_ids, g):
    ids = np.asarray(prompt_ids)
    if ids.size % g:
        return 0.0
    blocks = ids.reshape(-1, g)
    return float(not (blocks != blocks[:, :1]).any())


def _counts_only(prompt_ids, g):
    _, counts = np.unique(np.asarray(prompt_ids), return_counts=True)
    return float(np.all(counts == g))


def _draw_prompt_ids(rng):
    """Prompt ids of P blocks of G rows drawn at grading time, shuffled half of the time
    (then usually wrong)."""
    g, p = int(rng.integers(2, 5)), int(rng.integers(1, 5))
    ids = np.repeat(rng.permutation(50)[:p], g)
    if rng.random() < 0.5:
        ids = rng.permutation(ids)
    return (ids.tolist(), g)


code(
    "05.6",
    "Implement group_blocks_ok(prompt_ids, G): 1.0 if the rows form consecutive "
    "blocks of G rows of one prompt each and every prompt owns exactly one block, "
    "else 0.0.",
    _group_blocks_ok,
    cases=[
        ([0, 0, 1, 1], 2),
        ([0, 1, 0, 1], 2),
        ([3, 3, 3, 7, 7, 7], 3),
        ([0, 0, 0, 0], 2),
        ([0, 0, 0], 2),
        ([5, 5, 5, 5, 2, 2, 2, 2], 4),
        ([1, 1, 2, 2, 1, 1], 2),
        ([4, 4, 4, 9, 9, 4], 3),
    ],
    mistakes={
        "blocks only": (
            _blocks_only,
            "A prompt may not own two blocks: its G rows must all be in one block.",
        ),
        "counts only": (
            _counts_only,
            "Right counts are not enough: the rows of a prompt must be consecutive.",
        ),
    },
    draw=_draw_prompt_ids,
    level=2,
)


# --- a derivation (level 3): pitfall 5's mechanism ------------------------------------

from ..chapters.length_bias import per_token_push  # noqa: E402

numeric(
    "05.7",
    "One group: right answers of 20 and 80 tokens (reward 1), wrong answers of 20 and "
    "80 tokens (reward 0); population std, eps = 1e-4, on-policy, beta = 0. Derive d "
    "loss / d log pi(token) for a token of the long wrong answer under "
    "loss_type='grpo'.",
    lambda: float(per_token_push("grpo").per_token[3]),
    mistakes={
        "dapo": (
            lambda: float(per_token_push("dapo").per_token[3]),
            "That is the token-level denominator (bnpo/dapo: 1 / all 200 tokens); "
            "grpo divides by G |y_i|.",
        ),
        "short answer": (
            lambda: float(per_token_push("grpo").per_token[2]),
            "That is a token of the short wrong answer: 1/|y_i| is 1/20 there, 1/80 "
            "here.",
        ),
        "sign": (
            lambda: -float(per_token_push("grpo").per_token[3]),
            "The answer is wrong (A < 0): the loss rises with its log-prob, so the "
            "derivative is positive.",
        ),
    },
    level=3,
)
