"""Explorable: reusing a generation batch. Clip fraction and ratio spread per optimizer
step as TRL's ``num_iterations`` (passes over a generation batch) and
``steps_per_generation`` (optimizer steps that split one generation batch) grow, on the
four-action bandit of chapter 4.

Each rollout samples ``steps_per_generation`` groups of ``group_size`` answers from the
current policy (the old policy of the rollout); every group is one optimizer step
(``gradient_accumulation_steps=1``), and the whole generation batch is passed over
``num_iterations`` times. Only the first step of a rollout is on-policy. Top row:
``num_iterations`` varies (``steps_per_generation=1``); bottom row:
``steps_per_generation`` varies (``num_iterations=1``). ``clip_reuse_figure()`` and
``clip_reuse_widget()``.
"""

from __future__ import annotations

import numpy as np

from ..i18n import N_, tr
from .. import _validation as v
from ..reference.advantages import group_advantages
from ..reference.bandit import DEFAULT_REWARDS
from ..reference.softmax import log_softmax
from ..trl_exact.grpo import grpo_loss
from .explorable import Explorable, book_subplots, on_subplot, round_sig

DEFAULTS = {
    "num_iterations": 1,
    "steps_per_generation": 1,
    "rollouts": 12,
    "group_size": 8,
    "lr": 0.5,
    "epsilon": 0.2,
    "seed": 0,
}


def reuse_run(
    num_iterations: int = 1,
    steps_per_generation: int = 1,
    *,
    rollouts: int = 12,
    group_size: int = 8,
    lr: float = 0.5,
    epsilon: float = 0.2,
    seed: int = 0,
) -> dict:
    """Per optimizer step: ``clip`` (TRL's ``clip_ratio/region_mean``), ``spread`` (std
    of the sampled tokens' log-ratio ``log pi - log pi_old``), ``max_ratio`` and
    ``on_policy`` (True for a rollout's first step)."""
    mu = v.integer(num_iterations, "num_iterations", minimum=1)
    spg = v.integer(steps_per_generation, "steps_per_generation", minimum=1)
    rollouts = v.integer(rollouts, "rollouts", minimum=1)
    g = v.integer(group_size, "group_size", minimum=2)
    lr = v.scalar(lr, "lr", positive=True)
    eps = v.scalar(epsilon, "epsilon", positive=True)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    r = np.asarray(DEFAULT_REWARDS, dtype=float)
    z = np.zeros(r.size)
    clip, spread, max_ratio, on_policy = [], [], [], []
    for _ in range(rollouts):
        old = log_softmax(z)
        groups = [rng.choice(r.size, size=g, p=np.exp(old)) for _ in range(spg)]
        advs = [group_advantages(r[a][None, :])[0] for a in groups]
        first = True
        for _ in range(mu):
            for acts, adv in zip(groups, advs):
                lp = log_softmax(z)
                out = grpo_loss(
                    lp[acts, None],
                    old[acts, None],
                    None,
                    adv,
                    np.ones((g, 1)),
                    beta=0.0,
                    epsilon=eps,
                )
                log_ratio = lp[acts] - old[acts]
                clip.append(out.metrics["clip_ratio/region_mean"])
                spread.append(float(log_ratio.std()))
                max_ratio.append(float(np.exp(log_ratio).max()))
                on_policy.append(first)
                first = False
                z = z - lr * (out.grad[:, 0] @ (np.eye(r.size)[acts] - np.exp(lp)))
    return {
        "clip": np.array(clip),
        "spread": np.array(spread),
        "max_ratio": np.array(max_ratio),
        "on_policy": np.array(on_policy),
        "params": {
            "num_iterations": mu,
            "steps_per_generation": spg,
            "rollouts": rollouts,
            "group_size": g,
            "lr": lr,
            "epsilon": eps,
        },
    }


def clip_reuse_data(
    num_iterations: int = 1,
    steps_per_generation: int = 1,
    rollouts: int = 12,
    group_size: int = 8,
    lr: float = 0.5,
    epsilon: float = 0.2,
    seed: int = 0,
) -> dict:
    """``by_iterations``: :func:`reuse_run` with ``num_iterations``
    (``steps_per_generation=1``); ``by_steps``: with ``steps_per_generation``
    (``num_iterations=1``)."""
    kw = dict(
        rollouts=rollouts, group_size=group_size, lr=lr, epsilon=epsilon, seed=seed
    )
    return {
        "by_iterations": reuse_run(num_iterations, 1, **kw),
        "by_steps": reuse_run(1, steps_per_generation, **kw),
        "params": {
            "num_iterations": num_iterations,
            "steps_per_generation": steps_per_generation,
            **kw,
        },
    }


