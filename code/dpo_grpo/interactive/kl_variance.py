"""The KL estimators' value bias, variance and expected gradient as the policy moves
away from the reference.

Companion of the KL explorable
(:func:`dpo_grpo.interactive.kl_estimator.kl_estimator_figure`): that one shows the
estimators at one token and the off-policy bias; this one shows why Schulman recommends
k3 (low variance near the reference), where that stops holding, and what each estimator
does when it is put in the loss (the gradient view of section 3.5). The policy family is
``p(kappa) = softmax(log q + kappa (log p - log q))`` of
:func:`dpo_grpo.reference.kl.policy_gap_family`: ``kappa = 0`` is the reference,
``kappa = 1`` the article's ``p``.

``kl_variance_figure()`` is the static figure (a slider over ``kappa``, no kernel
needed); ``kl_variance_widget()`` the live version (``kappa`` and editable ``p``,
``q``).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..i18n import N_, tr
from .. import _validation as v
from ..reference import examples as ex
from ..reference.kl import estimator_views, exact_kl, kl_grad_logits, policy_gap_family
from .explorable import (
    BLUE,
    GREEN,
    GREY,
    ORANGE,
    Explorable,
    book_subplots,
    on_subplot,
    round_sig,
)

__all__ = [
    "kl_variance_data",
    "KL_VARIANCE",
    "kl_variance_figure",
    "kl_variance_widget",
    "GAP_GRID",
]

#: The static slider's values of the policy gap κ.
GAP_GRID = [round(0.1 * k, 1) for k in range(21)]
ESTIMATORS = (
    ("k1", GREY, "k1 = −Δ"),
    ("k2", ORANGE, "k2 = Δ²/2"),
    ("k3", BLUE, "k3 = e^Δ − Δ − 1"),
)


def kl_variance_data(gap=1.0, p=None, q=None) -> dict:
    """Mean, standard deviation and expected loss gradient of k1, k2, k3 for one token
    drawn from ``p(gap)``.

    Returns the curves over ``gaps`` (default 0 to 2 in steps of 0.02: ``kl``,
    ``mean[k]``, ``std[k]``) and, at ``gap``: the policy ``policy``, the exact KL, each
    estimator's ``at[k]`` view and the true gradient ``true_grad`` of KL(p(gap) || q)
    with respect to the logits.
    """
    gap = v.scalar(gap, "gap")
    p = v.probability_vector(ex.KL_EXAMPLE["p"] if p is None else p, "p")
    q = v.probability_vector(ex.KL_EXAMPLE["q"] if q is None else q, "q")
    v.same_shape(p=p, q=q)
    gaps = np.linspace(0.0, 2.0, 101)
    curves = {
        "mean": {k: [] for k, _, _ in ESTIMATORS},
        "std": {k: [] for k, _, _ in ESTIMATORS},
        "kl": [],
    }
    for g in gaps:
        pg = policy_gap_family(float(g), p, q)
        views = estimator_views(pg, q)
        curves["kl"].append(exact_kl(pg, q))
        for k, _, _ in ESTIMATORS:
            curves["mean"][k].append(views[k].mean)
            curves["std"][k].append(np.sqrt(views[k].variance))
    policy = policy_gap_family(gap, p, q)
    return {
        "gaps": gaps,
        "kl": np.array(curves["kl"]),
        "mean": {k: np.array(c) for k, c in curves["mean"].items()},
        "std": {k: np.array(c) for k, c in curves["std"].items()},
        "gap": gap,
        "policy": policy,
        "q": q,
        "exact": exact_kl(policy, q),
        "at": estimator_views(policy, q),
        "true_grad": kl_grad_logits(np.log(policy), q),
    }


def _data(params):
    return kl_variance_data(gap=params["gap"], p=params["p"], q=params["q"])


def _traces(d):
    a_on, b_on, c_on = on_subplot(1, 1, 3), on_subplot(1, 2, 3), on_subplot(1, 3, 3)
    g = d["gaps"]
    # 0 static
    t = [
        {
            "type": "scatter",
            "mode": "lines",
            "x": round_sig(g),
            "y": round_sig(d["kl"]),
            "name": tr("KL(π_θ‖π_ref) exact"),
            "line": {"color": "black", "dash": "dot", "width": 2},
            "hovertemplate": tr("κ = %{x:.2f}: %{y:.4f}<extra>exact KL</extra>"),
            **a_on,
        }
    ]
    for k, color, name in ESTIMATORS:  # 1-6 static
        t.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": round_sig(g),
                "y": round_sig(d["mean"][k]),
                "name": name,
                "legendgroup": k,
                "line": {"color": color, "width": 2.5},
                "hovertemplate": tr("κ = %{x:.2f}: mean %{y:.4f}<extra>")
                + k
                + "</extra>",
                **a_on,
            }
        )
        t.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": round_sig(g),
                "y": round_sig(d["std"][k]),
                "name": name,
                "legendgroup": k,
                "showlegend": False,
                "line": {"color": color, "width": 2.5},
                "hovertemplate": tr("κ = %{x:.2f}: std %{y:.4f}<extra>")
                + k
                + "</extra>",
                **b_on,
            }
        )
    gap = d["gap"]
    t.append(
        {
            "type": "scatter",
            "mode": "markers",
            "x": [round_sig(gap)] * 3,  # 7 gap
            "y": [round_sig(d["at"][k].mean) for k, _, _ in ESTIMATORS],
            "showlegend": False,
            "name": tr("at κ"),
            "marker": {"color": [c for _, c, _ in ESTIMATORS], "size": 11},
            "hovertemplate": tr("mean %{y:.4f}<extra></extra>"),
            **a_on,
        }
    )
    t.append(
        {
            "type": "scatter",
            "mode": "markers",
            "x": [round_sig(gap)] * 3,  # 8 gap
            "y": [round_sig(np.sqrt(d["at"][k].variance)) for k, _, _ in ESTIMATORS],
            "showlegend": False,
            "name": tr("at κ"),
            "marker": {"color": [c for _, c, _ in ESTIMATORS], "size": 11},
            "hovertemplate": tr("std %{y:.4f}<extra></extra>"),
            **b_on,
        }
    )
    actions = ["z₀", "z₁", "z₂"]
    for k, color, name in ESTIMATORS:  # 9-11 gap
        t.append(
            {
                "type": "bar",
                "x": actions,
                "y": round_sig(d["at"][k].grad),
                "name": f"E[∇{k}]",
                "legendgroup": k,
                "showlegend": False,
                "marker": {"color": color},
                "hovertemplate": tr(
                    "%{{x}}: %{{y:.4f}}<extra>expected gradient of {k} as a "
                    "loss</extra>",
                    k=k,
                ),
                **c_on,
            }
        )
    t.append(
        {
            "type": "bar",
            "x": actions,
            "y": round_sig(d["true_grad"]),
            "name": "∇ KL(π_θ‖π_ref)",  # 12 gap
            "marker": {"color": GREEN},
            "hovertemplate": tr("%{x}: %{y:.4f}<extra>true gradient</extra>"),
            **c_on,
        }
    )
    return t


def _layout():
    fig = book_subplots(
        1,
        3,
        [
            tr("mean of k over tokens a ~ π_θ"),
            tr("standard deviation of k"),
            tr("expected gradient of β·k in the loss (β = 1)"),
        ],
        height=470,
        horizontal_spacing=0.08,
    )
    fig.update_xaxes(
        title_text=tr("policy gap κ (0 = π_ref, 1 = the article's π_θ)"), col=1
    )
    fig.update_xaxes(title_text=tr("policy gap κ"), col=2)
    fig.update_xaxes(title_text="logit", col=3)
    fig.update_yaxes(title_text=tr("nats"), col=1)
    fig.update_yaxes(range=[0, 2.5], col=2)
    fig.update_yaxes(range=[-0.6, 0.7], col=3)
    fig.update_layout(
        barmode="group",
        legend={"orientation": "h", "x": 0, "y": 1.12, "yanchor": "bottom"},
        margin={"t": 110},
    )
    return fig.layout.to_plotly_json()


KL_VARIANCE = Explorable(
    name="kl_variance",
    title=N_("KL estimators: bias, variance, gradient"),
    defaults={
        "gap": 1.0,
        **{k: tuple(float(x) for x in ex.KL_EXAMPLE[k]) for k in ("p", "q")},
    },
    grid={"gap": GAP_GRID},
    labels={"gap": N_("policy gap κ")},
    data=_data,
    traces=_traces,
    updates=lambda d: {},
    layout=_layout,
)


def kl_variance_figure(**grid) -> go.Figure:
    """Static figure: mean and standard deviation of k1, k2, k3 against the policy gap
    κ, and their expected gradients as loss terms next to the true KL gradient (slider:
    kappa)."""
    return KL_VARIANCE.figure(**grid)


def kl_variance_widget(gap=1.0, p=(0.7, 0.2, 0.1), q=(0.2, 0.3, 0.5)):
    """Live version: a slider for kappa and editable p, q (run in Jupyter or Colab)."""
    import ipywidgets as W

    from .widgets import CONTROL_STYLE, ExplorableWidget, float_slider, parse_numbers

    text = lambda name, val: W.Text(
        value=", ".join(f"{x:g}" for x in val),
        description=name,  # noqa: E731
        continuous_update=False,
        style=CONTROL_STYLE,
        layout=W.Layout(width="260px"),
    )
    controls = {
        "gap": float_slider(tr("policy gap κ"), gap, 0.0, 3.0, 0.05),
        "p": text(tr("π_θ at κ = 1"), p),
        "q": text("π_ref", q),
    }

    def to_params(values):
        return {
            "gap": values["gap"],
            "p": parse_numbers(values["p"], "p"),
            "q": parse_numbers(values["q"], "q"),
        }

    return ExplorableWidget(
        KL_VARIANCE,
        controls,
        to_params,
        title=tr("KL estimators: bias, variance, gradient"),
        help_text=tr(
            "k3: unbiased and low-variance near π_ref; as a loss it follows "
            "KL(π_ref‖π_θ)"
        ),
        columns=3,
    )
