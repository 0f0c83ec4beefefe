"""Steps 1, 2 and 5 of the GRPO update (section 5.1) on a toy policy: pick prompts,
sample a rollout from a frozen snapshot, and the log-probs of its stored tokens.

The toy policy is a table of logits ``theta`` of shape ``(n_prompts, T, V)``: token
``t`` of a completion to prompt ``p`` is drawn from ``softmax(theta[p, t] /
temperature)`` (no dependence on the prefix), so a log-prob is a table look-up and ``d
log pi(y_t) / d theta[p, t] = (onehot(y_t) - pi[p, t]) / temperature``
(:func:`logits_gradient`). Token ``EOS = 0`` ends a completion (it is a policy action
and is inside the mask); positions after it are padding (mask 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .. import _validation as v
from ..reference.softmax import log_softmax, softmax

EOS = 0
SELECTION_STRATEGIES = ("uniform", "frontier")
ENGINE_IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


# --------------------------------------------------------------------------------------
# Step 1: pick prompts, with pass-rate bookkeeping
# --------------------------------------------------------------------------------------


@dataclass
class PassRateTracker:
    """Per-prompt counts: ``attempts``, ``passes`` (reward >= ``threshold``) and
    ``last_step`` (-1 = never seen)."""

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
        """Count every completion of ``prompt_ids`` (N,) with scalar ``rewards`` (N,);
        NaN rewards are skipped."""
        ids = _prompt_ids(prompt_ids, self.n_prompts)
        r = v.as_float_array(rewards, "rewards", ndim=1, finite=False)
        if r.shape != ids.shape:
            raise ValueError(
                f"rewards must have shape {ids.shape} (one per completion), got "
                f"{r.shape}"
            )
        step = v.integer(step, "step", minimum=0)
        ok = ~np.isnan(r)
        np.add.at(self.attempts, ids[ok], 1)
        np.add.at(self.passes, ids[ok], (r[ok] >= self.threshold).astype(np.int64))
        self.last_step[np.unique(ids)] = step

    def pass_rates(self):
        """Smoothed pass rate ``(passes + 1) / (attempts + 2)`` per prompt (0.5 for a
        prompt never seen)."""
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
    """Probability of drawing each prompt: uniform, or ``"frontier"``: proportional to
    ``p (1 - p) + floor``.

    ``p (1 - p)`` is the variance of a pass/fail reward, so frontier sampling favours
    prompts whose groups are unlikely to be all-correct or all-wrong (zero std). It
    changes the prompt distribution: measure any gain on an independent evaluation set.
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
    """Step 1: draw ``n`` distinct prompt ids (sorted), shape ``(n,)``, with
    :func:`selection_probabilities`."""
    n = v.integer(n, "n", minimum=1)
    probs = selection_probabilities(tracker, strategy, floor)
    if n > tracker.n_prompts:
        raise ValueError(
            f"n ({n}) must be <= the number of prompts ({tracker.n_prompts})"
        )
    _rng(rng)
    return np.sort(rng.choice(tracker.n_prompts, size=n, replace=False, p=probs))


# --------------------------------------------------------------------------------------
# Step 2: freeze the sampling snapshot; keep token ids, masks, old log-probs
# --------------------------------------------------------------------------------------


