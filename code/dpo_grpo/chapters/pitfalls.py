"""Six silent pitfalls of a GRPO implementation (chapter 5, page II): each runs without
error yet gives a wrong number.

The buggy lines and their fixed twins are defined on the page itself
(``book/05b_silent_pitfalls.ipynb``), side by side; this module holds what the page
and the tests share: the detectors, each raising ``ValueError`` (or returning a
measurement) so that a bug is caught by an assertion on the first batch rather than by
a failed run weeks later, and the toy data the page runs them on.

0. mask before exp: :func:`masked_after_exp_loss_buggy` (chapter 5, page I)
1. group boundaries: :func:`assert_group_blocks`
2. population vs sample std: :func:`infer_std_ddof`, :func:`assert_std_convention`
3. per-GPU normalisation: :func:`shard_rows`,
   :func:`assert_shards_hold_complete_groups`, :func:`sharding_discrepancy`
4. text vs tokens: :class:`ToyTokenizer`, :func:`serve_text`,
   :func:`assert_token_roundtrip`, :func:`assert_on_policy_ratio_is_one`,
   :func:`position_logps`
5. length normalisation: :func:`per_token_mean_loss_buggy` /
   :func:`per_sequence_mean_loss` / :func:`sequence_weights`, :func:`push_by_length`,
   :func:`reward_length_report`, :func:`simulate_length_correlated_rewards`
6. reward drift: :func:`rank_agreement`, :func:`assert_reward_model_consistent`
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validation as v
from ..i18n import tr
from ..trl_exact.grpo import grpo_loss
from .scoring import assert_complete_groups


def _rewards_1d(rewards, name="rewards"):
    return v.as_float_array(rewards, name, ndim=1)


def _ids(prompt_ids, n, name="prompt_ids"):
    try:
        ids = np.asarray(prompt_ids)
    except ValueError as exc:
        raise TypeError(f"{name} must be array-like ({exc})") from None
    if ids.dtype.kind == "f" and not np.isfinite(ids).all():
        raise ValueError(f"{name} must not contain NaN or inf")
    if ids.shape != (n,):
        raise ValueError(
            f"{name} must have shape ({n},) (one per reward), got {ids.shape}"
        )
    return ids


# --------------------------------------------------------------------------------------
# 0. The input contract: mask before exp
# --------------------------------------------------------------------------------------


def masked_after_exp_loss_buggy(new_logps, old_logps, advantages, mask):
    """BUGGY: exponentiate first, mask afterwards: ``sum(-exp(new - old) A m) / sum(m)``
    (unclipped, token mean).

    Correct on clean inputs; NaN or inf left in padding leaks through ``0 * inf = nan``
    and ``0 * nan = nan``. :func:`dpo_grpo.trl_exact.grpo_loss` (as the readable
    ``dpo_grpo.grpo_loss``) replaces padding by 0 *before* the exponential instead.
    """
    new, old, a, m = _padded_token_inputs(new_logps, old_logps, advantages, mask)
    with np.errstate(all="ignore"):
        return float((-np.exp(new - old) * a[:, None] * m).sum() / m.sum())


def _padded_token_inputs(new_logps, old_logps, advantages, mask):
    """(B, T) log-probs that may hold NaN or inf in padding (the point of the demo
    above), (B,) advantages and a (B, T) 0/1 mask as float arrays; ``ValueError`` on
    anything else."""
    new = v.as_float_array(new_logps, "new_logps", ndim=2, finite=False)
    old = v.as_float_array(old_logps, "old_logps", ndim=2, finite=False)
    v.same_shape(new_logps=new, old_logps=old)
    m = v.binary_mask(mask, "mask", new.shape).astype(np.float64)
    a = v.as_float_array(advantages, "advantages", ndim=1)
    if a.shape != (new.shape[0],):
        raise ValueError(f"advantages must have shape ({new.shape[0]},), got {a.shape}")
    if not (np.isfinite(new[m > 0]).all() and np.isfinite(old[m > 0]).all()):
        raise ValueError(
            "new_logps and old_logps must be finite at every valid (mask == 1) position"
        )
    return new, old, a, m


# --------------------------------------------------------------------------------------
# 1. Group boundaries shuffled before view(-1, G)
# --------------------------------------------------------------------------------------


def assert_group_blocks(prompt_ids, group_size):
    """DETECTOR: every consecutive block of ``group_size`` rows holds one prompt id, and
    each prompt has exactly one block (``ValueError`` otherwise). Run it right before
    ``view(-1, G)`` and again after a distributed gather."""
    assert_complete_groups(prompt_ids, group_size)


# --------------------------------------------------------------------------------------
# 2. Mixing population and sample standard deviations
# --------------------------------------------------------------------------------------


def infer_std_ddof(advantages, tol=1e-2):
    """DETECTOR: which std a row of standardised advantages used, from ``sum_i A_i^2``
    (P, G) -> (P,) ints.

    With ``eps -> 0``, ``sum A^2 = G`` for the population std (ddof 0) and ``G - 1`` for
    the sample std (ddof 1). Returns 0 or 1 per row, or -1 when the sum matches neither
    (a zero-std row, a huge eps, or another scale).
    """
    a = v.as_float_array(advantages, "advantages", ndim=2)
    g = a.shape[1]
    ss = (a**2).sum(axis=1)
    tol = v.scalar(tol, "tol", positive=True)
    return np.where(
        np.abs(ss - g) <= tol * g, 0, np.where(np.abs(ss - (g - 1)) <= tol * g, 1, -1)
    )


def assert_std_convention(advantages, ddof, tol=1e-2):
    """DETECTOR: raise ``ValueError`` if any row with a nonzero spread was standardised
    with the other ddof."""
    v.choice(ddof, "ddof", (0, 1))
    found = infer_std_ddof(advantages, tol)
    bad = np.flatnonzero((found != ddof) & (found != -1))
    if bad.size:
        raise ValueError(
            tr(
                "rows {rows} were standardised with ddof={found}, the spec says "
                "ddof={ddof}",
                rows=bad.tolist()[:5],
                found=1 - ddof,
                ddof=ddof,
            )
        )


# --------------------------------------------------------------------------------------
# 3. Per-GPU normalisation before gathering
# --------------------------------------------------------------------------------------


def shard_rows(n_rows, n_shards, layout="contiguous"):
    """Which shard (GPU) holds each row, shape (n_rows,): ``"contiguous"`` blocks or
    ``"round_robin"``."""
    n = v.integer(n_rows, "n_rows", minimum=1)
    k = v.integer(n_shards, "n_shards", minimum=1)
    v.choice(layout, "layout", ("contiguous", "round_robin"))
    if layout == "round_robin":
        return np.arange(n) % k
    return np.minimum(np.arange(n) * k // n, k - 1)


def assert_shards_hold_complete_groups(prompt_ids, shard_of_row, group_size):
    """DETECTOR: before computing statistics locally, every shard must hold complete
    groups (``ValueError``)."""
    ids = _ids(prompt_ids, np.asarray(prompt_ids).size)
    shard = _ids(shard_of_row, ids.size, "shard_of_row")
    g = v.integer(group_size, "group_size", minimum=1)
    for s in np.unique(shard):
        local = ids[shard == s]
        uniq, counts = np.unique(local, return_counts=True)
        if (counts != g).any():
            p = uniq[counts != g][0]
            raise ValueError(
                tr(
                    "shard {s} holds {n} of the {g} rows of prompt {p}: gather the "
                    "whole group before computing its mean and std",
                    s=s,
                    n=counts[counts != g][0],
                    g=g,
                    p=p,
                )
            )


def sharding_discrepancy(fn, rewards, prompt_ids, shardings, **kwargs):
    """DETECTOR: ``max |A(s_a) - A(s_b)|`` of
    ``fn(rewards, prompt_ids, shard_of_row, **kwargs)`` over the given ``shardings`` (a
    list of shard-of-row arrays, e.g. from :func:`shard_rows`); 0 for a correct
    implementation."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    r = _rewards_1d(rewards)
    shardings = v.sequence(shardings, "shardings")
    if len(shardings) < 2:
        raise ValueError("shardings needs at least two shard layouts to compare")
    outs = [fn(r, prompt_ids, np.asarray(s), **kwargs) for s in shardings]
    return float(max(np.max(np.abs(a - b)) for a in outs for b in outs))


