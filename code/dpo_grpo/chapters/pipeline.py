"""One GRPO update in seven steps (section 5.1), as small functions on a toy batch, plus a resumable trainer state.

The toy policy is a table of logits ``theta`` of shape ``(n_prompts, T, V)``: token ``t`` of a completion to prompt
``p`` is drawn from ``softmax(theta[p, t] / temperature)`` (no dependence on the prefix), so a log-prob is a
table look-up and ``d log pi(y_t) / d theta[p, t] = (onehot(y_t) - pi[p, t]) / temperature``. Token ``EOS = 0``
ends a completion (it is a policy action and is inside the mask); positions after it are padding (mask 0).

The seven steps, each a function below:

1. :func:`select_prompts` picks prompts, with pass-rate bookkeeping in :class:`PassRateTracker`;
2. :func:`sample_rollout` freezes the sampling snapshot and keeps token ids, masks and old log-probs
   (:class:`Rollout`); the token ids are the primary data, never re-tokenised text;
3. :func:`score` runs the reward functions, ``(N, K)`` with NaN for "returned None";
4. :func:`group_statistics` forms advantages over complete groups, after asserting each block is one prompt;
5. :func:`token_logps` gives the current and the (cacheable) reference log-probs of the stored tokens;
6. :func:`loss_and_grad` forms the per-token loss with masks (:func:`dpo_grpo.grpo_loss`, plus the optional
   inference-engine importance weights of :func:`engine_importance_weights`);
7. :func:`apply_update` takes the optimizer step and :func:`monitor` returns the dict to log.

:func:`grpo_step` chains them (``num_iterations`` optimisation epochs per rollout, then resample), on a
:class:`TrainerState` that :func:`checkpoint` / :func:`restore` save and load completely.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Sequence

import numpy as np

from .. import _validation as v
from ..reference.softmax import log_softmax, softmax
from ..trl_exact.advantages import reward_advantages
from ..trl_exact.grpo import LOSS_TYPES, grpo_loss

#: the loss type whose token aggregation each loss type shares (sapo: grpo's; cispo, vespo: dapo's)
_AGGREGATION_OF = {"sapo": "grpo", "cispo": "dapo", "vespo": "dapo"}

EOS = 0
SELECTION_STRATEGIES = ("uniform", "frontier")
ENGINE_IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


# ------------------------------------------------------------------------------------------------------------------
# Step 1: pick prompts, with pass-rate bookkeeping
# ------------------------------------------------------------------------------------------------------------------


@dataclass
class PassRateTracker:
    """Per-prompt counts: ``attempts``, ``passes`` (reward >= ``threshold``) and ``last_step`` (-1 = never seen)."""

    n_prompts: int
    threshold: float = 0.5
    attempts: np.ndarray = None
    passes: np.ndarray = None
    last_step: np.ndarray = None

    def __post_init__(self):
        self.n_prompts = v.integer(self.n_prompts, "n_prompts", minimum=1)
        self.threshold = v.scalar(self.threshold, "threshold")
        if self.attempts is None:
            self.attempts = np.zeros(self.n_prompts, dtype=np.int64)
            self.passes = np.zeros(self.n_prompts, dtype=np.int64)
            self.last_step = np.full(self.n_prompts, -1, dtype=np.int64)

    def update(self, prompt_ids, rewards, step):
        """Count every completion of ``prompt_ids`` (N,) with scalar ``rewards`` (N,); NaN rewards are skipped."""
        ids = _prompt_ids(prompt_ids, self.n_prompts)
        r = v.as_float_array(rewards, "rewards", ndim=1, finite=False)
        if r.shape != ids.shape:
            raise ValueError(
                f"rewards must have shape {ids.shape} (one per completion), got {r.shape}"
            )
        step = v.integer(step, "step", minimum=0)
        ok = ~np.isnan(r)
        np.add.at(self.attempts, ids[ok], 1)
        np.add.at(self.passes, ids[ok], (r[ok] >= self.threshold).astype(np.int64))
        self.last_step[np.unique(ids)] = step

    def pass_rates(self):
        """Smoothed pass rate ``(passes + 1) / (attempts + 2)`` per prompt (0.5 for a prompt never seen)."""
        return (self.passes + 1.0) / (self.attempts + 2.0)

    def state_dict(self):
        return {
            "n_prompts": self.n_prompts,
            "threshold": self.threshold,
            "attempts": self.attempts.copy(),
            "passes": self.passes.copy(),
            "last_step": self.last_step.copy(),
        }

    @classmethod
    def from_state_dict(cls, d):
        return cls(
            d["n_prompts"],
            d["threshold"],
            d["attempts"].copy(),
            d["passes"].copy(),
            d["last_step"].copy(),
        )


def selection_probabilities(tracker: PassRateTracker, strategy="uniform", floor=0.05):
    """Probability of drawing each prompt: uniform, or ``"frontier"``: proportional to ``p (1 - p) + floor``.

    ``p (1 - p)`` is the variance of a pass/fail reward, so frontier sampling favours prompts whose groups are
    unlikely to be all-correct or all-wrong (zero std). It changes the prompt distribution: measure any gain on an
    independent evaluation set.
    """
    if not isinstance(tracker, PassRateTracker):
        raise TypeError(
            f"tracker must be a PassRateTracker, got {type(tracker).__name__}"
        )
    v.choice(strategy, "strategy", SELECTION_STRATEGIES)
    floor = v.scalar(floor, "floor", nonnegative=True)
    if strategy == "uniform":
        return np.full(tracker.n_prompts, 1.0 / tracker.n_prompts)
    p = tracker.pass_rates()
    w = p * (1.0 - p) + floor
    return w / w.sum()


def select_prompts(tracker: PassRateTracker, n, rng, strategy="uniform", floor=0.05):
    """Step 1: draw ``n`` distinct prompt ids (sorted), shape ``(n,)``, with :func:`selection_probabilities`."""
    n = v.integer(n, "n", minimum=1)
    probs = selection_probabilities(tracker, strategy, floor)
    if n > tracker.n_prompts:
        raise ValueError(
            f"n ({n}) must be <= the number of prompts ({tracker.n_prompts})"
        )
    _rng(rng)
    return np.sort(rng.choice(tracker.n_prompts, size=n, replace=False, p=probs))


# ------------------------------------------------------------------------------------------------------------------
# Step 2: freeze the sampling snapshot; keep token ids, masks, old log-probs
# ------------------------------------------------------------------------------------------------------------------


class Rollout(NamedTuple):
    """What a rollout must keep. ``N = prompts x G`` rows in consecutive groups of ``group_size``.

    ``token_ids`` (N, T) int, ``mask`` (N, T) 0/1 (EOS included, padding 0), ``old_logps`` (N, T) the trainer's
    log-probs under the frozen snapshot, ``sampling_logps`` (N, T) the inference engine's own log-probs,
    ``policy_version`` (which snapshot sampled), ``settings`` (temperature, max length, seed).
    """

    prompt_ids: np.ndarray
    token_ids: np.ndarray
    mask: np.ndarray
    old_logps: np.ndarray
    sampling_logps: np.ndarray
    group_size: int
    policy_version: int
    settings: dict

    @property
    def lengths(self):
        """Valid completion tokens per row, shape (N,)."""
        return self.mask.sum(axis=1).astype(np.int64)


def token_logps(theta, prompt_ids, token_ids, temperature=1.0):
    """Step 5: per-token log-probs ``log softmax(theta[p, t] / temperature)[y_t]``, shape ``(N, T)``.

    Computed at every position (padding included: it is masked later, before any exp).
    """
    th = _theta(theta)
    ids = _prompt_ids(prompt_ids, th.shape[0])
    tok = _token_ids(token_ids, th.shape[2], (ids.size, th.shape[1]))
    temperature = v.scalar(temperature, "temperature", positive=True)
    logp = log_softmax(th[ids] / temperature)  # (N, T, V)
    return np.take_along_axis(logp, tok[..., None], axis=-1)[..., 0]


def sample_rollout(
    theta,
    prompt_ids,
    group_size,
    rng,
    *,
    temperature=1.0,
    max_len=None,
    policy_version=0,
    engine_logit_noise=0.0,
):
    """Step 2: sample ``group_size`` completions per prompt from the frozen snapshot ``theta``.

    Rows are grouped: prompt ``prompt_ids[j]`` owns rows ``j G .. j G + G - 1``. A completion stops after its first
    EOS or at ``max_len`` tokens (default ``T``). ``engine_logit_noise > 0`` simulates an inference engine whose
    numerics differ from the trainer's: tokens are drawn from ``softmax((theta + noise) / temperature)`` and that
    distribution's log-probs are kept as ``sampling_logps``; ``old_logps`` are always the trainer's.
    """
    # the snapshot: later updates of theta cannot change this rollout
    th = _theta(theta).copy()
    ids = _prompt_ids(prompt_ids, th.shape[0])
    g = v.integer(group_size, "group_size", minimum=2)
    _rng(rng)
    temperature = v.scalar(temperature, "temperature", positive=True)
    width = th.shape[1]
    max_len = width if max_len is None else v.integer(max_len, "max_len", minimum=1)
    if max_len > width:
        raise ValueError(
            f"max_len ({max_len}) must be <= the policy's length T ({width})"
        )
    noise = v.scalar(engine_logit_noise, "engine_logit_noise", nonnegative=True)
    engine = th + (noise * rng.standard_normal(th.shape) if noise else 0.0)

    rows = np.repeat(ids, g)
    n = rows.size
    tokens = np.full((n, width), EOS, dtype=np.int64)
    mask = np.zeros((n, width))
    probs = softmax(engine[rows] / temperature)  # (N, T, V)
    for i in range(n):
        for t in range(max_len):
            tok = rng.choice(th.shape[2], p=probs[i, t])
            tokens[i, t], mask[i, t] = tok, 1.0
            if tok == EOS:
                break
    settings = {
        "temperature": temperature,
        "max_len": max_len,
        "group_size": g,
        "engine_logit_noise": noise,
    }
    return Rollout(
        prompt_ids=rows,
        token_ids=tokens,
        mask=mask,
        old_logps=token_logps(th, rows, tokens, temperature),
        sampling_logps=token_logps(engine, rows, tokens, temperature),
        group_size=g,
        policy_version=v.integer(policy_version, "policy_version", minimum=0),
        settings=settings,
    )


def engine_importance_weights(
    old_logps,
    sampling_logps,
    mask,
    *,
    mode="sequence_mask",
    clip_min=None,
    clip_max=3.0,
):
    """Importance weights that correct for sampling with an inference engine (TRL 1.16.0's vLLM correction).

    The completions were drawn from the engine's distribution ``q`` but the surrogate assumes ``pi_old``: weight
    ``pi_old / q``. Token modes: ``w_t = exp(old_t - sampling_t)``, shape (B, T); sequence modes: ``w =
    exp(sum_t (old_t - sampling_t))`` (the sequence probability ratio), shape (B, 1). ``*_truncate`` clamps ``w``
    to ``[clip_min, clip_max]``; ``*_mask`` sets weights outside that interval to 0. Padding contributes 0 to the
    sums. The weights are constants: they multiply the per-token policy loss, not the KL term.
    """
    old = v.as_float_array(old_logps, "old_logps", ndim=2, finite=False)
    samp = v.as_float_array(sampling_logps, "sampling_logps", ndim=2, finite=False)
    v.same_shape(old_logps=old, sampling_logps=samp)
    active = v.binary_mask(mask, "mask", old.shape)
    v.choice(mode, "mode", ENGINE_IS_MODES)
    lo = v.scalar(clip_min, "clip_min", nonnegative=True, allow_none=True)
    hi = v.scalar(clip_max, "clip_max", positive=True, allow_none=True)
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"clip_min ({lo}) must be <= clip_max ({hi})")
    if not (np.isfinite(old[active]).all() and np.isfinite(samp[active]).all()):
        raise ValueError(
            "old_logps and sampling_logps must be finite at every valid (mask == 1) position"
        )
    diff = np.where(active, old - samp, 0.0)
    if mode.startswith("sequence"):
        diff = diff.sum(axis=1, keepdims=True)
    with np.errstate(over="raise"):
        try:
            w = np.exp(diff)
        except FloatingPointError:
            raise ValueError(
                "exp overflowed: old_logps - sampling_logps is too large"
            ) from None
    lo_v = -np.inf if lo is None else lo
    hi_v = np.inf if hi is None else hi
    if mode.endswith("truncate"):
        return np.clip(w, lo_v, hi_v)
    return np.where((w < lo_v) | (w > hi_v), 0.0, w)


# ------------------------------------------------------------------------------------------------------------------
# Step 3: score
# ------------------------------------------------------------------------------------------------------------------

RewardFn = Callable[[int, np.ndarray], "float | None"]


def score(rollout: Rollout, reward_fns: Sequence[RewardFn]):
    """Step 3: ``(N, K)`` rewards; ``reward_fns[k](prompt_id, completion_ids)`` may return None (stored as NaN).

    Each function sees the valid token ids of one completion (the EOS included), never re-tokenised text.
    """
    _rollout(rollout)
    if callable(reward_fns):
        reward_fns = [reward_fns]
    reward_fns = v.sequence(reward_fns, "reward_fns")
    if not reward_fns or not all(callable(f) for f in reward_fns):
        raise TypeError("reward_fns must be a non-empty sequence of callables")
    out = np.empty((rollout.token_ids.shape[0], len(reward_fns)))
    for i, (p, row, m) in enumerate(
        zip(rollout.prompt_ids, rollout.token_ids, rollout.mask)
    ):
        completion = row[m.astype(bool)]
        for k, f in enumerate(reward_fns):
            r = f(int(p), completion)
            try:
                out[i, k] = np.nan if r is None else float(r)
            except (TypeError, ValueError):
                raise TypeError(
                    f"reward_fns[{k}] must return a number or None, got {type(r).__name__}"
                ) from None
    return out


def target_token_reward(targets):
    """A verifier-style reward: 1.0 if the completion contains ``targets[prompt_id]``, else 0.0."""
    tg = v.integer_array(targets, "targets", ndim=1)

    def correct(prompt_id, completion):
        pid = v.integer(prompt_id, "prompt_id", minimum=0)
        if pid >= tg.size:
            raise ValueError(
                f"prompt_id must be < the number of targets ({tg.size}), got {pid}"
            )
        return float(np.any(completion == tg[pid]))

    correct.__name__ = "correct"
    return correct


def length_penalty(per_token=0.02):
    """A second reward: ``-per_token x`` number of tokens before EOS."""
    c = v.scalar(per_token, "per_token", nonnegative=True)

    def brevity(prompt_id, completion):
        return -c * float(np.sum(completion != EOS))

    brevity.__name__ = "brevity"
    return brevity


# ------------------------------------------------------------------------------------------------------------------
# Step 4: group statistics over complete groups
# ------------------------------------------------------------------------------------------------------------------


def assert_complete_groups(prompt_ids, group_size):
    """Raise ``ValueError`` unless the rows form consecutive blocks of ``group_size`` rows of one prompt each,
    and no prompt owns more than one block (each prompt has exactly ``group_size`` rows)."""
    ids = _asarray(prompt_ids, "prompt_ids")
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError(
            f"prompt_ids must be a non-empty 1-D array, got shape {ids.shape}"
        )
    g = v.integer(group_size, "group_size", minimum=1)
    if ids.size % g:
        raise ValueError(f"{ids.size} rows do not split into groups of group_size={g}")
    blocks = ids.reshape(-1, g)
    bad = np.flatnonzero((blocks != blocks[:, :1]).any(axis=1))
    if bad.size:
        j = int(bad[0])
        raise ValueError(
            f"group boundary broken: block {j} (rows {j * g}..{j * g + g - 1}) mixes prompt ids "
            f"{sorted(set(blocks[j].tolist()))}"
        )
    firsts = blocks[:, 0]
    uniq, counts = np.unique(firsts, return_counts=True)
    if (counts > 1).any():
        raise ValueError(
            f"prompt {uniq[counts > 1][0]!r} owns more than one block of {g} rows: each prompt must "
            f"have exactly group_size rows (gather the whole group before computing statistics)"
        )


class GroupStats(NamedTuple):
    """Output of :func:`group_statistics`: ``advantages`` (N,), aggregated ``rewards`` (N,), per-group ``mean``,
    ``std`` (sample std, NaN if < 2 valid), ``zero_std`` (bool) with shape (N // G,), and TRL's ``metrics``."""

    advantages: np.ndarray
    rewards: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    zero_std: np.ndarray
    metrics: dict


def group_statistics(
    rewards_per_func,
    prompt_ids,
    group_size,
    *,
    reward_weights=None,
    scale_rewards="group",
    multi_objective_aggregation="sum_then_normalize",
    eps=1e-4,
):
    """Step 4: check the group boundaries, then TRL's advantages (:func:`dpo_grpo.reward_advantages`).

    ``rewards_per_func`` (N, K) or (N,); the statistics are computed on complete groups, which in data-parallel
    training means *after* gathering every row of a prompt from every process.
    """
    assert_complete_groups(prompt_ids, group_size)
    out = reward_advantages(
        rewards_per_func,
        group_size,
        reward_weights=reward_weights,
        scale_rewards=scale_rewards,
        multi_objective_aggregation=multi_objective_aggregation,
        eps=eps,
    )
    if out.advantages.size != np.asarray(prompt_ids).size:
        raise ValueError(
            f"rewards_per_func must have one row per prompt id ({np.asarray(prompt_ids).size}), "
            f"got {out.advantages.size} rows"
        )
    rpf = np.asarray(rewards_per_func, dtype=np.float64)
    rpf = rpf[:, None] if rpf.ndim == 1 else rpf
    w = (
        np.ones(rpf.shape[1])
        if reward_weights is None
        else np.asarray(reward_weights, dtype=np.float64)
    )
    total = np.nansum(rpf * w, axis=1)
    total[np.isnan(rpf).all(axis=1)] = np.nan
    groups = total.reshape(-1, group_size)
    valid = (~np.isnan(groups)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(
            valid > 0, np.nansum(groups, axis=1) / np.maximum(valid, 1), np.nan
        )
        var = np.nansum((groups - mean[:, None]) ** 2, axis=1) / np.maximum(
            valid - 1, 1
        )
    std = np.where(valid > 1, np.sqrt(var), np.nan)
    zero = np.isclose(std, 0.0, rtol=1e-5, atol=1e-8)
    return GroupStats(out.advantages, total, mean, std, zero, out.metrics)


# ------------------------------------------------------------------------------------------------------------------
# Step 6: the per-token loss with masks
# ------------------------------------------------------------------------------------------------------------------


def aggregate(
    per_token_loss,
    mask,
    loss_type="grpo",
    *,
    max_completion_length=None,
    num_items_in_batch=None,
):
    """Reduce a masked per-token loss (B, T) to a scalar as ``loss_type`` does (one process, no accumulation).

    ``grpo``: mean over each row's valid tokens, then over rows; ``bnpo``/``dapo``: sum over all valid tokens
    divided by their count (``dapo``: by ``num_items_in_batch`` if given); ``dr_grpo``: divided by
    ``B x max_completion_length`` (default T); ``luspo``: sum over each row's valid tokens, then mean over rows;
    ``sapo`` as ``grpo``, ``cispo`` and ``vespo`` as ``dapo``.
    """
    lt = v.as_float_array(per_token_loss, "per_token_loss", ndim=2)
    active = v.binary_mask(mask, "mask", lt.shape)
    m = active.astype(np.float64)
    v.choice(loss_type, "loss_type", LOSS_TYPES)
    loss_type = _AGGREGATION_OF.get(loss_type, loss_type)
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


#: Token roles in a concatenated row ``[prompt | completion (model and tool/environment tokens) | padding]``.
PAD, PROMPT, MODEL, TOOL = 0, 1, 2, 3


def masks_from_roles(roles):
    """The masks of a concatenated batch, from token roles (B, L) in {PAD, PROMPT, MODEL, TOOL}.

    ``attention``: every real token (prompt, model, tool); ``completion``: everything after the prompt except
    padding (model and tool tokens, TRL's ``completion_mask``); ``tool``: 0 on tool/environment tokens, 1 elsewhere
    (TRL's ``tool_mask``); ``loss``: the policy's own actions only, ``completion * tool`` = role MODEL.
    """
    r = _asarray(roles, "roles")
    if r.ndim != 2 or r.size == 0 or not np.issubdtype(r.dtype, np.integer):
        raise ValueError(
            f"roles must be a non-empty 2-D integer array, got {r.dtype} shape {r.shape}"
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


class LossOutput(NamedTuple):
    """Output of :func:`loss_and_grad`: ``loss``, ``grad`` = d loss / d new_logps (N, T), the
    :class:`~dpo_grpo.trl_exact.grpo.GRPOOutput` ``grpo`` (before any engine correction) and the engine ``weights``."""

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
    """Step 6: the GRPO loss of ``rollout`` at the current log-probs, and d loss / d new_logps (N, T).

    Old log-probs, advantages and reference log-probs are constants (no gradient flows into rewards, group
    statistics or sampling). ``engine_weights`` (B, T) or (B, 1), from :func:`engine_importance_weights`, multiply
    the per-token *policy* loss, as TRL does; the KL term is not reweighted. ``grpo_options`` go to
    :func:`dpo_grpo.grpo_loss`.
    """
    if not isinstance(rollout, Rollout):
        raise TypeError(f"rollout must be a Rollout, got {type(rollout).__name__}")
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
            "engine_weights are not supported for loss_type='vespo': TRL folds the engine's importance "
            "ratios into VESPO's sequence weight instead of multiplying the per-token loss"
        )
    sequence_level = (
        grpo_options.get("importance_sampling_level", "token") == "sequence"
    )
    if sequence_level and w.shape[1] > 1 and np.ndim(advantages) == 2:
        raise ValueError(
            "per-token engine_weights with importance_sampling_level='sequence' need one advantage "
            "per sequence (1-D advantages)"
        )
    m = rollout.mask.astype(np.float64)
    w = np.broadcast_to(w, shape) * m
    policy_opts = dict(grpo_options, beta=0.0)
    policy = grpo_loss(
        new_logps, rollout.old_logps, None, advantages, rollout.mask, **policy_opts
    )
    # The normaliser of each token (it depends on the mask and the options only): on-policy, advantage -1, every
    # token's loss is exactly 1 and its gradient is its weight.
    probe_opts = dict(
        policy_opts,
        importance_sampling_level="token",
        delta=None,
        loss_type=_AGGREGATION_OF.get(loss_type, loss_type),
    )
    zeros = np.zeros(shape)
    token_weight = grpo_loss(
        zeros, zeros, None, -np.ones(shape[0]), rollout.mask, **probe_opts
    ).grad
    policy_loss = float((token_weight * w * policy.per_token_loss).sum())
    if sequence_level and loss_type != "cispo":
        # every valid token of a row has the same loss l(c_row): the row's gradient scales by sum(W w) / sum(W)
        # (not so for cispo, whose token loss -sg(c_row) A log pi_t has its own gradient at each token)
        factor = (token_weight * w).sum(axis=1, keepdims=True) / (
            token_weight.sum(axis=1, keepdims=True)
        )
        policy_grad = policy.grad * factor
    else:
        policy_grad = policy.grad * w
    loss = policy_loss + (full.loss - policy.loss)
    grad = (policy_grad + (full.grad - policy.grad)) * m
    return LossOutput(float(loss), grad, full, np.asarray(w))


# ------------------------------------------------------------------------------------------------------------------
# Step 7: update and monitor
# ------------------------------------------------------------------------------------------------------------------


def logits_gradient(theta, rollout: Rollout, grad_logps):
    """Chain rule from d loss / d log-probs (N, T) to d loss / d theta (n_prompts, T, V) for the table policy."""
    th = _theta(theta)
    _rollout(rollout)
    _prompt_ids(rollout.prompt_ids, th.shape[0])
    _token_ids(rollout.token_ids, th.shape[2], (rollout.prompt_ids.size, th.shape[1]))
    g = v.as_float_array(grad_logps, "grad_logps", ndim=2)
    if g.shape != rollout.token_ids.shape:
        raise ValueError(
            f"grad_logps must have shape {rollout.token_ids.shape}, got {g.shape}"
        )
    temp = rollout.settings["temperature"]
    probs = softmax(th[rollout.prompt_ids] / temp)  # (N, T, V)
    onehot = np.eye(th.shape[2])[rollout.token_ids]
    per_row = g[..., None] * (onehot - probs) / temp * rollout.mask[..., None]
    out = np.zeros_like(th)
    np.add.at(out, rollout.prompt_ids, per_row)
    return out


@dataclass
class Adam:
    """Adam on one array: ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``, step ``lr m_hat / (sqrt(v_hat) + eps)``."""

    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    t: int = 0
    m: np.ndarray | None = None
    v: np.ndarray | None = None

    def __post_init__(self):
        for name in ("b1", "b2"):
            b = v.scalar(getattr(self, name), name, nonnegative=True)
            if b >= 1:
                raise ValueError(f"{name} must lie in [0, 1), got {b}")
        v.scalar(self.eps, "eps", positive=True)
        v.integer(self.t, "t", minimum=0)

    def step(self, params, grad, lr):
        params = v.as_float_array(params, "params")
        grad = v.as_float_array(grad, "grad")
        v.same_shape(params=params, grad=grad)
        lr = v.scalar(lr, "lr", positive=True)
        if self.m is None:
            self.m, self.v = np.zeros_like(params), np.zeros_like(params)
        self.t += 1
        self.m = self.b1 * self.m + (1 - self.b1) * grad
        self.v = self.b2 * self.v + (1 - self.b2) * grad**2
        m_hat = self.m / (1 - self.b1**self.t)
        v_hat = self.v / (1 - self.b2**self.t)
        return params - lr * m_hat / (np.sqrt(v_hat) + self.eps)

    def state_dict(self):
        return {
            "b1": self.b1,
            "b2": self.b2,
            "eps": self.eps,
            "t": self.t,
            "m": None if self.m is None else self.m.copy(),
            "v": None if self.v is None else self.v.copy(),
        }

    @classmethod
    def from_state_dict(cls, d):
        return cls(
            d["b1"],
            d["b2"],
            d["eps"],
            d["t"],
            None if d["m"] is None else d["m"].copy(),
            None if d["v"] is None else d["v"].copy(),
        )


def linear_warmup_lr(step, base_lr, warmup_steps):
    """Scheduler: ``base_lr x min(1, (step + 1) / warmup_steps)``."""
    step = v.integer(step, "step", minimum=0)
    warmup = v.integer(warmup_steps, "warmup_steps", minimum=1)
    return v.scalar(base_lr, "base_lr", positive=True) * min(1.0, (step + 1) / warmup)


def apply_update(theta, grad_theta, optimizer: Adam, lr):
    """Step 7 (update): one optimizer step on the logits table; returns the new table."""
    if not isinstance(optimizer, Adam):
        raise TypeError(f"optimizer must be an Adam, got {type(optimizer).__name__}")
    th = _theta(theta)
    g = v.as_float_array(grad_theta, "grad_theta")
    v.same_shape(theta=th, grad_theta=g)
    return optimizer.step(th, g, v.scalar(lr, "lr", positive=True))


def monitor(
    rollout: Rollout,
    stats: GroupStats,
    rewards_per_func,
    out: LossOutput,
    *,
    reward_names=None,
    epoch=0,
):
    """Step 7 (monitor): the numbers to log every update (TRL's names where TRL logs them).

    ``reward``/``reward_std`` (aggregated reward), ``rewards/<name>/mean|std`` per function, ``frac_reward_zero_std``,
    ``kl`` (when beta > 0), ``clip_ratio/region_mean``, ``completion_length`` (mean, max, and the fraction of
    completions that hit the maximum length without EOS), ``policy_version`` and the epoch over this rollout.
    """
    _rollout(rollout)
    if not isinstance(stats, GroupStats):
        raise TypeError(f"stats must be a GroupStats, got {type(stats).__name__}")
    if not isinstance(out, LossOutput):
        raise TypeError(f"out must be a LossOutput, got {type(out).__name__}")
    rpf = v.as_float_array(
        rewards_per_func, "rewards_per_func", ndim=(1, 2), finite=False
    )
    rpf = rpf[:, None] if rpf.ndim == 1 else rpf
    if np.isinf(rpf).any():
        raise ValueError(
            "rewards_per_func must not contain inf (use NaN for 'reward function returned None')"
        )
    if rpf.shape[0] != rollout.token_ids.shape[0]:
        raise ValueError(
            f"rewards_per_func must have one row per completion ({rollout.token_ids.shape[0]}), "
            f"got shape {rpf.shape}"
        )
    names = (
        [f"r{k}" for k in range(rpf.shape[1])]
        if reward_names is None
        else v.sequence(reward_names, "reward_names")
    )
    if len(names) != rpf.shape[1]:
        raise ValueError(
            f"reward_names must name each of the {rpf.shape[1]} reward functions, got {len(names)}"
        )
    epoch = v.integer(epoch, "epoch", minimum=0)
    lengths = rollout.lengths
    last = rollout.token_ids[np.arange(lengths.size), np.maximum(lengths - 1, 0)]
    log = {
        "reward": stats.metrics["reward"],
        "reward_std": stats.metrics["reward_std"],
        "frac_reward_zero_std": stats.metrics["frac_reward_zero_std"],
    }
    for k, name in enumerate(names):
        col = rpf[:, k]
        log[f"rewards/{name}/mean"] = (
            float(np.nanmean(col)) if np.isfinite(col).any() else float("nan")
        )
        log[f"rewards/{name}/std"] = (
            float(np.nanstd(col, ddof=1))
            if np.isfinite(col).sum() > 1
            else float("nan")
        )
    if "kl" in out.grpo.metrics:
        log["kl"] = out.grpo.metrics["kl"]
    log["clip_ratio/region_mean"] = out.grpo.metrics["clip_ratio/region_mean"]
    log["completions/mean_length"] = float(lengths.mean())
    log["completions/max_length"] = int(lengths.max())
    log["completions/clipped_ratio"] = float(np.mean(last != EOS))
    log["policy_version"] = rollout.policy_version
    log["epoch"] = epoch
    return log


def warning_signs(
    history, *, length_growth=1.5, kl_spike=3.0, zero_std_rise=0.2, window=3
):
    """Flag the three warning signs in a list of monitoring dicts (oldest first); returns a list of strings.

    - reward up while length explodes: mean reward and mean length both rise, length by more than
      ``length_growth`` x over the history;
    - KL spike: the last ``kl`` exceeds ``kl_spike`` x the median of the earlier values;
    - more zero-std groups: ``frac_reward_zero_std`` of the last ``window`` entries exceeds the first ``window``'s
      by more than ``zero_std_rise``.
    """
    if not isinstance(history, (list, tuple)) or len(history) < 2:
        raise ValueError("history must be a list of at least two monitoring dicts")
    for row in history:
        if (
            not isinstance(row, dict)
            or "frac_reward_zero_std" not in row
            or (
                "completions/mean_length" in history[0]
                and not {"reward", "completions/mean_length"} <= set(row)
            )
        ):
            raise ValueError(
                "history must hold the dicts returned by monitor() (with 'reward', "
                "'completions/mean_length' and 'frac_reward_zero_std')"
            )
    length_growth = v.scalar(length_growth, "length_growth", nonnegative=True)
    kl_spike = v.scalar(kl_spike, "kl_spike", nonnegative=True)
    zero_std_rise = v.scalar(zero_std_rise, "zero_std_rise")
    flags = []
    w = min(v.integer(window, "window", minimum=1), len(history) // 2 or 1)
    first, last = history[:w], history[-w:]
    mean = lambda rows, k: float(np.mean([r[k] for r in rows]))  # noqa: E731
    if "completions/mean_length" in history[0]:
        r0, r1 = mean(first, "reward"), mean(last, "reward")
        l0, l1 = (
            mean(first, "completions/mean_length"),
            mean(last, "completions/mean_length"),
        )
        if r1 > r0 and l1 > length_growth * l0:
            flags.append(
                f"reward up ({r0:.3g} -> {r1:.3g}) while completion length grows {l1 / l0:.2f}x: "
                "check the reward for a length loophole"
            )
    kls = [r["kl"] for r in history if "kl" in r]
    if (
        len(kls) >= 3
        and kls[-1] > kl_spike * float(np.median(kls[:-1]))
        and kls[-1] > 0
    ):
        flags.append(
            f"KL spike: last kl {kls[-1]:.3g} > {kl_spike:g} x median {np.median(kls[:-1]):.3g}"
        )
    z0, z1 = mean(first, "frac_reward_zero_std"), mean(last, "frac_reward_zero_std")
    if z1 - z0 > zero_std_rise:
        flags.append(
            f"zero-std groups rise from {z0:.2f} to {z1:.2f}: fewer prompts carry a reward gradient"
        )
    return flags


# ------------------------------------------------------------------------------------------------------------------
# The whole update on a resumable state
# ------------------------------------------------------------------------------------------------------------------


@dataclass
class TrainerState:
    """Everything a GRPO run needs to continue exactly where it stopped (see :data:`CHECKPOINT_KEYS`)."""

    theta: np.ndarray  #: policy weights (the logits table)
    theta_ref: np.ndarray  #: reference weights
    optimizer: Adam  #: optimizer state (moments, step count)
    step: int = 0  #: scheduler position (optimizer updates so far)
    reference_version: str = "ref-v0"
    reward_version: str = "reward-v1"
    generation: dict = field(
        default_factory=lambda: {
            "temperature": 1.0,
            "max_len": None,
            "group_size": 4,
            "prompts_per_step": 2,
        }
    )
    data_order: np.ndarray | None = None  #: the prompt stream (a permutation, repeated)
    data_cursor: int = 0  #: next position in the prompt stream
    rng_state: dict | None = None  #: sampler state (numpy bit generator)
    tracker: PassRateTracker | None = None
    policy_version: int = 0


#: What a checkpoint must contain to resume the same optimisation, and why.
CHECKPOINT_KEYS = {
    "policy": "the actor's weights",
    "optimizer": "Adam's moments and step count: without them the next step has a different size and direction",
    "scheduler": "the learning-rate schedule's position: without it warm-up restarts",
    "reference_version": "which reference the KL term anchors to: re-initialising it from the loaded actor "
    "silently moves the anchor",
    "rollout_generation": "temperature, maximum length, group size, sampler state: they define pi_old's data",
    "reward_version": "which reward model or verifier scored the rollouts: a new one changes the objective",
    "data_cursor": "where the prompt stream stopped: without it the run revisits the first prompts",
}


def new_state(
    n_prompts=6,
    width=5,
    vocab=5,
    *,
    seed=0,
    group_size=4,
    prompts_per_step=2,
    temperature=1.0,
):
    """A fresh toy run: zero logits (uniform policy), reference = initial policy, a shuffled prompt stream."""
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    theta = np.zeros(
        (
            v.integer(n_prompts, "n_prompts", minimum=1),
            v.integer(width, "width", minimum=1),
            v.integer(vocab, "vocab", minimum=2),
        )
    )
    group_size = v.integer(group_size, "group_size", minimum=2)
    prompts_per_step = v.integer(prompts_per_step, "prompts_per_step", minimum=1)
    if prompts_per_step > n_prompts:
        raise ValueError(
            f"prompts_per_step must be <= n_prompts ({n_prompts}), got {prompts_per_step}"
        )
    temperature = v.scalar(temperature, "temperature", positive=True)
    order = rng.permutation(n_prompts)
    return TrainerState(
        theta=theta,
        theta_ref=theta.copy(),
        optimizer=Adam(),
        generation={
            "temperature": temperature,
            "max_len": None,
            "group_size": group_size,
            "prompts_per_step": prompts_per_step,
        },
        data_order=order,
        rng_state=copy.deepcopy(rng.bit_generator.state),
        tracker=PassRateTracker(n_prompts),
    )


def _next_prompts(state: TrainerState, n):
    order = state.data_order
    idx = [(state.data_cursor + j) % order.size for j in range(n)]
    state.data_cursor += n
    return np.sort(order[idx])


def grpo_step(
    state: TrainerState,
    reward_fns,
    *,
    base_lr=0.1,
    warmup_steps=3,
    num_iterations=2,
    beta=0.04,
    loss_type="grpo",
    epsilon=0.2,
    ref_cache=None,
):
    """One rollout and ``num_iterations`` optimisation epochs on it (steps 1-7); mutates ``state``; returns the
    list of monitoring dicts (one per epoch).

    Prompts come from the data stream at ``state.data_cursor``. The old log-probs are computed once, at sampling,
    and checked unchanged after every epoch; the reference log-probs are computed once per rollout (or read from
    ``ref_cache``, a dict keyed by ``(reference_version, policy_version)``).
    """
    if not isinstance(state, TrainerState):
        raise TypeError(f"state must be a TrainerState, got {type(state).__name__}")
    if ref_cache is not None and not isinstance(ref_cache, dict):
        raise TypeError(
            f"ref_cache must be a dict or None, got {type(ref_cache).__name__}"
        )
    rng = np.random.default_rng()
    rng.bit_generator.state = state.rng_state
    gen = state.generation
    prompts = _next_prompts(state, gen["prompts_per_step"])  # step 1
    # step 2
    rollout = sample_rollout(
        state.theta,
        prompts,
        gen["group_size"],
        rng,
        temperature=gen["temperature"],
        max_len=gen["max_len"],
        policy_version=state.policy_version,
    )
    old_copy = rollout.old_logps.copy()
    rpf = score(rollout, reward_fns)  # step 3
    stats = group_statistics(rpf, rollout.prompt_ids, rollout.group_size)  # step 4
    state.tracker.update(rollout.prompt_ids, rpf[:, 0], state.step)
    ref = None
    if beta != 0:  # step 5
        key = (state.reference_version, rollout.policy_version)
        if ref_cache is not None and key in ref_cache:
            ref = ref_cache[key]
        else:
            ref = token_logps(
                state.theta_ref,
                rollout.prompt_ids,
                rollout.token_ids,
                gen["temperature"],
            )
            if ref_cache is not None:
                ref_cache[key] = ref
    logs = []
    names = [getattr(f, "__name__", f"r{k}") for k, f in enumerate(reward_fns)]
    for epoch in range(v.integer(num_iterations, "num_iterations", minimum=1)):
        # step 5
        new = token_logps(
            state.theta, rollout.prompt_ids, rollout.token_ids, gen["temperature"]
        )
        # step 6
        out = loss_and_grad(
            new,
            rollout,
            stats.advantages,
            ref,
            beta=beta,
            loss_type=loss_type,
            epsilon=epsilon,
        )
        grad_theta = logits_gradient(state.theta, rollout, out.grad)
        lr = linear_warmup_lr(state.step, base_lr, warmup_steps)
        # step 7
        state.theta = apply_update(state.theta, grad_theta, state.optimizer, lr)
        state.step += 1
        if not np.array_equal(rollout.old_logps, old_copy):
            raise AssertionError(
                "old log-probs changed during the update: they must stay the rollout's values"
            )
        log = monitor(rollout, stats, rpf, out, reward_names=names, epoch=epoch)
        log["loss"], log["learning_rate"] = out.loss, lr
        logs.append(log)
    state.policy_version += 1
    state.rng_state = copy.deepcopy(rng.bit_generator.state)
    return logs


def checkpoint(state: TrainerState):
    """A complete checkpoint as a plain dict of copies (keys: :data:`CHECKPOINT_KEYS`, plus the tracker)."""
    if not isinstance(state, TrainerState):
        raise TypeError(f"state must be a TrainerState, got {type(state).__name__}")
    return {
        "policy": state.theta.copy(),
        "optimizer": state.optimizer.state_dict(),
        "scheduler": {"step": state.step},
        "reference_version": {
            "name": state.reference_version,
            "weights": state.theta_ref.copy(),
        },
        "rollout_generation": {
            "settings": dict(state.generation),
            "rng_state": copy.deepcopy(state.rng_state),
            "policy_version": state.policy_version,
        },
        "reward_version": state.reward_version,
        "data_cursor": {"order": state.data_order.copy(), "cursor": state.data_cursor},
        "pass_rates": state.tracker.state_dict(),
    }


def missing_checkpoint_keys(ckpt):
    """The required keys (:data:`CHECKPOINT_KEYS`) that ``ckpt`` lacks, in order."""
    if not isinstance(ckpt, dict):
        raise TypeError(f"ckpt must be a dict, got {type(ckpt).__name__}")
    return [k for k in CHECKPOINT_KEYS if k not in ckpt]


def restore(ckpt, *, strict=True):
    """Rebuild a :class:`TrainerState` from :func:`checkpoint`'s dict.

    ``strict=True`` raises ``ValueError`` naming what is missing. ``strict=False`` fills each missing part the way a
    weights-only resume does in practice: a fresh optimizer, scheduler at 0, the reference re-initialised from the
    loaded policy, the default generation settings with a new sampler seed, the data stream from its start.
    """
    missing = missing_checkpoint_keys(ckpt)
    strict = v.boolean(strict, "strict")
    if missing and strict:
        raise ValueError(
            "checkpoint cannot resume the same run; missing: "
            + "; ".join(f"{k} ({CHECKPOINT_KEYS[k]})" for k in missing)
        )
    if "policy" not in ckpt:
        raise ValueError("checkpoint has no policy weights")
    if not isinstance(ckpt["policy"], np.ndarray) or ckpt["policy"].ndim != 3:
        raise ValueError(
            f"ckpt['policy'] must be the (n_prompts, T, V) array of logits, got "
            f"{type(ckpt['policy']).__name__} of shape {np.shape(ckpt['policy'])}"
        )
    theta = ckpt["policy"].copy()
    fresh = new_state(*theta.shape, seed=12345)
    ref = ckpt.get("reference_version")
    gen = ckpt.get("rollout_generation")
    data = ckpt.get("data_cursor")
    return TrainerState(
        theta=theta,
        theta_ref=theta.copy() if ref is None else ref["weights"].copy(),
        optimizer=Adam()
        if "optimizer" not in ckpt
        else Adam.from_state_dict(ckpt["optimizer"]),
        step=0 if "scheduler" not in ckpt else ckpt["scheduler"]["step"],
        reference_version="(re-initialised from policy)"
        if ref is None
        else ref["name"],
        reward_version=ckpt.get("reward_version", "(unknown)"),
        generation=dict(fresh.generation) if gen is None else dict(gen["settings"]),
        data_order=fresh.data_order if data is None else data["order"].copy(),
        data_cursor=0 if data is None else data["cursor"],
        rng_state=fresh.rng_state if gen is None else copy.deepcopy(gen["rng_state"]),
        tracker=(
            PassRateTracker.from_state_dict(ckpt["pass_rates"])
            if "pass_rates" in ckpt
            else PassRateTracker(theta.shape[0])
        ),
        policy_version=0 if gen is None else gen["policy_version"],
    )


# ------------------------------------------------------------------------------------------------------------------
# The diagram of section 5.1
# ------------------------------------------------------------------------------------------------------------------

FLOW_STEPS = (
    ("1. pick prompts", "pass-rate table\n(uniform or frontier)", "prompt ids"),
    (
        "2. sample with pi_old",
        "frozen snapshot, G per prompt",
        "token ids, masks,\nold (+ engine) log-probs",
    ),
    ("3. score", "verifiers / reward models", "rewards (N, K),\nNaN = unscorable"),
    ("4. group statistics", "complete groups,\nafter the gather", "advantages (N,)"),
    (
        "5. log-probs",
        "current pi_theta (grad)\nreference pi_ref (cached)",
        "new, ref log-probs",
    ),
    (
        "6. per-token loss",
        "ratio, clip, KL, masks,\nloss_type normaliser",
        "loss, d loss / d new",
    ),
    ("7. update + monitor", "optimizer step, log dict", "new weights, metrics"),
)


def plot_data_flow(ax=None):
    """Draw the seven steps (:data:`FLOW_STEPS`) as boxes with the data each hands on; returns the axes.

    Orange marks the only quantity that carries a gradient (the current log-probs); grey arrows carry constants.
    The dashed loops are "another epoch on the same rollout" (6 -> 5) and "resample" (7 -> 1).
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    if ax is None:
        _, ax = plt.subplots(figsize=(12, 5.0))
    ax.set_xlim(0, 4)
    ax.set_ylim(-0.6, 2.15)
    ax.axis("off")
    pos = [
        (0.5, 1.7),
        (1.5, 1.7),
        (2.5, 1.7),
        (3.5, 1.7),
        (3.5, 0.45),
        (2.5, 0.45),
        (1.5, 0.45),
    ]
    w, h = 0.74, 0.6
    for i, ((title, what, _), (x, y)) in enumerate(zip(FLOW_STEPS, pos)):
        color = "#fde2c8" if i in (4, 5) else "#e6edf7"
        ax.add_patch(
            FancyBboxPatch(
                (x - w / 2, y - h / 2),
                w,
                h,
                boxstyle="round,pad=0.02,rounding_size=0.05",
                facecolor=color,
                edgecolor="#33415c",
                linewidth=1.2,
            )
        )
        ax.text(
            x,
            y + 0.15,
            title,
            ha="center",
            va="center",
            fontsize=10.5,
            weight="bold",
            color="#14213d",
        )
        ax.text(
            x, y - 0.1, what, ha="center", va="center", fontsize=8.3, color="#33415c"
        )

    def arrow(a, b, color="#7d8597", ls="-", rad=0.0):
        ax.add_patch(
            FancyArrowPatch(
                a,
                b,
                arrowstyle="-|>",
                mutation_scale=14,
                color=color,
                linewidth=1.6,
                linestyle=ls,
                connectionstyle=f"arc3,rad={rad}",
            )
        )

    def label(x, y, text):
        ax.text(
            x,
            y,
            text,
            ha="center",
            va="center",
            fontsize=8,
            color="#14213d",
            bbox=dict(facecolor="white", edgecolor="none", pad=0.4),
        )

    for i in range(
        3
    ):  # top row, left to right; the data handed on is written above the arrow
        (x0, y0), (x1, _) = pos[i], pos[i + 1]
        arrow((x0 + w / 2, y0), (x1 - w / 2, y0))
        label((x0 + x1) / 2, y0 + h / 2 + 0.17, FLOW_STEPS[i][2])
    arrow((3.5, 1.7 - h / 2), (3.5, 0.45 + h / 2))
    label(3.5 + 0.08, 1.075, FLOW_STEPS[3][2])
    for i, color in ((4, "#e8590c"), (5, "#e8590c")):  # bottom row, right to left
        (x0, y0), (x1, _) = pos[i], pos[i + 1]
        arrow((x0 - w / 2, y0), (x1 + w / 2, y0), color=color)
        label((x0 + x1) / 2, y0 - h / 2 - 0.12, FLOW_STEPS[i][2])
    arrow((1.5 - w / 2, 0.45), (0.5, 1.7 - h / 2), ls="--", rad=-0.35)
    label(0.42, 0.62, "resample:\nnew rollout")
    arrow((1.5, 0.45 - h / 2), (3.5, 0.45 - h / 2), ls="--", rad=0.28)
    label(2.5, -0.27, "next epoch on the same rollout (finite num_iterations)")
    ax.text(
        0.0,
        -0.55,
        "grey: constants for backprop (rewards, statistics, old/ref log-probs)   "
        "orange: carries the gradient",
        fontsize=8.5,
        color="#33415c",
    )
    return ax


# ------------------------------------------------------------------------------------------------------------------
# validation helpers
# ------------------------------------------------------------------------------------------------------------------


def _rollout(rollout):
    if not isinstance(rollout, Rollout):
        raise TypeError(f"rollout must be a Rollout, got {type(rollout).__name__}")


def _rng(rng):
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng must be a numpy.random.Generator, got {type(rng).__name__}"
        )


def _theta(theta):
    th = v.as_float_array(theta, "theta", ndim=3)
    if th.shape[2] < 2:
        raise ValueError(
            f"theta needs a vocabulary of at least 2 tokens, got shape {th.shape}"
        )
    return th


def _asarray(x, name):
    """``np.asarray(x)``, with a TypeError naming ``x`` when it is not array-like (ragged lists)."""
    try:
        return np.asarray(x)
    except ValueError as exc:
        raise TypeError(f"{name} must be array-like ({exc})") from None


def _prompt_ids(prompt_ids, n_prompts):
    ids = _asarray(prompt_ids, "prompt_ids")
    if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(
            f"prompt_ids must be a non-empty 1-D integer array, got {ids.dtype} shape {ids.shape}"
        )
    if ids.min() < 0 or ids.max() >= n_prompts:
        raise ValueError(
            f"prompt_ids must lie in [0, {n_prompts}), got range [{ids.min()}, {ids.max()}]"
        )
    return ids.astype(np.int64)


def _token_ids(token_ids, vocab, shape):
    tok = _asarray(token_ids, "token_ids")
    if not np.issubdtype(tok.dtype, np.integer):
        raise TypeError(f"token_ids must be integers, got dtype {tok.dtype}")
    if tok.shape != shape:
        raise ValueError(f"token_ids must have shape {shape}, got {tok.shape}")
    if tok.min() < 0 or tok.max() >= vocab:
        raise ValueError(
            f"token_ids must lie in [0, {vocab}), got range [{tok.min()}, {tok.max()}]"
        )
    return tok