class Rollout(NamedTuple):
    """What a rollout must keep. ``N = prompts x G`` rows in consecutive groups of
    ``group_size``.

    ``token_ids`` (N, T) int, ``mask`` (N, T) 0/1 (EOS included, padding 0),
    ``old_logps`` (N, T) the trainer's log-probs under the frozen snapshot,
    ``sampling_logps`` (N, T) the inference engine's own log-probs, ``policy_version``
    (which snapshot sampled), ``settings`` (temperature, max length, seed).
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
    """Step 5: per-token log-probs ``log softmax(theta[p, t] / temperature)[y_t]``,
    shape ``(N, T)``.

    Computed at every position (padding included: it is masked later, before any exp).
    """
    th = as_theta(theta)
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
    """Step 2: sample ``group_size`` completions per prompt from the frozen snapshot
    ``theta``.

    Rows are grouped: prompt ``prompt_ids[j]`` owns rows ``j G .. j G + G - 1``. A
    completion stops after its first EOS or at ``max_len`` tokens (default ``T``).
    ``engine_logit_noise > 0`` simulates an inference engine whose numerics differ from
    the trainer's: tokens are drawn from ``softmax((theta + noise) / temperature)`` and
    that distribution's log-probs are kept as ``sampling_logps``; ``old_logps`` are
    always the trainer's.
    """
    # the snapshot: later updates of theta cannot change this rollout
    th = as_theta(theta).copy()
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
    """Importance weights that correct for sampling with an inference engine (TRL
    1.16.0's vLLM correction).

    The completions were drawn from the engine's distribution ``q`` but the surrogate
    assumes ``pi_old``: weight ``pi_old / q``. Token modes: ``w_t = exp(old_t -
    sampling_t)``, shape (B, T); sequence modes: ``w = exp(sum_t (old_t - sampling_t))``
    (the sequence probability ratio), shape (B, 1). ``*_truncate`` clamps ``w`` to
    ``[clip_min, clip_max]``; ``*_mask`` sets weights outside that interval to 0.
    Padding contributes 0 to the sums. The weights are constants: they multiply the
    per-token policy loss, not the KL term.
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
            "old_logps and sampling_logps must be finite at every valid (mask == 1) "
            "position"
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


# --------------------------------------------------------------------------------------
# The chain rule of the table policy (used by step 7)
# --------------------------------------------------------------------------------------


def logits_gradient(theta, rollout: Rollout, grad_logps):
    """Chain rule from d loss / d log-probs (N, T) to d loss / d theta (n_prompts, T, V)
    for the table policy."""
    th = as_theta(theta)
    require_rollout(rollout)
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


# --------------------------------------------------------------------------------------
# Argument checks of the toy policy's arrays
# --------------------------------------------------------------------------------------


def require_rollout(rollout):
    """Raise ``TypeError`` unless ``rollout`` is a :class:`Rollout`."""
    if not isinstance(rollout, Rollout):
        raise TypeError(f"rollout must be a Rollout, got {type(rollout).__name__}")


def _rng(rng):
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng must be a numpy.random.Generator, got {type(rng).__name__}"
        )


def as_theta(theta):
    """The logits table as a float array of shape ``(n_prompts, T, V)`` with ``V >= 2``;
    ``ValueError`` naming ``theta`` otherwise."""
    th = v.as_float_array(theta, "theta", ndim=3)
    if th.shape[2] < 2:
        raise ValueError(
            f"theta needs a vocabulary of at least 2 tokens, got shape {th.shape}"
        )
    return th


def as_array(x, name):
    """``np.asarray(x)``, with a ``TypeError`` naming ``name`` when ``x`` is not
    array-like (ragged lists)."""
    try:
        return np.asarray(x)
    except ValueError as exc:
        raise TypeError(f"{name} must be array-like ({exc})") from None


def _prompt_ids(prompt_ids, n_prompts):
    ids = as_array(prompt_ids, "prompt_ids")
    if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(
            f"prompt_ids must be a non-empty 1-D integer array, got {ids.dtype} shape "
            f"{ids.shape}"
        )
    if ids.min() < 0 or ids.max() >= n_prompts:
        raise ValueError(
            f"prompt_ids must lie in [0, {n_prompts}), got range [{ids.min()}, "
            f"{ids.max()}]"
        )
    return ids.astype(np.int64)


def _token_ids(token_ids, vocab, shape):
    tok = as_array(token_ids, "token_ids")
    if not np.issubdtype(tok.dtype, np.integer):
        raise TypeError(f"token_ids must be integers, got dtype {tok.dtype}")
    if tok.shape != shape:
        raise ValueError(f"token_ids must have shape {shape}, got {tok.shape}")
    if tok.min() < 0 or tok.max() >= vocab:
        raise ValueError(
            f"token_ids must lie in [0, {vocab}), got range [{tok.min()}, {tok.max()}]"
        )
    return tok