# --------------------------------------------------------------------------------------
# 4. Generated text vs training tokens
# --------------------------------------------------------------------------------------


class ToyTokenizer:
    """A greedy longest-match tokenizer over a tiny vocabulary, with special tokens.

    ``encode(text)`` always prefers the longest vocabulary entry, so two tokens the
    model emitted separately (``"a"``, ``"b"``, or ``" "``, ``" "``) can come back as
    one (``"ab"``, ``"  "``). ``decode(ids, skip_special_tokens=True)`` drops special
    tokens such as ``"<eos>"``.
    """

    DEFAULT_VOCAB = ("<eos>", "<tool>", "a", "b", "ab", " ", "  ", "c", "=")
    SPECIAL = ("<eos>", "<tool>")

    def __init__(self, vocab=DEFAULT_VOCAB, special=SPECIAL):
        self.vocab = v.sequence(vocab, "vocab")
        if len(set(self.vocab)) != len(self.vocab) or not all(
            isinstance(t, str) and t for t in self.vocab
        ):
            raise ValueError("vocab must be distinct non-empty strings")
        self.special = set(v.sequence(special, "special"))
        self.id_of = {t: i for i, t in enumerate(self.vocab)}
        self._by_length = sorted(self.vocab, key=len, reverse=True)

    def encode(self, text):
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        ids, i = [], 0
        while i < len(text):
            for tok in self._by_length:
                if text.startswith(tok, i):
                    ids.append(self.id_of[tok])
                    i += len(tok)
                    break
            else:
                raise ValueError(f"cannot encode {text[i]!r} at position {i}")
        return np.array(ids, dtype=np.int64)

    def decode(self, ids, skip_special_tokens=False):
        out = []
        skip_special_tokens = v.boolean(skip_special_tokens, "skip_special_tokens")
        for i in v.integer_array(ids, "ids", ndim=1, allow_empty=True).tolist():
            if not 0 <= i < len(self.vocab):
                raise ValueError(
                    f"token id {i} is outside the vocabulary (size {len(self.vocab)})"
                )
            tok = self.vocab[i]
            if skip_special_tokens and tok in self.special:
                continue
            out.append(tok)
        return "".join(out)


