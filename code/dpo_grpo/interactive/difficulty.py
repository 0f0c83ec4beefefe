"""Explorable: difficulty weighting. The total weight ``sum_i |A_i|`` a prompt gets in
an on-policy gradient, as a function of its pass count ``k`` of ``G``, under TRL's three
``scale_rewards`` values (Dr. GRPO's bias).

The batch holds one group for each ``k = 0 .. G`` (0/1 rewards), so
``scale_rewards="batch"`` divides by the std of that whole batch. ``difficulty_data`` is
NumPy only; ``difficulty_figure()`` (slider: G) and ``difficulty_widget()``.
"""

from __future__ import annotations

import numpy as np

from ..i18n import N_, tr
from .. import _validation as v
from ..trl_exact.advantages import reward_advantages
from .explorable import Explorable, book_subplots, on_subplot, round_sig

SCALES = ("group", "batch", "none")
COLORS = {"group": "#1f77b4", "batch": "#9467bd", "none": "#d62728"}


def difficulty_data(group_size: int = 8, eps: float = 1e-4) -> dict:
    """``weight[scale]``: ``sum |A|`` of the group with ``k`` correct answers,
    ``k = 0 .. G``; ``relative[scale]``: the same divided by its value at ``k = G // 2``
    (how much more an easy or hard prompt weighs than a half-solved one). Advantages
    from :func:`dpo_grpo.trl_exact.advantages.reward_advantages` (sample std, as
    TRL)."""
    g = v.integer(group_size, "group_size", minimum=2)
    eps = v.scalar(eps, "eps", positive=True)
    ks = np.arange(g + 1)
    rewards = np.array([[1.0] * k + [0.0] * (g - k) for k in ks]).reshape(-1, 1)
    weight, relative = {}, {}
    for scale in SCALES:
        adv = reward_advantages(
            rewards, g, scale_rewards=scale, eps=eps
        ).advantages.reshape(g + 1, g)
        w = np.abs(adv).sum(axis=1)
        weight[scale] = w
        relative[scale] = w / w[g // 2]
    return {
        "k": ks,
        "pass_rate": ks / g,
        "weight": weight,
        "relative": relative,
        "params": {"group_size": g, "eps": eps},
    }


def _traces(d):
    t = []
    for col, key in ((1, "weight"), (2, "relative")):
        for scale in SCALES:
            t.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "x": round_sig(d["pass_rate"]),
                    "y": round_sig(d[key][scale]),
                    "name": f'scale_rewards="{scale}"',
                    "legendgroup": scale,
                    "showlegend": col == 1,
                    "line": {"color": COLORS[scale]},
                    "hovertemplate": tr(
                        "{scale}<br>pass rate %{{x}}: %{{y:.4g}}<extra></extra>",
                        scale=scale,
                    ),
                    **on_subplot(1, col, 2),
                }
            )
    return t


def _layout():
    fig = book_subplots(
        1,
        2,
        [tr("prompt weight Σ|A|"), tr("relative to a half-solved prompt")],
        height=500,
        horizontal_spacing=0.1,
    )
    fig.update_xaxes(
        title_text=tr("pass rate k / G of the prompt's group"), range=[-0.03, 1.03]
    )
    fig.update_layout(margin={"r": 205})  # the legend
    return fig.layout.to_plotly_json()


DIFFICULTY = Explorable(
    name="difficulty",
    title=N_("Difficulty weighting"),
    defaults={"group_size": 8, "eps": 1e-4},
    grid={"group_size": [4, 6, 8, 12, 16, 32]},
    labels={"group_size": N_("group size G")},
    data=lambda p: difficulty_data(**p),
    traces=_traces,
    updates=lambda d: {},
    layout=_layout,
)


def difficulty_figure(**grid):
    """Kernel-free figure: prompt weight vs pass rate under scale_rewards
    group/batch/none; slider: G."""
    return DIFFICULTY.figure(**grid)


def difficulty_widget(group_size=8, eps=1e-4):
    """Live version: G and the std guard eps."""
    from .widgets import ExplorableWidget, int_slider, log_slider

    controls = {
        "group_size": int_slider(tr("group size G"), group_size, 2, 64),
        "eps": log_slider(tr("std guard ϵ"), eps, -8, 0),
    }
    return ExplorableWidget(
        DIFFICULTY,
        controls,
        dict,
        title=tr("Difficulty weighting"),
        help_text=tr("which prompts the std division up-weights"),
    )
