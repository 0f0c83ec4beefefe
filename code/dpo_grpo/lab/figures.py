"""The lab page's figures (matplotlib), drawn from what the runs logged.

Each function takes histories (:class:`~dpo_grpo.lab.LabHistory`) or the sweep's
results, draws one figure and returns it; the page calls ``plt.show()``. Every visible
word goes through :func:`~dpo_grpo.i18n.tr`, so the Chinese edition
(``DPO_GRPO_LANG=zh``) draws the same figure with Chinese titles, axis titles and
legends, in a CJK font. Method names stay as they are (GRPO, DPO + NLL, ...), but for
the words among them ("online RFT": 在线 RFT).
"""

from __future__ import annotations

import numpy as np

from .. import _validation as v
from ..i18n import N_, check_glyphs, language, tr, use_cjk_matplotlib_font

__all__ = [
    "METHOD_COLORS",
    "compute_axis",
    "critic_by_position",
    "learning_curves",
    "pair_margins",
    "reward_hacking_figure",
    "seed_results",
    "training_dashboard",
]

#: one colour per method, the same in every figure of the page
METHOD_COLORS = {
    "GRPO": "C0",
    "PPO": "C5",
    "DPO + NLL": "C1",
    "DPO": "C2",
    "RFT": "C4",
    "online RFT": "C3",
    "RLOO": "C6",
}
#: the metrics :func:`seed_results` draws, with their panel titles
SEED_METRICS = {
    "final_greedy": N_("final greedy (dots: seeds; square: mean, 95% t)"),
    "final_sampled": N_("final sampled (dots: seeds; square: mean, 95% t)"),
}
#: the four single-curve panels of :func:`training_dashboard`: history field, title
DASHBOARD_PANELS = (
    ("clip_ratio_region", N_("clip ratio (fraction of tokens clipped)")),
    ("kl", N_(r"KL to the reference ($k_3$, token mean)")),
    ("completion_length", N_("completion length (tokens, EOS included)")),
    ("grad_norm", N_("gradient norm (before clipping)")),
)


def _subplots(*args, **kwargs):
    import matplotlib.pyplot as plt

    use_cjk_matplotlib_font()
    return plt.subplots(*args, **kwargs)


def _laid_out(fig):
    """``fig`` after ``tight_layout``; in Chinese also drawn once, to fail on a
    character the fonts have no glyph for (:func:`~dpo_grpo.i18n.check_glyphs`)."""
    fig.tight_layout()
    return check_glyphs(fig) if language() == "zh" else fig


def _histories(runs, name: str = "runs") -> dict:
    if not isinstance(runs, dict) or not runs:
        raise TypeError(f"{name} must be a non-empty dict of method name -> history")
    unknown = [k for k in runs if k not in METHOD_COLORS]
    if unknown:
        raise ValueError(
            f"{name} has methods without a colour: {unknown}; known: "
            f"{list(METHOD_COLORS)}"
        )
    return runs


def learning_curves(runs: dict, *, temperature: float, seed: int):
    """Held-out pass rate against optimiser steps after SFT, one curve per method:
    greedy (left) and sampled pass@1 at ``temperature`` (right).

    ``runs``: method name (a key of :data:`METHOD_COLORS`) -> its
    :class:`~dpo_grpo.lab.LabHistory`; ``seed`` names the runs' seed in the title.
    Returns the figure (two axes, shared y)."""
    runs = _histories(runs)
    v.scalar(temperature, "temperature", positive=True)
    fig, axes = _subplots(1, 2, figsize=(11, 3.8), sharey=True)
    for name, h in runs.items():
        for ax, curve in zip(
            axes, (h.heldout_pass_rate, h.heldout_pass_rate_sampled), strict=True
        ):
            ax.plot(
                h.eval_optimizer_steps,
                curve,
                "o-",
                ms=3,
                color=METHOD_COLORS[name],
                label=tr(name),
            )
    axes[0].set(
        xlabel=tr("optimiser steps after SFT"),
        ylabel=tr("held-out pass rate"),
        title=tr("greedy"),
    )
    axes[1].set(
        xlabel=tr("optimiser steps after SFT"),
        title=tr("sampled pass@1 (T = {t})", t=temperature),
    )
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(
        tr(
            "Seed {seed}: four methods from the same SFT start, matched budgets",
            seed=seed,
        )
    )
    return _laid_out(fig)