def _tokenizer(tokenizer):
    if not isinstance(tokenizer, ToyTokenizer):
        raise TypeError(
            f"tokenizer must be a ToyTokenizer, got {type(tokenizer).__name__}"
        )


def serve_text(ids, tokenizer: ToyTokenizer):
    """What an inference service returns: the decoded text without special tokens and
    with whitespace runs merged (a common post-processing)."""
    _tokenizer(tokenizer)
    text = tokenizer.decode(ids, skip_special_tokens=True)
    while "  " in text:
        text = text.replace("  ", " ")
    return text


def assert_token_roundtrip(ids, text, tokenizer: ToyTokenizer):
    """DETECTOR: ``encode(text)`` must reproduce the sampled ``ids`` exactly
    (``ValueError`` otherwise)."""
    _tokenizer(tokenizer)
    ids = v.integer_array(ids, "ids", allow_empty=True)
    again = tokenizer.encode(text)
    if again.shape != ids.shape or not np.array_equal(again, ids):
        raise ValueError(
            tr(
                "text does not round-trip to the sampled tokens: {n} sampled ids "
                "{ids} vs {m} re-encoded ids {again}",
                n=ids.size,
                ids=ids.tolist(),
                m=again.size,
                again=again.tolist(),
            )
        )


def assert_on_policy_ratio_is_one(new_logps, old_logps, mask, atol=1e-6):
    """DETECTOR: before the first optimizer step on a rollout, ``new == old`` at every
    valid token, so every ratio is 1. A ratio far from 1 at that point means the trainer
    scores different actions than were sampled."""
    new = v.as_float_array(new_logps, "new_logps", ndim=2, finite=False)
    old = v.as_float_array(old_logps, "old_logps", ndim=2, finite=False)
    v.same_shape(new_logps=new, old_logps=old)
    active = v.binary_mask(mask, "mask", new.shape)
    atol = v.scalar(atol, "atol", nonnegative=True)
    if not (np.isfinite(new[active]).all() and np.isfinite(old[active]).all()):
        raise ValueError(
            "new_logps and old_logps must be finite at every valid (mask == 1) position"
        )
    gap = np.abs(np.where(active, new - old, 0.0))
    if gap.max() > atol:
        raise ValueError(
            tr(
                "on-policy log-ratio is not 0 (max |new - old| = {gap:.3g} > "
                "{atol:g}): the trainer's tokens differ from the sampled ones",
                gap=np.nanmax(gap),
                atol=atol,
            )
        )