def _traces(d):
    t = []
    for row, key in ((1, "by_iterations"), (2, "by_steps")):
        run = d[key]
        x = list(range(1, len(run["clip"]) + 1))
        for col, series, name, color in (
            (1, "clip", "clip_ratio/region_mean", "#d62728"),
            (2, "spread", tr("std of log-ratio"), "#1f77b4"),
        ):
            t.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "x": x,
                    "y": round_sig(run[series]),
                    "name": name,
                    "legendgroup": series,
                    "showlegend": row == 1,
                    "line": {"color": color, "width": 1.5},
                    "marker": {"size": 4},
                    "hovertemplate": tr(
                        "{name}<br>step %{{x}}: %{{y:.4g}}<extra></extra>", name=name
                    ),
                    **on_subplot(row, col, 2),
                }
            )
    return t


def _layout():
    fig = book_subplots(
        2,
        2,
        [
            tr("clip fraction, vary num_iterations"),
            tr("ratio spread, vary num_iterations"),
            tr("clip fraction, vary steps_per_generation"),
            tr("ratio spread, vary steps_per_generation"),
        ],
        height=820,
        vertical_spacing=0.34,
        horizontal_spacing=0.1,
    )
    fig.update_xaxes(title_text=tr("optimizer step"))
    fig.update_yaxes(range=[0, 1], col=1)
    fig.update_layout(margin={"t": 80, "b": 130, "r": 200})  # r: the legend
    return fig.layout.to_plotly_json()


def _places(layout, params):
    rows = {"num_iterations": "yaxis", "steps_per_generation": "yaxis3"}
    return [
        {
            "x": 0.0,
            "len": 1.0,
            "y": layout[rows[p]]["domain"][0],
            "pad": {"t": 50, "b": 0, "l": 0, "r": 0},
        }
        for p in params
    ]


CLIP_REUSE = Explorable(
    name="clip_reuse",
    title=N_("Reusing a generation batch"),
    defaults=dict(DEFAULTS),
    grid={"num_iterations": [1, 2, 3, 4, 6, 8], "steps_per_generation": [1, 2, 4, 8]},
    labels={
        "num_iterations": "num_iterations",
        "steps_per_generation": "steps_per_generation",
    },
    data=lambda p: clip_reuse_data(**p),
    traces=_traces,
    updates=lambda d: {},
    layout=_layout,
    slider_places=_places,
)


def clip_reuse_figure(**grid):
    """Kernel-free figure: clip fraction and ratio spread per optimizer step; sliders
    num_iterations (top row) and steps_per_generation (bottom row)."""
    return CLIP_REUSE.figure(**grid)


def clip_reuse_widget(
    num_iterations=1,
    steps_per_generation=1,
    rollouts=12,
    group_size=8,
    lr=0.5,
    epsilon=0.2,
    seed=0,
):
    """Live version: both reuse knobs plus the learning rate, clip epsilon, group size,
    rollouts and seed."""
    from .widgets import ExplorableWidget, float_slider, int_slider

    controls = {
        "num_iterations": int_slider("num_iterations", num_iterations, 1, 16),
        "steps_per_generation": int_slider(
            "steps_per_generation", steps_per_generation, 1, 16
        ),
        "lr": float_slider(tr("learning rate"), lr, 0.01, 2.0, 0.01),
        "epsilon": float_slider(tr("clip ε"), epsilon, 0.05, 0.5, 0.01),
        "group_size": int_slider(tr("group size G"), group_size, 2, 64),
        "rollouts": int_slider(tr("rollouts"), rollouts, 1, 40),
        "seed": int_slider(tr("seed"), seed, 0, 99),
    }
    return ExplorableWidget(
        CLIP_REUSE,
        controls,
        dict,
        title=tr("Reusing a generation batch"),
        help_text=tr("only a rollout's first step is on-policy"),
        columns=3,
    )
