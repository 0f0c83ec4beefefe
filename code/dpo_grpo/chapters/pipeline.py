"""One GRPO update in seven steps (section 5.1), chained on a toy batch, with a
resumable trainer state and the diagram of the data flow.

The seven steps, each a function of its own module:

1. :func:`~.rollout.select_prompts` picks prompts, with pass-rate bookkeeping in
   :class:`~.rollout.PassRateTracker`;
2. :func:`~.rollout.sample_rollout` freezes the sampling snapshot and keeps token ids,
   masks and old log-probs (:class:`~.rollout.Rollout`); the token ids are the primary
   data, never re-tokenised text;
3. :func:`~.scoring.score` runs the reward functions, ``(N, K)`` with NaN for "returned
   None";
4. :func:`~.scoring.group_statistics` forms advantages over complete groups, after
   asserting each block is one prompt;
5. :func:`~.rollout.token_logps` gives the current and the (cacheable) reference
   log-probs of the stored tokens;
6. :func:`~.token_loss.loss_and_grad` forms the per-token loss with masks
   (:func:`dpo_grpo.trl_exact.grpo_loss`, plus the optional inference-engine
   importance weights of :func:`~.rollout.engine_importance_weights`);
7. :func:`~.update.apply_update` takes the optimizer step and :func:`~.update.monitor`
   returns the dict to log.

:func:`grpo_step` chains them (``num_iterations`` optimisation epochs per rollout, then
resample), on a :class:`TrainerState` that :func:`checkpoint` / :func:`restore` save and
load completely.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from .. import _validation as v
from ..i18n import N_, check_glyphs, language, tr, use_cjk_matplotlib_font
from .rollout import PassRateTracker, logits_gradient, sample_rollout, token_logps
from .scoring import group_statistics, score
from .token_loss import loss_and_grad
from .update import Adam, apply_update, linear_warmup_lr, monitor


# --------------------------------------------------------------------------------------
# The whole update on a resumable state
# --------------------------------------------------------------------------------------


@dataclass
class TrainerState:
    """Everything a GRPO run needs to continue exactly where it stopped (see
    :data:`CHECKPOINT_KEYS`)."""

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


#: What a checkpoint must contain to resume the same optimisation, and why (the reasons
#: are English, marked with N_: show them with tr)
CHECKPOINT_KEYS = {
    "policy": N_("the actor's weights"),
    "optimizer": N_(
        "Adam's moments and step count: without them the next step has a different "
        "size and direction"
    ),
    "scheduler": N_(
        "the learning-rate schedule's position: without it warm-up restarts"
    ),
    "reference_version": N_(
        "which reference the KL term anchors to: re-initialising it from the loaded "
        "actor silently moves the anchor"
    ),
    "rollout_generation": N_(
        "temperature, maximum length, group size, sampler state: they define pi_old's "
        "data"
    ),
    "reward_version": N_(
        "which reward model or verifier scored the rollouts: a new one changes the "
        "objective"
    ),
    "data_cursor": N_(
        "where the prompt stream stopped: without it the run revisits the first prompts"
    ),
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
    """A fresh toy run: zero logits (uniform policy), reference = initial policy, a
    shuffled prompt stream."""
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
            f"prompts_per_step must be <= n_prompts ({n_prompts}), got "
            f"{prompts_per_step}"
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
    """One rollout and ``num_iterations`` optimisation epochs on it (steps 1-7); mutates
    ``state``; returns the list of monitoring dicts (one per epoch).

    Prompts come from the data stream at ``state.data_cursor``. The old log-probs are
    computed once, at sampling, and checked unchanged after every epoch; the reference
    log-probs are computed once per rollout (or read from ``ref_cache``, a dict keyed by
    ``(reference_version, policy_version)``).
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
                "old log-probs changed during the update: they must stay the "
                "rollout's values"
            )
        log = monitor(rollout, stats, rpf, out, reward_names=names, epoch=epoch)
        log["loss"], log["learning_rate"] = out.loss, lr
        logs.append(log)
    state.policy_version += 1
    state.rng_state = copy.deepcopy(rng.bit_generator.state)
    return logs