def pair_margins(runs: dict, names=("DPO + NLL", "DPO")):
    """The DPO runs' implicit rewards: the margin over all training pairs at each
    evaluation (left) and the batch means of the chosen and rejected implicit rewards
    at each step (right).

    ``runs``: method name -> :class:`~dpo_grpo.lab.LabHistory`, holding the offline
    runs ``names``. Returns the figure (two axes)."""
    runs = _histories(runs)
    missing = [n for n in names if n not in runs]
    if missing:
        raise ValueError(f"runs has no {missing} (names: {list(names)})")
    fig, axes = _subplots(1, 2, figsize=(11, 3.4))
    for name in names:
        h, color = runs[name], METHOD_COLORS[name]
        axes[0].plot(
            h.eval_step[1:], h.eval_pair_margin, "o-", ms=3, color=color, label=name
        )
        axes[1].plot(
            h.step,
            h.rewards_chosen,
            color=color,
            label=tr("{name}: chosen", name=name),
        )
        axes[1].plot(
            h.step,
            h.rewards_rejected,
            color=color,
            ls="--",
            label=tr("{name}: rejected", name=name),
        )
    axes[0].set(
        xlabel=tr("DPO step"),
        ylabel=tr("implicit reward margin"),
        title=tr("margin over all training pairs"),
    )
    axes[1].set(
        xlabel=tr("DPO step"),
        ylabel=r"$\beta(\log\pi-\log\pi_{ref})$",
        title=tr("implicit rewards (batch means)"),
    )
    for ax in axes:
        ax.axhline(0, color="grey", lw=0.8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _laid_out(fig)


def seed_results(results: dict, methods: dict):
    """The sweep's final pass rates, greedy (left) and sampled (right): one dot per
    seed, the mean with its 95% t-interval beside it, and the SFT start's mean.

    ``results``: the sweep's results (:func:`dpo_grpo.lab.sweep.load`); ``methods``:
    the name shown -> the algorithm's key in ``results`` (``{"GRPO": "grpo", ...}``).
    Returns the figure (two axes, shared y)."""
    from .sweep import summarise

    if not isinstance(methods, dict) or not methods:
        raise TypeError("methods must be a non-empty dict of name -> algorithm")
    _histories(methods, "methods")
    summary = summarise(results)
    fig, axes = _subplots(1, 2, figsize=(11, 3.4), sharey=True)
    for ax, (metric, title) in zip(axes, SEED_METRICS.items(), strict=True):
        for j, (name, algorithm) in enumerate(methods.items()):
            vals = [r[metric] for r in results["runs"][algorithm]]
            ax.plot([j] * len(vals), vals, "o", color=METHOD_COLORS[name], alpha=0.6)
            ci = summary[algorithm][metric]
            ax.errorbar(
                j + 0.15,
                ci["mean"],
                yerr=[[ci["mean"] - ci["ci_low"]], [ci["ci_high"] - ci["mean"]]],
                fmt="s",
                color="k",
                capsize=3,
            )
        ax.axhline(
            summary["start"][metric.replace("final", "start")]["mean"],
            color="grey",
            ls=":",
            label=tr("SFT start (mean)"),
        )
        ax.set(
            xticks=range(len(methods)),
            xticklabels=[tr(name) for name in methods],
            title=tr(title),
        )
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    return _laid_out(fig)


def critic_by_position(explained_variance, by_position: dict):
    """PPO's critic: the explained variance of the returns at each PPO step, one thin
    line per seed and their mean (left), and the critic's mean value at each
    completion token for right and wrong completions, against their realised returns
    1 and 0 (right).

    ``explained_variance``: an array (seeds, steps); ``by_position``: token index
    (from 0) -> ``{"right": value, "wrong": value, ...}`` (the page's critic cell
    computes it). Returns the figure (two axes)."""
    ev = np.asarray(explained_variance, dtype=float)
    if ev.ndim != 2 or ev.size == 0:
        raise ValueError(
            f"explained_variance must be a non-empty (seeds, steps) array, got shape "
            f"{ev.shape}"
        )
    if not isinstance(by_position, dict) or not by_position:
        raise ValueError("by_position must be a non-empty dict of token -> values")
    fig, axes = _subplots(1, 2, figsize=(11, 3.4))
    steps = np.arange(1, ev.shape[1] + 1)
    axes[0].plot(steps, ev.T, color="C5", alpha=0.25)
    axes[0].plot(steps, ev.mean(0), color="k", label=tr("mean of {n} seeds", n=len(ev)))
    axes[0].set(xlabel=tr("PPO step"), title=tr("explained variance of the returns"))
    axes[0].legend(fontsize=8)
    pos = [t + 1 for t in by_position]
    rows = list(by_position.values())
    axes[1].plot(pos, [r["right"] for r in rows], "o-", label=tr("right"))
    axes[1].plot(pos, [r["wrong"] for r in rows], "o-", label=tr("wrong"))
    axes[1].axhline(1, color="C0", ls=":")
    axes[1].axhline(0, color="C1", ls=":")
    axes[1].set(
        xlabel=tr("completion token"),
        xticks=pos,
        title=tr("critic's value by position (dotted: realised return)"),
    )
    axes[1].legend(fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    return _laid_out(fig)


def training_dashboard(history):
    """GRPO's monitors, six panels against the GRPO step: training reward and held-out
    pass rate; the fractions of groups with zero reward std, all correct and all wrong;
    the clip ratio; the KL to the reference; the completion length; the gradient norm.

    ``history``: a GRPO run's :class:`~dpo_grpo.lab.LabHistory`. Returns the figure
    (2 x 3 axes)."""
    h = history
    if not h.step or not h.frac_reward_zero_std:
        raise ValueError("history must be a GRPO run's history with logged steps")
    fig, axes = _subplots(2, 3, figsize=(12, 6))
    axes[0, 0].plot(
        h.step, h.reward_mean, color="C0", label=tr("training reward (mean)")
    )
    axes[0, 0].plot(
        h.eval_step,
        h.heldout_pass_rate,
        "o--",
        ms=3,
        color="C3",
        label=tr("held-out pass rate"),
    )
    axes[0, 0].set(title=tr("reward and held-out pass rate"))
    axes[0, 0].legend(fontsize=8)
    axes[0, 1].plot(
        h.step, h.frac_reward_zero_std, color="C0", label=tr("zero reward std")
    )
    axes[0, 1].plot(
        h.step,
        h.frac_groups_all_correct,
        color="C2",
        ls="--",
        label=tr("all G correct"),
    )
    axes[0, 1].plot(
        h.step, h.frac_groups_all_wrong, color="C3", ls=":", label=tr("all G wrong")
    )
    axes[0, 1].set(title=tr("fraction of groups"))
    axes[0, 1].legend(fontsize=8)
    for ax, (field, title) in zip(axes.flat[2:], DASHBOARD_PANELS, strict=True):
        ax.plot(h.step, getattr(h, field), color="C0")
        ax.set(title=tr(title))
    for ax in axes.flat:
        ax.set(xlabel=tr("GRPO step"))
        ax.grid(alpha=0.3)
    return _laid_out(fig)


def reward_hacking_figure(history, max_completion_length: int):
    """A GRPO run under a hackable reward (correct + a bonus per character), three
    panels against the GRPO step: the training reward; the held-out and training pass
    rates (what we wanted); the mean completion length and the fraction of truncated
    completions, scaled by ``max_completion_length`` to share the axis.

    ``history``: the run's :class:`~dpo_grpo.lab.LabHistory`;
    ``max_completion_length``: its config's. Returns the figure (three axes)."""
    h = history
    length = v.integer(max_completion_length, "max_completion_length", minimum=1)
    if not h.step:
        raise ValueError("history must be a GRPO run's history with logged steps")
    fig, axes = _subplots(1, 3, figsize=(12, 3.4))
    axes[0].plot(h.step, h.reward_mean, color="C3")
    axes[0].set(title=tr("training reward (correct + bonus x characters)"))
    axes[1].plot(
        h.eval_step,
        h.heldout_pass_rate,
        "o-",
        ms=3,
        color="C0",
        label=tr("held-out pass rate"),
    )
    axes[1].plot(
        h.step,
        h.train_pass_rate,
        color="C1",
        alpha=0.7,
        label=tr("training pass rate (sampled)"),
    )
    axes[1].set(title=tr("what we wanted: correct answers"))
    axes[1].legend(fontsize=8)
    axes[2].plot(
        h.step, h.completion_length, color="C2", label=tr("mean length (tokens)")
    )
    axes[2].plot(
        h.step,
        np.array(h.frac_truncated) * length,
        color="C2",
        ls="--",
        label=tr("fraction truncated x {n}", n=length),
    )
    axes[2].set(title=tr("completion length"))
    axes[2].legend(fontsize=8)
    for ax in axes:
        ax.set(xlabel=tr("GRPO step"))
        ax.grid(alpha=0.3)
    return _laid_out(fig)


def compute_axis(results: dict, methods: dict, *, target: float | None = None):
    """Sampled pass@1 on the held-out prompts (mean over seeds at each evaluation)
    against two budget axes: completions sampled (left) and completion-token passes,
    forward + backward (right; the seeds' mean at each evaluation). The axes are
    labelled with the fields the runs record. ``target``: a horizontal line (the
    pass rate a method must reach). Returns the figure (two axes, shared y)."""
    from .ablation import AXES

    if not isinstance(methods, dict) or not methods:
        raise TypeError("methods must be a non-empty dict of name -> algorithm")
    _histories(methods, "methods")
    fig, axes = _subplots(1, 2, figsize=(11, 3.6), sharey=True)
    for ax, (axis, fields) in zip(axes, AXES.items(), strict=True):
        for name, algorithm in methods.items():
            rows = results["runs"][algorithm]
            x = np.mean([np.sum([r[f] for f in fields], axis=0) for r in rows], axis=0)
            y = np.mean([r["heldout_pass_rate_sampled"] for r in rows], axis=0)
            ax.plot(x, y, "o-", ms=3, color=METHOD_COLORS[name], label=tr(name))
        if target is not None:
            ax.axhline(target, color="grey", ls=":")
        ax.set(xlabel=" + ".join(fields).replace("eval_", ""))
        ax.grid(alpha=0.3)
    axes[0].set(ylabel=tr("held-out pass rate"))
    axes[0].legend(fontsize=8)
    fig.suptitle(tr("sampled pass@1 (T = {t})", t=results["config"]["temperature"]))
    return _laid_out(fig)
