"""Explorable: the KL estimators k1, k2, k3 against Delta = log pi_ref - log pi_theta,
and the off-policy bias of k3 when the tokens come from a mix of the current and the old
policy.

:data:`KL` is the spec (data:
:func:`dpo_grpo.interactive.explorables.kl_estimator_data`), ``kl_estimator_figure()``
the kernel-free figure and ``kl_estimator_widget()`` the live version; its companion
:mod:`dpo_grpo.interactive.kl_variance` shows the estimators' spread.
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
    RED,
    Explorable,
    book_subplots,
    on_subplot,
    round_sig,
)
from .explorables import kl_estimator_data

if TYPE_CHECKING:
    from .widgets import ExplorableWidget


def _kl_data(p):
    return kl_estimator_data(
        delta=p["delta"], mix=p["mix"], p=p["p"], q=p["q"], old=p["old"]
    )


def _kl_traces(d):
    a_on, b_on, c_on = on_subplot(1, 1, 2), on_subplot(1, 2, 2), on_subplot(2, 1, 2)
    dl = d["params"]["delta"]
    t = []
    for key, color, name in (
        ("k1", GREY, "k1 = −Δ"),
        ("k2", ORANGE, "k2 = Δ²/2"),
        ("k3", BLUE, "k3 = e^Δ − Δ − 1"),
    ):
        # 0-2 static
        t.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": round_sig(d["deltas"]),
                "y": round_sig(d[key]),
                "name": name,
                "legendgroup": key,
                "line": {"color": color, "width": 2.5},
                "hovertemplate": "Δ = %{x:.2f}: %{y:.4f}<extra>" + key + "</extra>",
                **a_on,
            }
        )
    for key, color in (("k1", GREY), ("k2", ORANGE), ("k3", BLUE)):  # 3-5: delta
        t.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": [round_sig(dl)],
                "y": [round_sig(d["at_delta"][key])],
                "name": tr("{key} at Δ", key=key),
                "legendgroup": key,
                "showlegend": False,
                "marker": {
                    "color": color,
                    "size": 11,
                    "line": {"color": "white", "width": 1.5},
                },
                "hovertemplate": f"{key}(%{{x:.2f}}) = %{{y:.4f}}<extra></extra>",
                **a_on,
            }
        )
    acts = [tr("action {i}", i=i) for i in range(3)]
    for key, color, name in (
        ("p", BLUE, tr("π_θ = p (current)")),
        ("q", GREY, "π_ref = q"),
        ("sampling", ORANGE, tr("sampling μ = (1−τ)·p + τ·π_old")),
    ):  # 6,7 static; 8 mix
        t.append(
            {
                "type": "bar",
                "x": acts,
                "y": round_sig(d[key]),
                "name": name,
                "marker": {"color": color},
                "hovertemplate": "%{x}: %{y:.3f}<extra>" + name + "</extra>",
                **b_on,
            }
        )
    for key, color, name in (
        ("biased_vs_mix", RED, tr("E_μ[k3] (bare: biased)")),
        ("corrected_vs_mix", GREEN, tr("E_μ[(p/μ)·k3] (ratio-corrected)")),
    ):  # 9,10 static
        t.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": round_sig(d["mixes"]),
                "y": round_sig(d[key]),
                "name": name,
                "line": {"color": color, "width": 2.5},
                "legendgroup": key,
                "hovertemplate": "τ = %{x:.2f}: %{y:.4f}<extra></extra>",
                **c_on,
            }
        )
    # 11 static
    t.append(
        {
            "type": "scatter",
            "mode": "lines",
            "x": [0, 1],
            "y": round_sig([d["exact"]] * 2),
            "name": tr("KL(p‖q) exact"),
            "line": {"color": "black", "dash": "dot"},
            "hovertemplate": tr("%{y:.4f}<extra>exact KL</extra>"),
            **c_on,
        }
    )
    # 12 mix
    t.append(
        {
            "type": "scatter",
            "mode": "markers",
            "x": round_sig([d["params"]["mix"]] * 2),
            "y": round_sig([d["biased"], d["corrected"]]),
            "name": tr("at this t"),
            "showlegend": False,
            "marker": {"color": [RED, GREEN], "size": 12, "symbol": "diamond"},
            "text": [
                tr("biased {v:.4f}", v=d["biased"]),
                tr("corrected {v:.4f}", v=d["corrected"]),
            ],
            "hovertemplate": "%{text}<extra></extra>",
            **c_on,
        }
    )
    return t


def _kl_layout():
    fig = book_subplots(
        2,
        2,
        [
            tr("k1, k2, k3 at one sampled token"),
            tr("p, q and the sampling distribution μ"),
            tr("average of k3 over tokens drawn from μ, vs the mix τ"),
        ],
        height=720,
        specs=[[{}, {}], [{"colspan": 2}, None]],
        vertical_spacing=0.17,
        horizontal_spacing=0.1,
    )
    fig.update_xaxes(title_text="Δ = log π_ref − log π_θ", row=1, col=1)
    fig.update_yaxes(range=[-3.2, 8], row=1, col=1)
    fig.update_yaxes(range=[0, 0.8], title_text=tr("probability"), row=1, col=2)
    fig.update_xaxes(
        title_text=tr(
            "τ: μ = (1 − τ)·p + τ·π_old (τ = 0: on-policy; τ = 1: the old policy)"
        ),
        row=2,
        col=1,
    )
    fig.update_yaxes(range=[0, 1.25], title_text=tr("nats"), row=2, col=1)
    fig.update_layout(
        barmode="group",
        legend={"orientation": "h", "x": 0, "y": 1.06, "yanchor": "bottom"},
        margin={"t": 130},
    )
    return fig.layout.to_plotly_json()


KL = Explorable(
    name="kl_estimator",
    title=N_("KL estimators"),
    defaults={
        "delta": 0.5,
        "mix": 1.0,
        **{k: tuple(float(x) for x in ex.KL_EXAMPLE[k]) for k in ("p", "q", "old")},
    },
    grid={
        "delta": [-2.0, -1.5, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 1.5, 2.0],
        "mix": [round(0.1 * k, 1) for k in range(11)],
    },
    labels={"delta": "Δ", "mix": "τ"},
    data=_kl_data,
    traces=_kl_traces,
    updates=lambda d: {},
    layout=_kl_layout,
)


def kl_estimator_figure(**grid) -> go.Figure:
    """k1, k2, k3 vs Delta (slider: a marked Delta), and the article's off-policy
    example p = [0.7, 0.2, 0.1], q = [0.2, 0.3, 0.5], old = [0.3, 0.3, 0.4]: sampling
    from ``mu = (1-tau) p + tau old`` biases the bare k3 average; weighting by p/mu
    restores KL(p || q) (slider: tau)."""
    return KL.figure(**grid)


def kl_estimator_widget(
    delta=0.5, mix=1.0, p=(0.7, 0.2, 0.1), q=(0.2, 0.3, 0.5), old=(0.3, 0.3, 0.4)
) -> ExplorableWidget:
    """Live KL estimators: Delta, the sampling mix tau, and editable p, q, old (each
    must sum to 1)."""
    import ipywidgets as W

    from .widgets import CONTROL_STYLE, ExplorableWidget, float_slider, parse_numbers

    text = lambda name, v: W.Text(
        value=", ".join(f"{x:g}" for x in v),
        description=name,  # noqa: E731
        continuous_update=False,
        style=CONTROL_STYLE,
        layout=W.Layout(width="260px"),
    )
    controls = {
        "delta": float_slider("Δ = log π_ref − log π_θ", delta, -3.0, 3.0, 0.05),
        "mix": float_slider(tr("τ (sample from (1−τ)p + τ·old)"), mix, 0.0, 1.0, 0.02),
        "p": text("p = π_θ", p),
        "q": text("q = π_ref", q),
        "old": text("π_old", old),
    }

    def to_params(v):
        return {
            "delta": v["delta"],
            "mix": v["mix"],
            "p": parse_numbers(v["p"], "p"),
            "q": parse_numbers(v["q"], "q"),
            "old": parse_numbers(v["old"], "old"),
        }

    return ExplorableWidget(
        KL,
        controls,
        to_params,
        title=tr("KL estimators"),
        help_text=tr("k3 is unbiased on-policy; off-policy it needs the ratio p/μ"),
    )
