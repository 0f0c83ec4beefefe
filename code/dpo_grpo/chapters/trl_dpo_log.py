"""One DPO step logged as TRL 1.16.0's ``DPOTrainer`` logs it (the page "Reading a TRL
run"): every key of the log line, what it measures and when it appears
(:data:`DPO_LOG_MEANINGS`, :data:`DPO_KEY_WHEN`), and its value computed from the
per-token arrays of a pair batch (:func:`dpo_log_metrics`). The same function, fed a
tiny Qwen2's logits, gives what a real ``DPOTrainer`` logs
(``tests/chapters/test_trl_dpo_log.py``)."""

from __future__ import annotations

import numpy as np

from .. import _validation as v
from ..i18n import N_
from ..reference.softmax import log_softmax

#: What each key of a TRL 1.16.0 DPO log line measures (default ``loss_type="sigmoid"``,
#: ``f_divergence_type="reverse_kl"``, ``ld_alpha=None``), in the order of the line.
#: "Completion log-prob": the sum of the per-token log-probs over the completion.
DPO_LOG_MEANINGS = {
    "loss": N_(
        "mean over the pairs of -log sigmoid(beta * ((log pi(y_w) - log pi_ref(y_w)) "
        "- (log pi(y_l) - log pi_ref(y_l)))); per log: the mean over the optimiser "
        "steps since the last log"
    ),
    "grad_norm": N_(
        "L2 norm of the gradient over all trainable parameters, before clipping to "
        "max_grad_norm"
    ),
    "learning_rate": N_("the scheduler's learning rate at this optimiser step"),
    "entropy": N_(
        "mean of the policy's next-token entropy over the completion tokens of the "
        "chosen and rejected answers (token-weighted)"
    ),
    "num_tokens": N_(
        "non-padding tokens (prompt + completion, chosen and rejected sequences) "
        "seen so far"
    ),
    "logits/chosen": N_(
        "mean over the chosen completion tokens of the policy's logits averaged over "
        "the vocabulary (not the chosen token's logit)"
    ),
    "logits/rejected": N_("the same over the rejected completion tokens"),
    "mean_token_accuracy": N_(
        "fraction of the chosen completion tokens that are the policy's most likely "
        "next token"
    ),
    "rewards/chosen": N_(
        "mean over the pairs of beta * (log pi(y_w) - log pi_ref(y_w)), completion "
        "log-probs"
    ),
    "rewards/rejected": N_(
        "mean over the pairs of beta * (log pi(y_l) - log pi_ref(y_l))"
    ),
    "rewards/accuracies": N_(
        "fraction of the pairs whose chosen reward is above the rejected one (a tie "
        "counts 0)"
    ),
    "rewards/margins": N_("mean over the pairs of chosen reward - rejected reward"),
    "logps/chosen": N_(
        "mean over the pairs of the policy's completion log-prob of y_w"
    ),
    "logps/rejected": N_(
        "mean over the pairs of the policy's completion log-prob of y_l"
    ),
    "epoch": N_("epochs done: optimiser steps / optimiser steps per epoch"),
    "aux_loss": N_(
        "the mixture-of-experts router's load-balancing loss, unweighted; loss "
        "adds router_aux_loss_coef * aux_loss"
    ),
}

_EVERY = N_("every line")
#: When each key of :data:`DPO_LOG_MEANINGS` appears (TRL 1.16.0's DPOTrainer; the
#: keys of train()'s last line and of ``include_num_input_tokens_seen`` are the
#: Trainer's, as for GRPO).
DPO_KEY_WHEN = {
    **{k: _EVERY for k in DPO_LOG_MEANINGS},
    "epoch": N_("every line, and train()'s last line"),
    "aux_loss": N_(
        "a mixture-of-experts model (one with output_router_logits) unless "
        "router_aux_loss_coef=0"
    ),
}