def position_logps(table, ids):
    """Log-probs of ``ids`` (L,) under a position-wise table of log-probs ``table`` (T,
    V): ``table[t, ids[t]]``."""
    tab = v.as_float_array(table, "table", ndim=2)
    ids = v.integer_array(ids, "ids", ndim=1, allow_empty=True)
    if ids.size > tab.shape[0]:
        raise ValueError(
            f"{ids.size} tokens exceed the table's {tab.shape[0]} positions"
        )
    if ids.size and (ids.min() < 0 or ids.max() >= tab.shape[1]):
        raise ValueError(
            f"ids must lie in [0, {tab.shape[1]}) (the table's vocabulary), got range "
            f"[{ids.min()}, {ids.max()}]"
        )
    return tab[np.arange(ids.size), ids]


# --------------------------------------------------------------------------------------
# 5. Length normalisation silently changing preferences
# --------------------------------------------------------------------------------------


def per_token_mean_loss_buggy(per_token_loss, mask):
    """BUGGY when the objective is DeepSeekMath's ``1/G sum_i 1/|y_i| sum_t``:
    ``(l * m).sum() / m.sum()``.

    It runs and looks like "the mean loss", but weights each answer by its length."""
    lt = np.asarray(per_token_loss, dtype=np.float64)
    m = np.asarray(mask, dtype=np.float64)
    return float((lt * m).sum() / m.sum())


def per_sequence_mean_loss(per_token_loss, mask):
    """FIXED (for the paper's objective): mean over each answer's valid tokens, then
    over answers."""
    lt = v.as_float_array(per_token_loss, "per_token_loss", ndim=2)
    m = v.binary_mask(mask, "mask", lt.shape).astype(np.float64)
    return float(((lt * m).sum(axis=1) / m.sum(axis=1)).mean())


def sequence_weights(mask, loss_type="grpo", **grpo_options):
    """DETECTOR: the total weight of each answer in the loss, shape (B,), read off
    :func:`dpo_grpo.trl_exact.grpo_loss`.

    On-policy with advantage -1 and beta 0 every token's loss is 1, so d loss / d
    new_logps is each token's weight; summed per row it is the answer's share of the
    loss. ``grpo`` gives 1/B to every answer; ``bnpo`` and ``dapo`` give
    ``|y_i| / sum |y|``; ``dr_grpo`` gives ``|y_i| / (B x max_len)``.
    """
    m = v.as_float_array(mask, "mask", ndim=2)
    m = v.binary_mask(m, "mask", m.shape).astype(np.float64)
    zeros = np.zeros(m.shape)
    out = grpo_loss(
        zeros,
        zeros,
        None,
        -np.ones(m.shape[0]),
        m,
        beta=0.0,
        loss_type=loss_type,
        **grpo_options,
    )
    return out.grad.sum(axis=1)


def length_buckets(lengths, n_buckets=4):
    """Quantile bucket edges of ``lengths`` (at most ``n_buckets + 1`` distinct values)
    and each row's bucket."""
    lengths = v.as_float_array(lengths, "lengths", ndim=1)
    k = v.integer(n_buckets, "n_buckets", minimum=1)
    edges = np.unique(np.quantile(lengths, np.linspace(0, 1, k + 1)))
    if edges.size < 2:
        edges = np.array([lengths.min(), lengths.max() + 1.0])
    idx = np.clip(np.searchsorted(edges, lengths, side="right") - 1, 0, edges.size - 2)
    return edges, idx


def push_by_length(advantages, lengths, weights, n_buckets=4):
    """Net push of one update on each length bucket: ``sum_{i in bucket} w_i A_i``,
    shape (buckets,).

    To first order an update moves answer ``i``'s log-probability in proportion to its
    total weight times its advantage, ``w_i A_i``; the per-bucket sums show which
    lengths the update favours. Returns ``(edges, push)``.
    """
    a = v.as_float_array(advantages, "advantages", ndim=1)
    lengths = v.as_float_array(lengths, "lengths", ndim=1)
    w = v.as_float_array(weights, "weights", ndim=1)
    if not a.shape == lengths.shape == w.shape:
        raise ValueError(
            f"advantages, lengths and weights must share one shape: {a.shape}, "
            f"{lengths.shape}, {w.shape}"
        )
    edges, idx = length_buckets(lengths, n_buckets)
    return edges, np.bincount(idx, weights=w * a, minlength=edges.size - 1)