def checkpoint(state: TrainerState):
    """A complete checkpoint as a plain dict of copies (keys: :data:`CHECKPOINT_KEYS`,
    plus the tracker)."""
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

    ``strict=True`` raises ``ValueError`` naming what is missing. ``strict=False`` fills
    each missing part the way a weights-only resume does in practice: a fresh optimizer,
    scheduler at 0, the reference re-initialised from the loaded policy, the default
    generation settings with a new sampler seed, the data stream from its start.
    """
    missing = missing_checkpoint_keys(ckpt)
    strict = v.boolean(strict, "strict")
    if missing and strict:
        zh = language() == "zh"
        parts = [
            f"{k}（{tr(CHECKPOINT_KEYS[k])}）" if zh else f"{k} ({CHECKPOINT_KEYS[k]})"
            for k in missing
        ]
        raise ValueError(
            tr(
                "checkpoint cannot resume the same run; missing: {parts}",
                parts=("；" if zh else "; ").join(parts),
            )
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


# --------------------------------------------------------------------------------------
# The diagram of section 5.1
# --------------------------------------------------------------------------------------

FLOW_STEPS = (
    (
        N_("1. pick prompts"),
        N_("pass-rate table\n(uniform or frontier)"),
        N_("prompt ids"),
    ),
    (
        N_("2. sample"),
        N_("frozen snapshot pi_old,\nG per prompt"),
        N_("token ids, masks,\nold (+ engine) log-probs"),
    ),
    (
        N_("3. score"),
        N_("verifiers / reward models"),
        N_("rewards (N, K),\nNaN = unscorable"),
    ),
    (
        N_("4. group statistics"),
        N_("complete groups,\nafter the gather"),
        N_("advantages (N,)"),
    ),
    (
        N_("5. log-probs"),
        N_("current pi_theta (grad)\nreference pi_ref (cached)"),
        N_("new, ref log-probs"),
    ),
    (
        N_("6. per-token loss"),
        N_("ratio, clip, KL, masks,\nloss_type normaliser"),
        N_("loss, d loss / d new"),
    ),
    (
        N_("7. update + monitor"),
        N_("optimizer step, log dict"),
        N_("new weights, metrics"),
    ),
)


def plot_data_flow(ax=None):
    """Draw the seven steps (:data:`FLOW_STEPS`) as boxes with the data each hands on;
    returns the axes.

    Orange marks the only quantity that carries a gradient (the current log-probs); grey
    arrows carry constants. The dashed loops are "another epoch on the same rollout" (6
    -> 5) and "resample" (7 -> 1).
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    use_cjk_matplotlib_font()
    # the CJK font has no bold face of its own: matplotlib would warn and fall back
    bold = "bold" if language() == "en" else "normal"
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
            tr(title),
            ha="center",
            va="center",
            fontsize=10.5,
            weight=bold,
            color="#14213d",
        )
        ax.text(
            x,
            y - 0.1,
            tr(what),
            ha="center",
            va="center",
            fontsize=8.3,
            color="#33415c",
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
            tr(text),
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
    label(0.42, 0.62, N_("resample:\nnew rollout"))
    arrow((1.5, 0.45 - h / 2), (3.5, 0.45 - h / 2), ls="--", rad=0.28)
    label(2.5, -0.27, N_("next epoch on the same rollout (finite num_iterations)"))
    ax.text(
        0.0,
        -0.55,
        tr(
            "grey: constants for backprop (rewards, statistics, old/ref log-probs)   "
            "orange: carries the gradient"
        ),
        fontsize=8.5,
        color="#33415c",
    )
    if language() == "zh":
        check_glyphs(ax.figure)
    return ax