def dpo_log_metrics(
    policy_logits,
    ref_logits,
    tokens,
    mask,
    *,
    beta: float = 0.1,
    num_tokens: float | None = None,
) -> dict:
    """The DPO keys of a TRL 1.16.0 log line for one batch of ``n`` pairs, from the
    logits at the completion positions: ``policy_logits`` and ``ref_logits`` of shape
    ``(2n, T, V)`` (rows ``0..n-1`` the chosen answers, ``n..2n-1`` the rejected ones,
    as TRL stacks them; position ``t`` holds the logits that predict ``tokens[:, t]``),
    ``tokens`` and ``mask`` ``(2n, T)`` (1 on completion tokens). ``num_tokens`` (the
    batch's non-padding tokens, prompts included) is passed through. Returns the keys
    of :data:`DPO_LOG_MEANINGS` that the batch determines, in its order."""
    z = np.asarray(policy_logits, dtype=float)
    zr = np.asarray(ref_logits, dtype=float)
    tokens = np.asarray(tokens)
    mask = np.asarray(mask, dtype=float)
    if z.ndim != 3 or z.shape != zr.shape or z.shape[:2] != tokens.shape:
        raise ValueError(
            "policy_logits and ref_logits must be (2n, T, V) and tokens (2n, T); got "
            f"{z.shape}, {zr.shape}, {tokens.shape}"
        )
    if mask.shape != tokens.shape or z.shape[0] % 2:
        raise ValueError("mask must match tokens, with an even number of rows")
    beta = v.scalar(beta, "beta", positive=True)
    n = z.shape[0] // 2
    lp_full = log_softmax(z)
    lp = np.take_along_axis(lp_full, tokens[..., None], -1)[..., 0]
    ref = np.take_along_axis(log_softmax(zr), tokens[..., None], -1)[..., 0]
    logps, ref_logps = (lp * mask).sum(1), (ref * mask).sum(1)
    chosen, rejected = logps[:n], logps[n:]
    r_chosen = beta * (chosen - ref_logps[:n])
    r_rejected = beta * (rejected - ref_logps[n:])
    entropy = -(np.exp(lp_full) * lp_full).sum(-1)
    mean_logit = z.mean(-1)
    top1 = z.argmax(-1) == tokens
    mc, mr = mask[:n], mask[n:]
    out = {
        "loss": float(np.mean(np.logaddexp(0.0, -(r_chosen - r_rejected)))),
        "entropy": float((entropy * mask).sum() / mask.sum()),
    }
    if num_tokens is not None:
        out["num_tokens"] = float(num_tokens)
    out.update(
        {
            "logits/chosen": float((mean_logit[:n] * mc).sum() / mc.sum()),
            "logits/rejected": float((mean_logit[n:] * mr).sum() / mr.sum()),
            "mean_token_accuracy": float((top1[:n] * mc).sum() / mc.sum()),
            "rewards/chosen": float(r_chosen.mean()),
            "rewards/rejected": float(r_rejected.mean()),
            "rewards/accuracies": float((r_chosen > r_rejected).mean()),
            "rewards/margins": float((r_chosen - r_rejected).mean()),
            "logps/chosen": float(chosen.mean()),
            "logps/rejected": float(rejected.mean()),
        }
    )
    return out


def pair_batch(
    seed: int = 0,
    *,
    n_pairs: int = 3,
    vocab: int = 6,
    max_len: int = 5,
    prompt_len: int = 4,
    ref_noise: float = 0.5,
    trained: float = 0.4,
) -> dict:
    """A small pair batch for the page: ``n_pairs`` chosen and rejected completions of
    1 to ``max_len`` tokens, the policy's and the reference's logits at each completion
    position, the tokens and the mask. The reference's logits are the policy's plus
    seeded noise of size ``ref_noise``, with the answer's token ``trained`` lower in
    the chosen rows and higher in the rejected ones: the policy has moved towards the
    chosen answers, as after some DPO steps. Returns the arrays (keys of
    :func:`dpo_log_metrics`'s arguments) and ``num_tokens``."""
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    n = v.integer(n_pairs, "n_pairs", minimum=1)
    t = v.integer(max_len, "max_len", minimum=1)
    vocab = v.integer(vocab, "vocab", minimum=2)
    logits = rng.normal(0.0, 1.5, (2 * n, t, vocab))
    ref = logits + v.scalar(ref_noise, "ref_noise", nonnegative=True) * rng.normal(
        0.0, 1.0, logits.shape
    )
    tokens = rng.integers(0, vocab, (2 * n, t))
    lengths = rng.integers(1, t + 1, 2 * n)
    mask = (np.arange(t)[None, :] < lengths[:, None]).astype(float)
    tokens = np.where(mask > 0, tokens, 0)
    sign = np.repeat([-1.0, 1.0], n)[:, None, None]
    onehot = np.eye(vocab)[tokens]
    ref = ref + sign * v.scalar(trained, "trained", nonnegative=True) * onehot
    prompts = v.integer(prompt_len, "prompt_len", minimum=0)
    return {
        "policy_logits": logits,
        "ref_logits": ref,
        "tokens": tokens,
        "mask": mask,
        "num_tokens": float(mask.sum() + 2 * n * prompts),
    }