class LengthReport(NamedTuple):
    """Output of :func:`reward_length_report`: Pearson ``correlation`` of reward and
    length, bucket ``edges`` (n_buckets + 1,), per-bucket ``pass_rate``, ``mean_reward``
    and ``count``."""

    correlation: float
    edges: np.ndarray
    pass_rate: np.ndarray
    mean_reward: np.ndarray
    count: np.ndarray


def reward_length_report(rewards, lengths, n_buckets=4, threshold=0.5):
    """DETECTOR: does the reward grow with length? Correlation, and pass rate (reward >=
    ``threshold``) per length bucket (quantile edges; the last bucket includes its upper
    edge)."""
    r = _rewards_1d(rewards)
    lengths = v.as_float_array(lengths, "lengths", ndim=1)
    if lengths.shape != r.shape:
        raise ValueError(f"lengths must have shape {r.shape}, got {lengths.shape}")
    threshold = v.scalar(threshold, "threshold")
    edges, idx = length_buckets(lengths, n_buckets)
    nb = edges.size - 1
    count = np.bincount(idx, minlength=nb)
    passes = np.bincount(idx, weights=(r >= threshold).astype(float), minlength=nb)
    total = np.bincount(idx, weights=r, minlength=nb)
    with np.errstate(invalid="ignore"):
        corr = (
            float(np.corrcoef(r, lengths)[0, 1])
            if r.std() > 0 and lengths.std() > 0
            else 0.0
        )
        return LengthReport(
            corr,
            edges,
            passes / np.maximum(count, 1),
            total / np.maximum(count, 1),
            count,
        )


def simulate_length_correlated_rewards(
    n_prompts=64, group_size=8, max_len=16, step_success=0.08, seed=0
):
    """Groups whose reward is 1 if any of ``L`` reasoning steps succeeds:
    ``P(r = 1 | L) = 1 - (1 - q)^L``.

    Returns ``(prompt_ids, lengths, rewards)``, each (n_prompts x group_size,), lengths
    uniform on 1..max_len.
    """
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    n, g = (
        v.integer(n_prompts, "n_prompts", minimum=1),
        v.integer(group_size, "group_size", minimum=2),
    )
    q = v.scalar(step_success, "step_success", open_unit=True)
    lengths = rng.integers(1, v.integer(max_len, "max_len", minimum=1) + 1, size=n * g)
    rewards = (rng.random(n * g) < 1 - (1 - q) ** lengths).astype(float)
    return np.repeat(np.arange(n), g), lengths, rewards


# --------------------------------------------------------------------------------------
# 6. Reward model drifting with the policy
# --------------------------------------------------------------------------------------


def rank_agreement(scores_a, scores_b):
    """DETECTOR: fraction of pairs ``(i, j)`` that two reward models order the same way
    (ties in either skipped).

    1.0 for any increasing affine map of the same scores; lower when the ranking rule
    changed.
    """
    a = _rewards_1d(scores_a, "scores_a")
    b = _rewards_1d(scores_b, "scores_b")
    if a.shape != b.shape or a.size < 2:
        raise ValueError(
            "scores_a and scores_b need one shared shape with >= 2 entries, got "
            f"{a.shape}, {b.shape}"
        )
    i, j = np.triu_indices(a.size, k=1)
    da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
    keep = (da != 0) & (db != 0)
    if not keep.any():
        return 1.0
    return float(np.mean(da[keep] == db[keep]))


def assert_reward_model_consistent(calib_old, calib_new, min_agreement=0.95):
    """DETECTOR: scores of a frozen calibration set under the old and the new reward
    model must rank it alike."""
    calib_old = _rewards_1d(calib_old, "calib_old")
    calib_new = _rewards_1d(calib_new, "calib_new")
    if calib_old.shape != calib_new.shape or calib_old.size < 2:
        raise ValueError(
            "calib_old and calib_new need one shared shape with >= 2 entries, got "
            f"{calib_old.shape}, {calib_new.shape}"
        )
    agree = rank_agreement(calib_old, calib_new)
    lo = v.scalar(min_agreement, "min_agreement")
    if agree < lo:
        raise ValueError(
            tr(
                "reward models disagree on the calibration set: rank agreement "
                "{agree:.3f} < {lo:g}",
                agree=agree,
                lo=lo,
            )
        )
    return agree
