"""Explorable: group advantages. The advantages of one group of rewards under an affine
map r -> a r + b: invariant for a > 0 until a times the group's std nears the eps of the
denominator.

:data:`GROUP_ADVANTAGE` is the spec (data:
:func:`dpo_grpo.interactive.explorables.group_advantage_data`),
``group_advantage_figure()`` the kernel-free figure and ``group_advantage_widget()`` the
live version.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from ..i18n import N_, tr
from ..reference import examples as ex
from .explorable import (
    BLUE,
    GREY,
    ORANGE,
    PURPLE,
    Explorable,
    book_subplots,
    format_value,
    on_subplot,
    round_sig,
)
from .explorables import group_advantage_data

if TYPE_CHECKING:
    from .widgets import ExplorableWidget


#: The static figure's path through affine maps r -> a r + b: shifts, scales, scales
#: small enough for eps to bite, a sign flip.
TRANSFORMS = (
    (1.0, 0.0),
    (1.0, 10.0),
    (1.0, -100.0),
    (10.0, 0.0),
    (0.1, 0.0),
    (0.01, 0.0),
    (1e-3, 0.0),
    (1e-4, 0.0),
    (1e-5, 0.0),
    (1e-6, 0.0),
    (-1.0, 0.0),
    (2.0, -3.0),
)


def _transform_label(ab):
    a, b = ab
    scale = "" if a == 1 else ("−" if a == -1 else f"{format_value(a)} ")
    shift = (
        ""
        if b == 0
        else (f" + {format_value(b)}" if b > 0 else f" − {format_value(-b)}")
    )
    return f"{scale}r{shift}"


def _adv_data(p):
    a, b = p["transform"]
    return group_advantage_data(rewards=p["rewards"], scale=a, shift=b, eps=p["eps"])


def _adv_traces(d):
    g = d["rewards"].size
    x = list(range(1, g + 1))
    a_on, b_on, c_on = on_subplot(1, 1, 2), on_subplot(1, 2, 2), on_subplot(2, 1, 2)
    t = [
        {
            "type": "bar",
            "x": x,
            "y": round_sig(d["transformed"], 6),
            "name": tr("rewards a·r + b"),
            "marker": {"color": GREY},
            "hovertemplate": tr("answer %{x}: %{y:.6g}<extra></extra>"),
            **a_on,
        },  # 0
        {
            "type": "scatter",
            "mode": "lines",
            "x": [0.5, g + 0.5],
            "y": round_sig([d["mean"]] * 2, 6),
            "name": tr("group mean (the baseline)"),
            "line": {"color": "black", "dash": "dash"},
            "hovertemplate": tr("mean %{y:.6g}<extra></extra>"),
            **a_on,
        },  # 1
        {
            "type": "bar",
            "x": x,
            "y": round_sig(d["advantages_ddof0"]),
            "name": tr("advantage, ddof 0 (population std)"),
            "marker": {"color": BLUE},
            "hovertemplate": tr("answer %{x}: %{y:.4f}<extra>ddof 0</extra>"),
            **b_on,
        },  # 2
        {
            "type": "bar",
            "x": x,
            "y": round_sig(d["advantages_ddof1"]),
            "name": tr("advantage, ddof 1 (sample std, TRL)"),
            "marker": {"color": ORANGE},
            "hovertemplate": tr("answer %{x}: %{y:.4f}<extra>ddof 1</extra>"),
            **b_on,
        },
    ]  # 3
    dashes = ("dot", "dash", "solid", "dashdot")
    for k, e in enumerate(d["eps_values"]):  # 4..: static
        t.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": round_sig(d["scales"]),
                "y": round_sig(d["best_advantage_vs_scale"][e]),
                "name": tr("best answer, ϵ = {eps}", eps=format_value(e)),
                "line": {"color": PURPLE, "dash": dashes[k % 4], "width": 2},
                "hovertemplate": tr("scale %{x:.2g}: %{y:.4f}<extra>ϵ = ")
                + format_value(e)
                + "</extra>",
                **c_on,
            }
        )
    a = d["params"]["scale"]
    # last
    t.append(
        {
            "type": "scatter",
            "mode": "markers",
            "x": [round_sig(max(abs(a), 1e-7))],
            "y": [round_sig(d["advantages_ddof0"][d["best_index"]])],
            "name": tr("this transform (ϵ of the bars)"),
            "marker": {"color": BLUE, "size": 12, "symbol": "diamond"},
            "hovertemplate": "|a| = %{x:.2g}: %{y:.4f}<extra></extra>",
            **c_on,
        }
    )
    return t


def _adv_updates(d):
    # the first subplot title (annotation 0) carries the group's statistics
    return {
        "annotations[0].text": tr(
            "rewards: mean {mean:.4g}, std {std0:.3g} (ddof 0), {std1:.3g} (ddof 1)",
            mean=d["mean"],
            std0=d["std_ddof0"],
            std1=d["std_ddof1"],
        )
    }


def _adv_layout():
    fig = book_subplots(
        2,
        2,
        [
            tr("rewards"),
            tr("advantages (r − mean) / (std + ϵ), ϵ = 1e-4"),
            tr("the best answer's advantage for rewards a·r, vs the scale a"),
        ],
        height=720,
        specs=[[{}, {}], [{"colspan": 2}, None]],
        vertical_spacing=0.17,
        horizontal_spacing=0.1,
    )
    fig.update_xaxes(title_text=tr("answer"), dtick=1, row=1, col=1)
    fig.update_xaxes(title_text=tr("answer"), dtick=1, row=1, col=2)
    fig.update_xaxes(
        title_text=tr("scale a (log scale): ϵ stops mattering once a·std ≫ ϵ"),
        type="log",
        row=2,
        col=1,
    )
    fig.update_yaxes(range=[-2.2, 2.2], row=1, col=2)
    fig.update_yaxes(range=[-1.8, 1.8], title_text=tr("advantage"), row=2, col=1)
    fig.update_layout(
        barmode="group",
        legend={"orientation": "h", "x": 0, "y": 1.06, "yanchor": "bottom"},
        margin={"t": 150, "b": 145, "r": 30},
    )
    return fig.layout.to_plotly_json()


GROUP_ADVANTAGE = Explorable(
    name="group_advantage",
    title=N_("Group advantages"),
    defaults={
        "transform": (1.0, 0.0),
        "rewards": tuple(float(r) for r in ex.REWARD_GROUPS[0]),
        "eps": 1e-4,
    },
    grid={"transform": list(TRANSFORMS)},
    labels={"transform": N_("rewards")},
    formats={"transform": _transform_label},
    data=_adv_data,
    traces=_adv_traces,
    updates=_adv_updates,
    layout=_adv_layout,
)


def group_advantage_figure(**grid) -> go.Figure:
    """Rewards of the article's group [0.2, 0.8, 1.4, 0.6] under affine maps and their
    advantages (ddof 0 and 1).

    The slider walks through shifts and scales (no change), scales small enough for eps
    = 1e-4 to shrink the advantages, and a sign flip; the right panel shows where eps
    breaks scale invariance for four eps values.
    """
    return GROUP_ADVANTAGE.figure(**grid)


def group_advantage_widget(
    rewards=(0.2, 0.8, 1.4, 0.6), scale=1.0, shift=0.0, eps=1e-4
) -> ExplorableWidget:
    """Live group advantages: an editable group (2 to 16 rewards), the affine map a r +
    b, and eps."""
    import ipywidgets as W

    from .widgets import (
        CONTROL_STYLE,
        ExplorableWidget,
        float_slider,
        log_slider,
        parse_numbers,
    )

    controls = {
        "rewards": W.Text(
            value=", ".join(f"{r:g}" for r in rewards),
            description=tr("rewards (2 to 16)"),
            continuous_update=False,
            style=CONTROL_STYLE,
            layout=W.Layout(width="420px"),
        ),
        "eps": log_slider(tr("std guard ϵ"), eps, -10, 0),
        "log10_scale": float_slider(
            "log₁₀ |a|", math.log10(abs(scale)) if scale else 0.0, -7.0, 2.0, 0.25
        ),
        "negate": W.Checkbox(
            value=scale < 0, description=tr("a < 0 (flip)"), style=CONTROL_STYLE
        ),
        "shift": float_slider(tr("shift b"), shift, -50.0, 50.0, 0.5, ".1f"),
    }

    def to_params(v):
        a = (-1.0 if v["negate"] else 1.0) * 10.0 ** v["log10_scale"]
        r = parse_numbers(v["rewards"], "rewards")
        if not 2 <= len(r) <= 16:
            raise ValueError(f"rewards: a group needs 2 to 16 numbers, got {len(r)}")
        return {"transform": (a, float(v["shift"])), "rewards": r, "eps": v["eps"]}

    return ExplorableWidget(
        GROUP_ADVANTAGE,
        controls,
        to_params,
        title=tr("Group advantages"),
        help_text=tr("advantages are invariant to a·r + b (a > 0) until a·std ≈ ϵ"),
    )
