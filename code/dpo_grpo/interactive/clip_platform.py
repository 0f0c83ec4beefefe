"""Explorable: clip platforms. GRPO's per-token clipped objective and its gradient vs
the ratio rho, for A > 0 and A < 0, with sliders for eps_low, eps_high and the two-sided
cap delta.

:data:`CLIP` is the spec (data:
:func:`dpo_grpo.interactive.explorables.clip_platform_data`), ``clip_platform_figure()``
the kernel-free figure and ``clip_platform_widget()`` the live version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go

from ..i18n import N_, tr
from .explorable import (
    BLUE,
    GREY,
    ORANGE,
    PURPLE,
    RED,
    Explorable,
    book_subplots,
    legend_square_trace,
    on_subplot,
    rect_shape,
    round_sig,
)
from .explorables import clip_platform_data

if TYPE_CHECKING:
    from .widgets import ExplorableWidget

REGION_FILL = {
    "platform": "rgba(127,127,127,0.22)",
    "wrong_direction": "rgba(255,127,14,0.16)",
    "capped": "rgba(148,103,189,0.28)",
}
REGION_LEGEND = {
    "platform": "rgba(127,127,127,0.5)",
    "wrong_direction": "rgba(255,127,14,0.45)",
    "capped": "rgba(148,103,189,0.55)",
}
REGION_COLOR = {
    "platform": "#555555",
    "wrong_direction": ORANGE,
    "capped": PURPLE,
    "inside": "#111111",
}
REGION_TEXT = {
    "platform": N_("clip platform: gradient 0"),
    "wrong_direction": N_("wrong direction: not clipped"),
    "capped": N_("capped by δ: gradient 0"),
    "inside": N_("inside the clip interval"),
}


X_MIN, X_MAX = 0.4, 2.2
SEQ_SYMBOLS = ("circle", "square", "diamond", "triangle-up")


def _clip_data(p):
    return clip_platform_data(
        epsilon=p["epsilon"], epsilon_high=p["epsilon_high"], delta=p["delta"]
    )


def _clip_traces(d):
    rho = d["rho"]
    left, right = rho <= 1.0, rho >= 1.0
    traces = []

    def curve(x, y, row, col, color, name, legend):
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": round_sig(x),
                "y": round_sig(y),
                "name": name,
                "line": {"color": color, "width": 2.5},
                "legendgroup": name,
                "showlegend": legend,
                "hovertemplate": "ρ = %{x:.3f}<br>%{y:.3f}<extra></extra>",
                **on_subplot(row, col, 2),
            }
        )

    pos, neg = tr("A > 0 (per unit |A|)"), tr("A < 0 (per unit |A|)")
    curve(rho, d["objective_pos"], 1, 1, BLUE, pos, True)  # 0: eps_high
    curve(rho[left], d["objective_neg"][left], 1, 2, RED, neg, True)  # 1: eps_low
    curve(rho[right], d["objective_neg"][right], 1, 2, RED, neg, False)  # 2: delta
    curve(rho, d["grad_pos"], 2, 1, BLUE, pos, False)  # 3: eps_high
    curve(rho[left], d["grad_neg"][left], 2, 2, RED, neg, False)  # 4: eps_low
    curve(rho[right], d["grad_neg"][right], 2, 2, RED, neg, False)  # 5: delta
    seq = d["examples"]
    for i in range(4):  # 6-9: one slider each
        region = "capped" if seq["capped"][i] else str(seq["region"][i])
        a = float(seq["advantage"][i])
        col = 1 if a > 0 else 2
        text = tr(
            "{label}<br>ρ = {ratio:.4f}, A = {a:+.4f}<br>objective ρA clipped = "
            "{objective:+.4f}<br>d/dρ = {grad:+.4f}<br>{region}",
            label=seq["label"][i],
            ratio=seq["ratio"][i],
            a=a,
            objective=seq["objective"][i],
            grad=seq["grad"][i],
            region=tr(REGION_TEXT[region]),
        )
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": round_sig([seq["ratio"][i]]),
                "y": round_sig([seq["objective_unit"][i]]),
                "name": tr(
                    "answer {i}: ρ = {ratio:.4f}", i=i + 1, ratio=seq["ratio"][i]
                ),
                "marker": {
                    "size": 13,
                    "symbol": SEQ_SYMBOLS[i],
                    "color": REGION_COLOR[region],
                    "line": {"color": "white", "width": 1.5},
                },
                "text": [text],
                "hovertemplate": "%{text}<extra></extra>",
                "legendgroup": f"seq{i}",
                **on_subplot(1, col, 2),
            }
        )
    for key in ("platform", "wrong_direction", "capped"):  # 10-12: legend only
        traces.append(legend_square_trace(tr(REGION_TEXT[key]), REGION_LEGEND[key]))
    return traces


def _clip_updates(d):
    b = d["bounds"]
    cap = X_MAX + 0.1 if b["delta"] is None else b["delta"]
    out = {}
    for row in (
        0,
        6,
    ):
        # the same six regions in the objective row (shapes 0-5) and the gradient row
        # (6-11)
        out.update(
            {
                f"shapes[{row}].x0": b["high"],
                f"shapes[{row + 1}].x1": b["low"],
                f"shapes[{row + 2}].x0": cap,
                f"shapes[{row + 3}].x1": b["low"],
                f"shapes[{row + 4}].x0": b["high"],
                f"shapes[{row + 5}].x0": cap,
            }
        )
    return out


def _clip_layout():
    fig = book_subplots(
        2,
        2,
        [
            tr("A > 0 (a good answer): objective"),
            tr("A < 0 (a bad answer): objective"),
            tr("A > 0: gradient d/dρ"),
            tr("A < 0: gradient d/dρ"),
        ],
        height=660,
        shared_xaxes=True,
        vertical_spacing=0.12,
        horizontal_spacing=0.09,
    )
    lo, hi = X_MIN - 0.1, X_MAX + 0.1
    shapes = []
    for pos, neg in (
        (("x", "y domain"), ("x2", "y2 domain")),
        (("x3", "y3 domain"), ("x4", "y4 domain")),
    ):
        shapes += [
            rect_shape(
                pos[0], 1.2, hi, REGION_FILL["platform"], pos[1]
            ),  # +0 A>0 platform [1+eps_h, .)
            rect_shape(
                pos[0], lo, 0.8, REGION_FILL["wrong_direction"], pos[1]
            ),  # +1 A>0 wrong    [., 1-eps_l]
            rect_shape(
                pos[0], hi, hi, REGION_FILL["capped"], pos[1]
            ),  # +2 A>0 capped   [delta, .)
            rect_shape(
                neg[0], lo, 0.8, REGION_FILL["platform"], neg[1]
            ),  # +3 A<0 platform [., 1-eps_l]
            rect_shape(
                neg[0], 1.2, hi, REGION_FILL["wrong_direction"], neg[1]
            ),  # +4 A<0 wrong    [1+eps_h, .)
            rect_shape(neg[0], hi, hi, REGION_FILL["capped"], neg[1]),
        ]  # +5 A<0 capped   [delta, .)
    for xref, yref in (
        ("x", "y domain"),
        ("x2", "y2 domain"),
        ("x3", "y3 domain"),
        ("x4", "y4 domain"),
    ):
        shapes.append(
            {
                "type": "line",
                "xref": xref,
                "yref": yref,
                "x0": 1,
                "x1": 1,
                "y0": 0,
                "y1": 1,
                "line": {"color": GREY, "dash": "dot", "width": 1},
            }
        )
    # the legend takes two rows in a 700 px column
    fig.update_layout(
        shapes=shapes,
        legend={"orientation": "h", "x": 0, "y": 1.1, "yanchor": "bottom"},
        margin={"t": 140},
    )
    fig.update_xaxes(range=[X_MIN, X_MAX])
    fig.update_xaxes(title_text=tr("ratio ρ = π_θ / π_old"), row=2)
    fig.update_yaxes(
        range=[0.3, 1.5], row=1, col=1, title_text="min(ρA, clip(ρ)A) / |A|"
    )
    fig.update_yaxes(range=[-2.3, -0.5], row=1, col=2)
    fig.update_yaxes(
        range=[-0.15, 1.15], row=2, col=1, title_text=tr("d objective / dρ / |A|")
    )
    fig.update_yaxes(range=[-1.15, 0.15], row=2, col=2)
    return fig.layout.to_plotly_json()


CLIP = Explorable(
    name="clip_platform",
    title=N_("Clip platforms"),
    defaults={"epsilon": 0.2, "epsilon_high": 0.2, "delta": None},
    grid={
        "epsilon": [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4],
        "epsilon_high": [0.1, 0.15, 0.2, 0.25, 0.28, 0.3, 0.35, 0.4],
        "delta": [None, 1.5, 1.75, 2.0, 2.5],
    },
    labels={
        "epsilon": N_("clip radius ε_low"),
        "epsilon_high": N_("clip radius ε_high"),
        "delta": "δ",
    },
    data=_clip_data,
    traces=_clip_traces,
    updates=_clip_updates,
    layout=_clip_layout,
)


def clip_platform_figure(**grid) -> go.Figure:
    """GRPO's per-token objective and gradient vs the ratio, A > 0 and A < 0, with
    eps_low, eps_high, delta sliders.

    Shaded: the flat clip platforms (gradient 0), the wrong-direction regions that are
    not clipped, and the region capped by delta. Markers: the article's four answers
    (ratios 1.2840, 1.1052, 0.7788, 0.9048) at their objective per unit |A|, coloured by
    region. ``grid`` may override the slider values, e.g. ``delta=[None, 2.0]``.
    """
    return CLIP.figure(**grid)


def clip_platform_widget(epsilon=0.2, epsilon_high=0.2, delta=None) -> ExplorableWidget:
    """Live clip platforms: eps_low, eps_high and the two-sided cap delta (checkbox to
    switch it on)."""
    import ipywidgets as W

    from .widgets import CONTROL_STYLE, ExplorableWidget, float_slider

    controls = {
        "epsilon": float_slider(tr("clip radius ε_low"), epsilon, 0.01, 0.6, 0.01),
        "epsilon_high": float_slider(
            tr("clip radius ε_high"), epsilon_high, 0.0, 0.8, 0.01
        ),
        "delta_on": W.Checkbox(
            value=delta is not None, description=tr("cap with δ"), style=CONTROL_STYLE
        ),
        "delta": float_slider("δ", 2.0 if delta is None else delta, 1.05, 3.0, 0.05),
    }

    def to_params(v):
        return {
            "epsilon": v["epsilon"],
            "epsilon_high": v["epsilon_high"],
            "delta": v["delta"] if v["delta_on"] else None,
        }

    return ExplorableWidget(
        CLIP,
        controls,
        to_params,
        title=tr("Clip platforms"),
        help_text=tr("per-token objective and gradient vs the ratio ρ"),
    )
