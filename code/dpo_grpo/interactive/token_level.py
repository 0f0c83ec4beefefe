"""The token-level worked example of chapter 3 as a heat map: ratios per token, and the
per-token gradient.

Left: rho = pi_theta / pi_old for every valid token of the three answers (it varies
within an answer). Right: the gradient of the GRPO loss with respect to each token's new
log-prob; tokens on a clip platform (gradient 0) are marked with a cross.
``token_level_figure()`` has a slider for the clip radius epsilon that works without a
kernel; ``token_level_widget()`` is the live version with epsilon, beta and
``loss_type``. Data: :mod:`dpo_grpo.chapters.token_level`.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..i18n import N_, tr
from .. import _validation as v
from ..chapters.token_level import LOSS_TYPES_SHOWN, token_level_example, token_table
from .explorable import Explorable, book_subplots, round_sig

__all__ = [
    "token_level_data",
    "TOKEN_LEVEL",
    "token_level_figure",
    "token_level_widget",
    "EPSILON_GRID",
]

#: The static slider's clip radii.
EPSILON_GRID = [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6]
_EXAMPLE = token_level_example()


def token_level_data(epsilon=0.2, beta=0.04, loss_type="grpo") -> dict:
    """The example's :class:`~dpo_grpo.chapters.token_level.TokenTable` at these
    options, plus the example."""
    epsilon = v.scalar(epsilon, "epsilon", positive=True)
    table = token_table(_EXAMPLE, epsilon=epsilon, beta=beta, loss_type=loss_type)
    return {
        "example": _EXAMPLE,
        "table": table,
        "epsilon": epsilon,
        "beta": beta,
        "loss_type": loss_type,
    }


def _grid(values, mask, digits=4):
    """Nested lists with None at padding (plotly leaves those cells empty)."""
    return [
        [round_sig(x, digits) if m else None for x, m in zip(row, mrow)]
        for row, mrow in zip(values, mask > 0)
    ]


def _traces(d):
    ex, tab = d["example"], d["table"]
    b, t = ex.mask.shape
    xs = [f"t={k + 1}" for k in range(t)]
    ys = [
        f"y{i + 1}<br>|y|={int(ex.lengths[i])}, Â={ex.advantages[i]:+.3f}"
        for i in range(b)
    ]
    ratio_text = [
        [f"{r:.3f}" if m else "" for r, m in zip(row, mrow)]
        for row, mrow in zip(tab.ratio, ex.mask)
    ]
    grad_text = [
        [f"{g:+.4f}" if m else "" for g, m in zip(row, mrow)]
        for row, mrow in zip(tab.grad, ex.mask)
    ]
    gmax = max(float(np.abs(tab.grad).max()), 1e-12)
    traces = [
        {
            "type": "heatmap",
            "x": xs,
            "y": ys,
            "z": _grid(tab.ratio, ex.mask),
            "text": ratio_text,
            "texttemplate": "%{text}",
            "colorscale": "RdBu_r",
            "zmid": 1.0,
            "zmin": 0.5,
            "zmax": 1.5,
            "colorbar": {"title": {"text": "ρ"}, "x": 0.44, "len": 0.8},
            "xaxis": "x",
            "yaxis": "y",
            "hovertemplate": "%{y}, %{x}: ρ = %{z:.4f}<extra></extra>",
        },  # 0: static
        {
            "type": "heatmap",
            "x": xs,
            "y": ys,
            "z": _grid(tab.grad, ex.mask),
            "text": grad_text,
            "texttemplate": "%{text}",
            "colorscale": "PiYG_r",
            "zmid": 0.0,
            "zmin": -gmax,
            "zmax": gmax,
            "colorbar": {"title": {"text": "∂L/∂log π_θ"}, "x": 1.0, "len": 0.8},
            "xaxis": "x2",
            "yaxis": "y2",
            "hovertemplate": tr("%{y}, %{x}: gradient %{z:.5f}<extra></extra>"),
        },  # 1: epsilon
    ]
    ii, tt = np.nonzero(tab.region == "platform")
    # 2: epsilon
    traces.append(
        {
            "type": "scatter",
            "mode": "markers",
            "x": [xs[k] for k in tt],
            "y": [ys[k] for k in ii],
            "marker": {
                "symbol": "x-thin-open",
                "size": 26,
                "color": "#333",
                "line": {"width": 2, "color": "#333"},
            },
            "name": tr("on a clip platform: gradient 0 (from the surrogate)"),
            "showlegend": True,
            "hoverinfo": "skip",
            "xaxis": "x2",
            "yaxis": "y2",
        }
    )
    return traces


def _updates(d):
    tab = d["table"]
    n_clipped = int((tab.region == "platform").sum())
    return {
        "annotations[2].text": tr(
            "ε = {eps:g}: loss {loss:+.5f}, {n} of {total} tokens on a platform",
            eps=d["epsilon"],
            loss=tab.loss,
            n=n_clipped,
            total=int(d["example"].mask.sum()),
        )
    }


def _layout():
    fig = book_subplots(
        1,
        2,
        [
            tr("ratio ρ = π_θ / π_old per token"),
            tr("gradient of the loss w.r.t. each token's log π_θ"),
        ],
        height=430,
        horizontal_spacing=0.2,
    )
    fig.add_annotation(
        text="",
        xref="paper",
        yref="paper",
        x=0.5,
        y=-0.2,
        yanchor="top",
        showarrow=False,
        font={"size": 13},
    )
    fig.update_yaxes(autorange="reversed")
    # the rows are the same answers in both panels: their labels once, at the left,
    # so that the first panel's colour bar has the gap between the panels to itself
    fig.update_yaxes(showticklabels=False, row=1, col=2)
    fig.update_layout(
        legend={"orientation": "h", "x": 0.55, "y": 1.12, "yanchor": "bottom"},
        margin={"t": 100, "l": 120, "b": 150, "r": 115},
    )
    return fig.layout.to_plotly_json()


def _data(params):
    return token_level_data(params["epsilon"], params["beta"], params["loss_type"])


TOKEN_LEVEL = Explorable(
    name="token_level",
    title=N_("Token-level GRPO"),
    defaults={"epsilon": 0.2, "beta": 0.04, "loss_type": "grpo"},
    grid={"epsilon": EPSILON_GRID},
    labels={"epsilon": N_("clip radius ε")},
    data=_data,
    traces=_traces,
    updates=_updates,
    layout=_layout,
)


def token_level_figure(**grid) -> go.Figure:
    """Static heat maps of the token-level example with a slider for the clip radius
    epsilon (beta = 0.04, ``loss_type="grpo"``)."""
    return TOKEN_LEVEL.figure(**grid)


def token_level_widget(epsilon=0.2, beta=0.04, loss_type="grpo"):
    """Live version: epsilon, beta and ``loss_type`` (run in Jupyter or Colab)."""
    import ipywidgets as W

    from .widgets import CONTROL_STYLE, ExplorableWidget, float_slider

    controls = {
        "epsilon": float_slider(tr("clip radius ε"), epsilon, 0.01, 0.8, 0.01),
        "beta": float_slider(tr("β (KL weight)"), beta, 0.0, 1.0, 0.01),
        "loss_type": W.Dropdown(
            options=list(LOSS_TYPES_SHOWN),
            value=loss_type,
            description="loss_type",
            style=CONTROL_STYLE,
        ),
    }
    return ExplorableWidget(
        TOKEN_LEVEL,
        controls,
        dict,
        title=tr("Token-level GRPO"),
        help_text=tr("ratios vary within an answer; crosses: clipped tokens"),
        columns=3,
    )
