"""Explorable: the DPO loss and its gradient weight against the log-ratio margin, with
beta and the four sequence log-probs of one pair as sliders.

:data:`DPO` is the spec (data: :func:`dpo_grpo.interactive.explorables.dpo_data`),
``dpo_figure()`` the kernel-free figure and ``dpo_widget()`` the live version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go

from ..i18n import N_, tr
from ..reference import examples as ex
from .explorable import (
    BLUE,
    GREEN,
    GREY,
    ORANGE,
    PURPLE,
    RED,
    Explorable,
    book_subplots,
    on_subplot,
    round_sig,
)
from .explorables import dpo_data

if TYPE_CHECKING:
    from .widgets import ExplorableWidget


def _dpo_data(p):
    return dpo_data(
        beta=p["beta"],
        policy_chosen=p["policy_chosen"],
        policy_rejected=p["policy_rejected"],
        ref_chosen=p["ref_chosen"],
        ref_rejected=p["ref_rejected"],
    )


def _dpo_traces(d):
    m = d["margin_grid"]
    a_on, b_on, c_on, e_on = (
        on_subplot(1, 1, 2),
        on_subplot(1, 2, 2),
        on_subplot(2, 1, 2),
        on_subplot(2, 2, 2),
    )
    t = []
    for k, b in enumerate(d["betas"]):  # 0..7: static
        for key, on in (("loss_by_beta", a_on), ("weight_by_beta", b_on)):
            t.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "x": round_sig(m),
                    "y": round_sig(d[key][b]),
                    "name": f"β = {b:g}",
                    "legendgroup": f"beta{b}",
                    "showlegend": key == "loss_by_beta",
                    "line": {
                        "color": GREY,
                        "width": 1,
                        "dash": ("dot", "dash", "dashdot", "longdash")[k % 4],
                    },
                    "hovertemplate": "u = %{x:.2f}: %{y:.4f}<extra>β = "
                    + f"{b:g}"
                    + "</extra>",
                    **on,
                }
            )
    for key, on in (("loss", a_on), ("weight", b_on)):  # 8, 9: beta
        t.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": round_sig(m),
                "y": round_sig(d[key]),
                "name": tr("selected β"),
                "legendgroup": "sel",
                "showlegend": key == "loss",
                "line": {"color": BLUE, "width": 3},
                "hovertemplate": tr("u = %{x:.2f}: %{y:.4f}<extra>selected β</extra>"),
                **on,
            }
        )
    for key, on in (("pair_loss", a_on), ("pair_weight", b_on)):  # 10, 11: beta
        t.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": [round_sig(d["margin"])],
                "y": [round_sig(d[key])],
                "name": tr("the article's pair"),
                "legendgroup": "pair",
                "showlegend": key == "pair_loss",
                "marker": {"color": RED, "size": 11, "symbol": "diamond"},
                "hovertemplate": tr(
                    "u = %{x:.3f}: %{y:.4f}<extra>the article's pair</extra>"
                ),
                **on,
            }
        )
    lp = d["logps"]
    cats = [
        "log π_θ(y_w)",
        "log π_ref(y_w)",
        "log π_θ(y_l)",
        "log π_ref(y_l)",
        tr("chosen log-ratio"),
        tr("rejected log-ratio"),
        tr("margin u"),
    ]
    # top to bottom in reading order
    cats, vals_order = (
        cats[::-1],
        slice(None, None, -1),
    )
    vals = [
        lp["policy_chosen"],
        lp["ref_chosen"],
        lp["policy_rejected"],
        lp["ref_rejected"],
        d["chosen_logratio"],
        d["rejected_logratio"],
        d["margin"],
    ][vals_order]
    # 12: static
    t.append(
        {
            "type": "bar",
            "orientation": "h",
            "y": cats,
            "x": round_sig(vals),
            "text": [f"{v:+.3f}" for v in vals],
            "textposition": "outside",
            "marker": {"color": [PURPLE, RED, BLUE, GREY, RED, GREY, BLUE]},
            "showlegend": False,
            "name": tr("log-probs"),
            "hovertemplate": "%{y}: %{x:.4f}<extra></extra>",
            "cliponaxis": False,
            **c_on,
        }
    )
    cats2 = [
        tr("reward r_w = β·chosen"),
        tr("reward r_l = β·rejected"),
        "logit β·u",
        tr("loss −log σ(β·u)"),
        tr("weight σ(−β·u)"),
    ]
    vals2 = [
        d["chosen_reward"],
        d["rejected_reward"],
        d["logit"],
        d["pair_loss"],
        d["pair_weight"],
    ]
    cats2, vals2 = cats2[::-1], vals2[::-1]
    # 13: beta
    t.append(
        {
            "type": "bar",
            "orientation": "h",
            "y": cats2,
            "x": round_sig(vals2),
            "text": [f"{v:+.4f}" for v in vals2],
            "textposition": "outside",
            "marker": {"color": [ORANGE, GREEN, PURPLE, RED, BLUE]},
            "showlegend": False,
            "name": tr("β-scaled"),
            "hovertemplate": "%{y}: %{x:.4f}<extra></extra>",
            "cliponaxis": False,
            **e_on,
        }
    )
    return t


def _dpo_layout():
    fig = book_subplots(
        2,
        2,
        [
            tr("loss −log σ(β u)"),
            tr("gradient weight σ(−β u)"),
            tr("the article's pair: log-probs"),
            tr("scaled by β"),
        ],
        height=760,
        vertical_spacing=0.2,
        horizontal_spacing=0.22,
    )
    fig.update_xaxes(title_text=tr("log-ratio margin u"), row=1)
    fig.update_yaxes(range=[0, 6], row=1, col=1)
    fig.update_yaxes(range=[0, 1.02], row=1, col=2)
    fig.update_xaxes(range=[-3.6, 1.2], title_text=tr("nats"), row=2, col=1)
    fig.update_xaxes(range=[-0.8, 1.6], row=2, col=2)
    fig.update_yaxes(tickfont_size=11, row=2)
    fig.update_layout(
        legend={"orientation": "h", "x": 0, "y": 1.07, "yanchor": "bottom"},
        margin={"t": 110, "l": 100},
    )
    return fig.layout.to_plotly_json()


_pair = {k: float(v[0]) for k, v in ex.DPO_PAIRS.items()}
DPO = Explorable(
    name="dpo",
    title="DPO",
    defaults={"beta": 0.1, **_pair},
    grid={"beta": [0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0]},
    labels={"beta": "β"},
    data=_dpo_data,
    traces=_dpo_traces,
    updates=lambda d: {},
    layout=_dpo_layout,
)


def dpo_figure(**grid) -> go.Figure:
    """DPO's loss and gradient weight vs the log-ratio margin for several beta (slider:
    the highlighted beta), and the article's pair decomposed into its four log-probs,
    log-ratios, implicit rewards, logit, loss and weight."""
    return DPO.figure(**grid)


def dpo_widget(
    beta=0.1,
    policy_chosen=-2.2,
    policy_rejected=-2.8,
    ref_chosen=-2.0,
    ref_rejected=-2.4,
) -> ExplorableWidget:
    """Live DPO: beta and the four sequence log-probs of one pair (default: the
    article's first pair)."""
    from .widgets import ExplorableWidget, float_slider, log_slider

    controls = {
        "beta": log_slider("β", beta, -2, 1, 0.05),
        "policy_chosen": float_slider("log π_θ(y_w)", policy_chosen, -10.0, 0.0, 0.05),
        "ref_chosen": float_slider("log π_ref(y_w)", ref_chosen, -10.0, 0.0, 0.05),
        "policy_rejected": float_slider(
            "log π_θ(y_l)", policy_rejected, -10.0, 0.0, 0.05
        ),
        "ref_rejected": float_slider("log π_ref(y_l)", ref_rejected, -10.0, 0.0, 0.05),
    }
    return ExplorableWidget(
        DPO,
        controls,
        dict,
        title="DPO",
        help_text=tr("loss and gradient weight vs the margin"),
    )
