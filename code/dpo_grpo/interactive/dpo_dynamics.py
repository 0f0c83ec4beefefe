"""Explorable: DPO dynamics. TRL's ``rewards/chosen``, ``rewards/rejected`` and
``rewards/margins`` over training on one pair, as beta and the similarity of the pair
change; likelihood displacement shows as a falling chosen reward
(:func:`dpo_grpo.chapters.displacement.dpo_displacement`).

Left panel: beta varies at similarity 0.9; right panel: similarity varies at beta 0.1
(one slider per panel, so every slider combination is exact). ``dpo_dynamics_figure()``
and ``dpo_dynamics_widget()``.
"""

from __future__ import annotations

from ..i18n import N_, tr
from .. import _validation as v
from ..chapters.displacement import dpo_displacement
from .explorable import Explorable, book_subplots, on_subplot, round_sig

STEPS = 150
FIXED_SIMILARITY, FIXED_BETA = 0.9, 0.1
SERIES = (
    ("chosen", "rewards/chosen", "#2ca02c"),
    ("rejected", "rewards/rejected", "#d62728"),
    ("margins", "rewards/margins", "#1f77b4"),
)


def dpo_dynamics_data(
    beta: float = FIXED_BETA,
    similarity: float = FIXED_SIMILARITY,
    steps: int = STEPS,
    other_alignment: float = 1.0,
) -> dict:
    """Two runs of :func:`dpo_displacement`: ``by_beta`` (``beta``, similarity 0.9) and
    ``by_similarity`` (beta 0.1, ``similarity``), each with ``steps`` gradient steps."""
    steps = v.integer(steps, "steps", minimum=1)
    by_beta = dpo_displacement(
        beta=beta,
        similarity=FIXED_SIMILARITY,
        steps=steps,
        other_alignment=other_alignment,
    )
    by_sim = dpo_displacement(
        beta=FIXED_BETA,
        similarity=similarity,
        steps=steps,
        other_alignment=other_alignment,
    )
    return {
        "by_beta": by_beta,
        "by_similarity": by_sim,
        "params": {
            "beta": beta,
            "similarity": similarity,
            "steps": steps,
            "other_alignment": other_alignment,
        },
    }


def _traces(d):
    t = []
    for col, key in ((1, "by_beta"), (2, "by_similarity")):
        run = d[key]
        for series, name, color in SERIES:
            t.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "x": list(range(len(run[series]))),
                    "y": round_sig(run[series]),
                    "name": name,
                    "legendgroup": series,
                    "showlegend": col == 1,
                    "line": {"color": color},
                    "hovertemplate": tr(
                        "{name}<br>step %{{x}}: %{{y:.4g}}<extra></extra>", name=name
                    ),
                    **on_subplot(1, col, 2),
                }
            )
    return t


def _layout():
    fig = book_subplots(
        1,
        2,
        [
            tr("vary β (pair similarity {s})", s=FIXED_SIMILARITY),
            tr("vary the pair's similarity (β = {beta})", beta=FIXED_BETA),
        ],
        height=520,
        horizontal_spacing=0.1,
    )
    fig.update_xaxes(title_text=tr("gradient step"))
    fig.update_yaxes(title_text="β · (log π − log π_ref)", col=1)
    fig.add_hline(y=0, line={"color": "#999", "width": 1})
    fig.update_layout(margin={"l": 75, "r": 170})  # the legend
    return fig.layout.to_plotly_json()


DPO_DYNAMICS = Explorable(
    name="dpo_dynamics",
    title=N_("DPO dynamics"),
    defaults={
        "beta": FIXED_BETA,
        "similarity": FIXED_SIMILARITY,
        "steps": STEPS,
        "other_alignment": 1.0,
    },
    grid={
        "beta": [0.02, 0.05, 0.1, 0.2, 0.5, 1.0],
        "similarity": [-0.5, 0.0, 0.5, 0.8, 0.9, 0.99],
    },
    labels={"beta": "β", "similarity": N_("cos(chosen, rejected)")},
    data=lambda p: dpo_dynamics_data(**p),
    traces=_traces,
    updates=lambda d: {},
    layout=_layout,
)


def dpo_dynamics_figure(**grid):
    """Kernel-free figure: implicit-reward trajectories, left panel by beta, right panel
    by pair similarity."""
    return DPO_DYNAMICS.figure(**grid)


def dpo_dynamics_widget(
    beta=FIXED_BETA, similarity=FIXED_SIMILARITY, steps=STEPS, other_alignment=1.0
):
    """Live version: beta, similarity, steps, and how strongly the other answers align
    with the pair's difference (0 is the control without displacement)."""
    from .widgets import ExplorableWidget, float_slider, int_slider, log_slider

    controls = {
        "beta": log_slider("β", beta, -2, 1, 0.05),
        "similarity": float_slider(
            tr("cos(chosen, rejected)"), similarity, -0.95, 0.99, 0.01
        ),
        "steps": int_slider(tr("steps"), steps, 10, 400, 10),
        "other_alignment": float_slider(
            tr("other answers along the pair's difference"),
            other_alignment,
            0.0,
            2.0,
            0.05,
        ),
    }
    return ExplorableWidget(
        DPO_DYNAMICS,
        controls,
        dict,
        title=tr("DPO dynamics"),
        help_text=tr(
            "chosen, rejected and margin as β and the pair's similarity change"
        ),
    )
