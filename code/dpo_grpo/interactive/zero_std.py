"""Explorable: zero-std groups. With 0/1 rewards, how often a group of G answers has
zero reward spread (and so no signal), against the pass rate and G, and what the eps of
the advantage's denominator does to a near-tie.

:data:`ZERO_STD` is the spec (data:
:func:`dpo_grpo.interactive.explorables.zero_std_data`), ``zero_std_figure()`` the
kernel-free figure and ``zero_std_widget()`` the live version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from ..i18n import N_, tr
from .explorable import (
    BLUE,
    ORANGE,
    PURPLE,
    Explorable,
    book_subplots,
    format_value,
    on_subplot,
    round_sig,
    vline_trace,
)
from .explorables import zero_std_data

if TYPE_CHECKING:
    from .widgets import ExplorableWidget


def _zero_data(p):
    return zero_std_data(
        group_size=int(p["group_size"]),
        pass_rate=p["pass_rate"],
        eps=p["eps"],
        n_groups=p["n_groups"],
        n_prompts=p["n_prompts"],
        seed=p["seed"],
    )


def _zero_traces(d):
    g, p, eps = d["params"]["group_size"], d["params"]["pass_rate"], d["params"]["eps"]
    counts, edges = np.histogram(d["batch_pass_rates"], bins=20, range=(0.0, 1.0))
    t = []
    line = lambda x, y, name, color, on, dash=None, legend=True, hover="%{y:.4f}": {  # noqa: E731
        "type": "scatter",
        "mode": "lines",
        "x": round_sig(x),
        "y": round_sig(y),
        "name": name,
        "showlegend": legend,
        "line": {"color": color, "width": 2.5, "dash": dash or "solid"},
        "hovertemplate": f"%{{x}}<br>{hover}<extra>{name}</extra>",
        **on,
    }
    dots = lambda x, y, name, color, on, symbol="circle": {  # noqa: E731
        "type": "scatter",
        "mode": "markers",
        "x": round_sig(x),
        "y": round_sig(y),
        "name": name,
        "marker": {
            "color": color,
            "size": 7,
            "symbol": symbol,
            "line": {"width": 1, "color": "white"},
        },
        "hovertemplate": f"%{{x}}<br>%{{y:.4f}}<extra>{name}</extra>",
        **on,
    }
    a, b, c, e = (
        on_subplot(1, 1, 2),
        on_subplot(1, 2, 2),
        on_subplot(2, 1, 2),
        on_subplot(2, 2, 2),
    )
    t.append(line(d["p"], d["prob_vs_p"], tr("pᴳ + (1−p)ᴳ (exact)"), BLUE, a))  # 0: G
    # 1: G
    t.append(
        dots(
            d["mc_p"],
            d["mc_vs_p"],
            tr(
                "Monte Carlo ({n} groups, seed {seed})", n=d["n_groups"], seed=d["seed"]
            ),
            BLUE,
            a,
        )
    )
    # 2: p
    t.append(
        line(d["g"], d["prob_vs_g"], tr("one prompt: exact"), BLUE, b, legend=False)
    )
    t.append(dots(d["g"], d["mc_vs_g"], tr("one prompt: Monte Carlo"), BLUE, b))  # 3: p
    # 4: p
    t.append(
        line(
            d["g"],
            d["batch_expected_vs_g"],
            tr("batch of prompts: expected fraction"),
            ORANGE,
            b,
        )
    )
    # 5: p
    t.append(
        dots(
            d["g"],
            d["batch_simulated_vs_g"],
            tr("batch: one seeded draw"),
            ORANGE,
            b,
            "x",
        )
    )
    # 6: p
    t.append(
        {
            "type": "bar",
            "x": round_sig((edges[:-1] + edges[1:]) / 2),
            "y": counts.tolist(),
            "width": 0.048,
            "name": tr("batch pass rates ({n} prompts)", n=d["batch_pass_rates"].size),
            "marker": {"color": ORANGE},
            "hovertemplate": tr("pass rate ≈ %{x:.3f}<br>%{y} prompts<extra></extra>"),
            **c,
        }
    )
    # 7: eps
    t.append(
        line(
            d["gap"],
            d["two_sample"],
            tr("advantage of the better answer in [0, d]"),
            PURPLE,
            e,
            hover="A = %{y:.4f}",
        )
    )
    # 8: eps
    t.append(
        {
            "type": "scatter",
            "mode": "markers+text",
            "x": round_sig(d["gaps"]),
            "y": round_sig(d["two_sample_at_gaps"]),
            "text": [
                f"d = {format_value(x)}: {y:.4f}"
                for x, y in zip(d["gaps"], d["two_sample_at_gaps"])
            ],
            "textposition": ["top center", "bottom right", "top right"],
            "name": tr("the article's gaps"),
            "marker": {"color": PURPLE, "size": 9},
            "textfont": {"size": 10},
            "showlegend": False,
            "hovertemplate": "%{text}<extra></extra>",
            **e,
        }
    )
    t.append(
        vline_trace(p, 0, 1, a, name=tr("pass rate p"), hover=[f"p = {p:g}"] * 2)
    )  # 9: p
    t.append(
        vline_trace(g, 0, 1, b, name=tr("group size G"), hover=[f"G = {g}"] * 2)
    )  # 10: G
    # 11: eps
    t.append(
        {
            "type": "scatter",
            "mode": "markers",
            "x": round_sig([2 * eps]),
            "y": [0.5],
            "showlegend": False,
            "marker": {"symbol": "x", "size": 10, "color": "black"},
            "name": "d = 2ϵ",
            "hovertemplate": tr("d = 2ε: the advantage is halved<extra></extra>"),
            **e,
        }
    )
    return t


def _zero_layout():
    fig = book_subplots(
        2,
        2,
        [
            tr("all G rewards equal, vs pass rate p"),
            tr("no signal, vs group size G (at p)"),
            tr("a batch's pass rates (Beta, mean p)"),
            tr("group [0, d]: advantage d / (d + 2ϵ)"),
        ],
        height=720,
        vertical_spacing=0.16,
        horizontal_spacing=0.1,
    )
    fig.update_xaxes(title_text=tr("pass rate p"), range=[0, 1], row=1, col=1)
    fig.update_yaxes(
        title_text=tr("probability of zero std"), range=[0, 1.02], row=1, col=1
    )
    fig.update_xaxes(
        title_text=tr("group size G (log scale)"),
        type="log",
        tickvals=[2, 4, 8, 16, 32, 64],
        row=1,
        col=2,
    )
    fig.update_yaxes(
        title_text=tr("fraction with no signal"), range=[0, 1.02], row=1, col=2
    )
    fig.update_xaxes(title_text=tr("pass rate"), range=[0, 1], row=2, col=1)
    fig.update_yaxes(title_text=tr("prompts"), row=2, col=1)
    fig.update_xaxes(
        title_text=tr("reward gap d (log scale)"), type="log", row=2, col=2
    )
    fig.update_yaxes(
        title_text=tr("advantage of the better answer"), range=[0, 1.1], row=2, col=2
    )
    fig.update_layout(
        legend={"orientation": "h", "x": 0, "y": 1.08, "yanchor": "bottom"},
        margin={"t": 140},
    )
    return fig.layout.to_plotly_json()


ZERO_STD = Explorable(
    name="zero_std",
    title=N_("Zero-std groups"),
    defaults={
        "group_size": 8,
        "pass_rate": 0.8,
        "eps": 1e-4,
        "n_groups": 2000,
        "n_prompts": 256,
        "seed": 0,
    },
    grid={
        "group_size": [2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64],
        "pass_rate": [round(0.05 * k, 2) for k in range(1, 20)],
        "eps": [1e-8, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1],
    },
    labels={"group_size": "G", "pass_rate": "p", "eps": N_("std guard ϵ")},
    data=_zero_data,
    traces=_zero_traces,
    updates=lambda d: {},
    layout=_zero_layout,
)


def zero_std_figure(**grid) -> go.Figure:
    """When a group of 0/1 rewards carries no signal: ``p**G + (1-p)**G`` (exact and
    seeded Monte Carlo) against p and against G, the expected fraction of a batch with a
    spread of difficulties, and the two-sample suppression ``d / (d + 2 eps)``. Sliders:
    G, p, eps."""
    return ZERO_STD.figure(**grid)


def zero_std_widget(group_size=8, pass_rate=0.8, eps=1e-4) -> ExplorableWidget:
    """Live zero-std groups: group size G, pass rate p, and the eps of the two-sample
    example."""
    from .widgets import ExplorableWidget, float_slider, int_slider, log_slider

    controls = {
        "group_size": int_slider(tr("group size G"), group_size, 2, 64),
        "pass_rate": float_slider(tr("pass rate p"), pass_rate, 0.01, 0.99, 0.01),
        "eps": log_slider(tr("std guard ϵ"), eps, -9, 0),
    }
    return ExplorableWidget(
        ZERO_STD,
        controls,
        dict,
        title=tr("Zero-std groups"),
        help_text=tr("0/1 rewards: when does a group carry no signal?"),
        columns=3,
    )
