"""Explorable: the group bandit. GRPO on four actions with no critic: the probability of
each action over training, one panel per knob (G, beta, lr, eps, seed) in the static
figure, every knob at once live.

:data:`BANDIT` is the static spec and :data:`BANDIT_LIVE` the live one (data:
:func:`dpo_grpo.interactive.explorables.bandit_data`), ``bandit_figure()`` the
kernel-free figure and ``bandit_widget()`` the live version.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from ..i18n import N_, tr
from ..reference.bandit import DEFAULT_REWARDS
from .explorable import (
    GREEN,
    GREY,
    TEMPLATE,
    Explorable,
    book_subplots,
    on_subplot,
    round_sig,
    subplot_axis_names,
)
from .explorables import bandit_data

if TYPE_CHECKING:
    from .widgets import ExplorableWidget

#: The line colour of each of the four actions.
ACTION_COLORS = ("#8c564b", "#17becf", GREEN, GREY)


BANDIT_PARAMS = ("group_size", "beta", "lr", "epsilon", "seed")
BANDIT_LABELS = {
    "group_size": "G",
    "beta": "β",
    "lr": "lr",
    "epsilon": N_("clip radius ε"),
    "seed": N_("seed"),
}
BANDIT_DEFAULTS = {
    "group_size": 32,
    "beta": 0.02,
    "lr": 0.18,
    "epsilon": 0.2,
    "seed": 7,
    "steps": 80,
}


def _action_name(a):
    return tr("a{i} (reward {r:g})", i=a, r=DEFAULT_REWARDS[a])


_BANDIT_PANELS = ((1, 1), (1, 2), (1, 3), (2, 1), (2, 2))


@lru_cache(maxsize=512)
def _bandit_cached(items):
    return bandit_data(**dict(items))


def _bandit_run(**params):
    """:func:`bandit_data`, memoised (runs are seeded, so equal parameters give equal
    trajectories)."""
    return _bandit_cached(tuple(sorted(params.items())))


def _bandit_panel_data(p):
    # Panel k varies parameter k alone; the others stay at the defaults (so each slider
    # owns one panel).
    return {k: _bandit_run(**{**BANDIT_DEFAULTS, k: p[k]}) for k in BANDIT_PARAMS}


def _bandit_lines(d, on, showlegend):
    return [
        {
            "type": "scatter",
            "mode": "lines",
            "x": d["step"].tolist(),
            "y": round_sig(d["probs"][:, a]),
            "name": _action_name(a),
            "legendgroup": f"a{a}",
            "showlegend": showlegend,
            "line": {"color": ACTION_COLORS[a], "width": 3 if a == d["best"] else 1.8},
            "hovertemplate": tr("step %{x}: %{y:.4f}<extra>")
            + _action_name(a)
            + "</extra>",
            **on,
        }
        for a in range(d["probs"].shape[1])
    ]


def _bandit_traces(panels):
    t = []
    for k, (name, (row, col)) in enumerate(zip(BANDIT_PARAMS, _BANDIT_PANELS)):
        t.extend(
            _bandit_lines(panels[name], on_subplot(row, col, 3), showlegend=k == 0)
        )
    return t


def _bandit_layout():
    titles = [tr("vary {knob}", knob=tr(BANDIT_LABELS[k])) for k in BANDIT_PARAMS]
    fig = book_subplots(
        2,
        3,
        titles + [""],
        height=820,
        vertical_spacing=0.3,
        horizontal_spacing=0.07,
        shared_yaxes=True,
    )
    fig.update_yaxes(range=[0, 1], title_text=tr("probability"), col=1)
    fig.update_yaxes(range=[0, 1])
    fig.update_xaxes(title_text=tr("step"))
    fig.update_xaxes(visible=False, row=2, col=3)
    fig.update_yaxes(visible=False, row=2, col=3)
    fig.update_layout(
        legend={
            "x": 0.72,
            "y": 0.28,
            "xanchor": "left",
            "yanchor": "top",
            "font": {"size": 12},
            "title": {"text": tr("action (reward)")},
        },
        margin={"t": 80, "b": 130},
        title={
            "text": tr(
                "each panel varies one knob; the others stay at G = 32, β = 0.02, lr "
                "= 0.18, ε = 0.2, seed 7"
            ),
            "font": {"size": 13},
            "x": 0,
            "xref": "paper",
            "xanchor": "left",
        },
    )
    return fig.layout.to_plotly_json()


def _bandit_slider_places(layout, params):
    places = []
    for name in params:
        k = BANDIT_PARAMS.index(name)
        row, col = _BANDIT_PANELS[k]
        xa, ya = subplot_axis_names(row, col, 3)
        xd = (
            layout[f"xaxis{xa[1:]}"]["domain"]
            if xa != "x"
            else layout["xaxis"]["domain"]
        )
        yd = (
            layout[f"yaxis{ya[1:]}"]["domain"]
            if ya != "y"
            else layout["yaxis"]["domain"]
        )
        places.append(
            {
                "x": xd[0],
                "len": xd[1] - xd[0],
                "y": yd[0],
                "pad": {"t": 50, "b": 0, "l": 0, "r": 0},
            }
        )
    return places


BANDIT = Explorable(
    name="bandit",
    title=N_("The group bandit"),
    defaults={k: BANDIT_DEFAULTS[k] for k in BANDIT_PARAMS},
    grid={
        "group_size": [2, 4, 8, 16, 32, 64],
        "beta": [0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5],
        "lr": [0.02, 0.05, 0.1, 0.18, 0.3, 0.5],
        "epsilon": [0.01, 0.02, 0.05, 0.1, 0.2, 0.3],
        "seed": list(range(10)),
    },
    labels=BANDIT_LABELS,
    data=_bandit_panel_data,
    traces=_bandit_traces,
    updates=lambda d: {},
    layout=_bandit_layout,
    slider_places=_bandit_slider_places,
)


def bandit_figure(**grid) -> go.Figure:
    """The four-action group bandit (80 steps): probability trajectories, one panel per
    knob (G, beta, lr, eps, seed), each varied alone from the chapter-4 run. 34
    precomputed runs."""
    return BANDIT.figure(**grid)


def _bandit_live_layout():
    fig = go.Figure()
    fig.update_layout(
        template=TEMPLATE,
        height=440,
        title={"text": "", "font": {"size": 13}},
        xaxis={"title": {"text": tr("step")}},
        yaxis={"title": {"text": tr("probability")}, "range": [0, 1]},
        legend={"title": {"text": tr("action (reward)")}},
        margin={"l": 60, "r": 175, "t": 50, "b": 60},
    )
    return fig.layout.to_plotly_json()


BANDIT_LIVE = Explorable(
    name="bandit_live",
    title=N_("The group bandit (live)"),
    defaults=dict(BANDIT_DEFAULTS),
    grid={},
    labels=BANDIT_LABELS,
    data=lambda p: _bandit_run(**p),
    traces=lambda d: _bandit_lines(d, {}, showlegend=True),
    updates=lambda d: {
        "title.text": tr(
            "G = {group_size}, β = {beta:g}, lr = {lr:g}, ε = {epsilon:g}, seed "
            "{seed}, {steps} steps",
            **d["params"],
        )
    },
    layout=_bandit_live_layout,
)


def bandit_widget(
    group_size=32, beta=0.02, lr=0.18, epsilon=0.2, seed=7, steps=80
) -> ExplorableWidget:
    """Live group bandit: every knob of the chapter-4 run (a change re-runs the seeded
    training; a longer ``steps`` only runs the new steps of the kept run)."""
    from .widgets import ExplorableWidget, float_slider, int_slider

    controls = {
        "group_size": int_slider(tr("group size G"), group_size, 2, 128),
        "beta": float_slider(tr("β (KL weight)"), beta, 0.0, 1.0, 0.01),
        "lr": float_slider(tr("learning rate"), lr, 0.01, 1.0, 0.01),
        "epsilon": float_slider(tr("clip radius ε"), epsilon, 0.05, 0.5, 0.01),
        "seed": int_slider(tr("seed"), seed, 0, 99),
        "steps": int_slider(tr("steps"), steps, 10, 200, 10),
    }
    return ExplorableWidget(
        BANDIT_LIVE,
        controls,
        dict,
        title=tr("The group bandit"),
        help_text=tr("GRPO on four actions, no critic"),
        columns=3,
    )
