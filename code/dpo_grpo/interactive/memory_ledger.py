"""Explorable: the memory ledger. Bytes of logical training state per component for PPO
(actor + critic), GRPO and DPO, against the model size and the precision/optimizer
recipe.

:data:`MEMORY` is the static spec and :data:`MEMORY_LIVE` the live one (data:
:func:`dpo_grpo.interactive.explorables.memory_ledger_data`), ``memory_ledger_figure()``
the kernel-free figure and ``memory_ledger_widget()`` the live version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from ..i18n import N_, tr
from ..reference.memory import BYTES_PER_VALUE, GB, GiB
from .explorable import TEMPLATE, Explorable, round_sig
from .memory_data import (
    MEMORY_COMPONENTS,
    MEMORY_RECIPE_SHORT,
    MEMORY_RECIPES,
    memory_ledger_data,
)

if TYPE_CHECKING:
    from .widgets import ExplorableWidget


COMPONENT_COLORS = {
    "policy weights": "#1f77b4",
    "policy gradients": "#aec7e8",
    "policy fp32 master weights": "#9467bd",
    "policy optimizer states": "#c5b0d5",
    "critic (trainable state)": "#d62728",
    "reference (frozen)": "#7f7f7f",
    "reward model (frozen)": "#bcbd22",
}
RECIPES = tuple(MEMORY_RECIPES)


def component_labels(d) -> dict:
    """The legend names of :func:`memory_ledger_data`'s components, in the reader's
    language."""
    p = d["params"]
    return {
        "policy weights": tr("policy weights ({dtype})", dtype=p["weight_dtype"]),
        "policy gradients": tr("policy gradients ({dtype})", dtype=p["grad_dtype"]),
        "policy fp32 master weights": tr("policy fp32 master weights"),
        "policy optimizer states": tr(
            "policy {optimizer} states (fp32)", optimizer=p["optimizer"]
        ),
        "critic (trainable state)": tr("critic: full trainable state"),
        "reference (frozen)": tr(
            "reference model (frozen, bf16: {n} bytes/param)", n=BYTES_PER_VALUE["bf16"]
        ),
        "reward model (frozen)": tr("reward model (frozen, bf16)"),
    }


def _memory_traces_for(d, visible=True, unit="GB"):
    labels = component_labels(d)
    scale = GB if unit == "GB" else GiB
    other, other_scale = ("GiB", GiB) if unit == "GB" else ("GB", GB)
    t = []
    for comp in MEMORY_COMPONENTS:
        b = np.asarray(d["components"][comp], dtype=np.float64)
        t.append(
            {
                "type": "bar",
                "x": d["labels"],
                "y": round_sig(b / scale, 5),
                "name": labels[comp],
                "legendgroup": comp,
                "visible": visible,
                "marker": {"color": COMPONENT_COLORS[comp]},
                "customdata": round_sig(b / other_scale, 5),
                "hovertemplate": f"%{{x}}<br>{labels[comp]}: %{{y:.4g}} {unit} "
                f"(%{{customdata:.4g}} {other})<extra></extra>",
            }
        )
    tot = np.asarray(d["totals_bytes"], dtype=np.float64)
    t.append(
        {
            "type": "scatter",
            "mode": "text",
            "x": d["labels"],
            "y": round_sig(tot / scale, 5),
            "visible": visible,
            "text": [
                f"{x / scale:.4g} {unit}<br>= {x / other_scale:.4g} {other}"
                for x in tot
            ],
            "textposition": "top center",
            "showlegend": False,
            "name": "total",
            "hoverinfo": "skip",
            "textfont": {"size": 12},
        }
    )
    # an invisible point above the tallest bar, so the y autorange leaves room for the
    # total labels
    t.append(
        {
            "type": "scatter",
            "mode": "markers",
            "x": d["labels"][:1],
            "y": round_sig([tot.max() / scale * 1.12], 5),
            "visible": visible,
            "marker": {"opacity": 0},
            "showlegend": False,
            "hoverinfo": "skip",
            "name": "headroom",
        }
    )
    return t


def _memory_data(p):
    return {
        name: memory_ledger_data(
            int(round(p["n_billion"] * 1e9)), **MEMORY_RECIPES[name]
        )
        for name in RECIPES
    } | {"selected": p["recipe"]}


def _memory_traces(d):
    t = []
    for name in RECIPES:
        t.extend(_memory_traces_for(d[name], visible=name == d["selected"]))
    return t


def _memory_layout():
    fig = go.Figure()
    fig.update_layout(
        template=TEMPLATE,
        height=560,
        barmode="stack",
        title={
            "text": tr("logical training state (no activations, no sharding)"),
            "font": {"size": 14},
        },
        yaxis={"title": {"text": tr("GB (10⁹ bytes)")}, "rangemode": "tozero"},
        legend={"x": 1.02, "y": 1, "font": {"size": 11}},
        margin={"l": 70, "r": 310, "t": 60, "b": 150},
    )
    return fig.layout.to_plotly_json()


MEMORY = Explorable(
    name="memory_ledger",
    title=N_("Memory ledger"),
    defaults={"n_billion": 7.0, "recipe": RECIPES[0]},
    grid={
        "n_billion": [0.5, 1.0, 1.5, 3.0, 7.0, 8.0, 13.0, 14.0, 32.0, 70.0],
        "recipe": list(RECIPES),
    },
    labels={
        "n_billion": N_("parameters (billions)"),
        "recipe": N_("precision + optimizer"),
    },
    formats={
        "n_billion": lambda v: f"{v:g}B",
        "recipe": lambda v: tr(MEMORY_RECIPE_SHORT[v]),
    },
    data=_memory_data,
    traces=_memory_traces,
    updates=lambda d: {},
    layout=_memory_layout,
    slider_places=lambda layout, params: [
        {"x": 0.0, "len": 0.48, "y": 0.0, "pad": {"t": 40, "b": 0, "l": 0, "r": 0}},
        {"x": 0.52, "len": 0.48, "y": 0.0, "pad": {"t": 40, "b": 0, "l": 0, "r": 0}},
    ][: len(params)],
)


def memory_ledger_figure(**grid) -> go.Figure:
    """Stacked GB of logical training state for PPO (actor + critic), GRPO and DPO;
    sliders: model size and the precision/optimizer recipe. Default: the article's 7B
    with mixed-precision AdamW (112 GB of trainable state per trained model; PPO 252 GB,
    GRPO 140 GB and DPO 126 GB, with a bf16 reference and, for PPO and GRPO, a same-size
    reward model)."""
    return MEMORY.figure(**grid)


def _memory_live_data(p):
    d = memory_ledger_data(
        int(round(p["n_billion"] * 1e9)),
        weight_dtype=p["weight_dtype"],
        grad_dtype=p["grad_dtype"],
        optimizer=p["optimizer"],
        master_weights=p["master_weights"],
        reward_model=p["reward_model"],
        grpo_reward_model=p["grpo_reward_model"],
        precomputed_reference=p["precomputed_reference"],
    )
    d["unit"] = p["unit"]
    return d


MEMORY_LIVE = Explorable(
    name="memory_ledger_live",
    title=N_("Memory ledger (live)"),
    defaults={
        "n_billion": 7.0,
        "weight_dtype": "bf16",
        "grad_dtype": "bf16",
        "optimizer": "adamw",
        "master_weights": True,
        "reward_model": True,
        "grpo_reward_model": True,
        "precomputed_reference": False,
        "unit": "GB",
    },
    grid={},
    labels={},
    data=_memory_live_data,
    traces=lambda d: _memory_traces_for(d, unit=d["unit"]),
    updates=lambda d: {
        "yaxis.title.text": tr("GB (10⁹ bytes)")
        if d["unit"] == "GB"
        else tr("GiB (2³⁰ bytes)")
    },
    layout=_memory_layout,
)


def memory_ledger_widget(
    n_billion=7.0,
    weight_dtype="bf16",
    grad_dtype="bf16",
    optimizer="adamw",
    master_weights=True,
    reward_model=True,
    grpo_reward_model=True,
    precomputed_reference=False,
    unit="GB",
) -> ExplorableWidget:
    """Live memory ledger: model size, precisions, optimizer, master copy,
    reward/reference models, GB or GiB."""
    import ipywidgets as W

    from .widgets import CONTROL_STYLE, ExplorableWidget, log_slider

    dtypes = ["fp32", "bf16", "fp16", "fp8"]

    def drop(name, options, value):
        return W.Dropdown(
            options=options,
            value=value,
            description=name,
            style=CONTROL_STYLE,
            layout=W.Layout(width="220px"),
        )

    def check(name, value):
        return W.Checkbox(value=value, description=name, style=CONTROL_STYLE)

    controls = {
        "n_billion": log_slider(
            tr("parameters (billions)"), n_billion, -1, 3, 0.05, ".3g"
        ),
        "unit": W.ToggleButtons(
            options=["GB", "GiB"],
            value=unit,
            description=tr("unit"),
            style=CONTROL_STYLE,
        ),
        "weight_dtype": drop(tr("weights"), dtypes, weight_dtype),
        "grad_dtype": drop(tr("gradients"), dtypes, grad_dtype),
        "optimizer": drop(tr("optimizer"), ["adamw", "sgd_momentum", "sgd"], optimizer),
        "master_weights": check(tr("fp32 master weights"), master_weights),
        "reward_model": check(tr("PPO: reward model (same size)"), reward_model),
        "grpo_reward_model": check(
            tr("GRPO: reward model (else rule-based)"), grpo_reward_model
        ),
        "precomputed_reference": check(
            tr("DPO: precomputed reference log-probs"), precomputed_reference
        ),
    }
    return ExplorableWidget(
        MEMORY_LIVE,
        controls,
        dict,
        title=tr("Memory ledger"),
        help_text=tr("logical training state, no activations or sharding"),
    )
