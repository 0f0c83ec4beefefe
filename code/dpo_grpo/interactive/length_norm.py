"""Explorable: length normalisation. How hard each ``loss_type`` pushes one answer, per
token and in total, as the answer's length and the sign of its advantage change
(on-policy, ``beta=0``, TRL 1.16.0's normalisations).

``length_norm_data`` is NumPy only; :data:`LENGTH_NORM` is the plotly spec (one slider:
the length of the other answers in the batch, which ``bnpo``/``dapo`` divide by),
``length_norm_figure()`` the kernel-free figure and ``length_norm_widget()`` the live
version.
"""

from __future__ import annotations

import numpy as np

from ..i18n import N_, tr
from .. import _validation as v
from ..trl_exact.grpo import LOSS_TYPES, grpo_loss
from .explorable import Explorable, book_subplots, on_subplot, round_sig

LENGTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
#: the colour of each loss type the figure draws: the clipped objective under the four
#: normalisers that count tokens differently (the other loss types change the policy
#: term or sum per sequence)
COLORS = {"grpo": "#1f77b4", "bnpo": "#2ca02c", "dr_grpo": "#d62728", "dapo": "#ff7f0e"}
#: the loss types the figure draws, in the order of TRL's ``LOSS_TYPES``
LOSS_TYPES_DRAWN = tuple(lt for lt in LOSS_TYPES if lt in COLORS)


def length_norm_data(
    other_length: int = 100,
    max_completion_length: int = 512,
    group_size: int = 4,
    lengths=LENGTHS,
) -> dict:
    """Per-token and per-answer push on one answer of a group, for every ``loss_type``
    and both signs of A.

    The group has ``group_size`` answers: the one studied (length ``L`` from
    ``lengths``, advantage ``s`` = +1 or -1) and ``group_size - 1`` answers of
    ``other_length`` tokens with advantage ``-s / (group_size - 1)`` (so the group's
    advantages sum to 0). ``push[loss_type][sign]`` is ``-d loss / d log pi`` at each of
    the answer's tokens (positive: a descent step raises the token's log-prob),
    ``total[...]`` that times ``L``.
    """
    other = v.integer(other_length, "other_length", minimum=1)
    lmax = v.integer(max_completion_length, "max_completion_length", minimum=1)
    g = v.integer(group_size, "group_size", minimum=2)
    lens = v.integer_array(lengths, "lengths", ndim=1)
    if (lens < 1).any() or (lens > lmax).any() or other > lmax:
        raise ValueError(
            f"lengths and other_length must lie in [1, max_completion_length={lmax}]"
        )
    push = {lt: {} for lt in LOSS_TYPES_DRAWN}
    for lt in LOSS_TYPES_DRAWN:
        for sign in (1, -1):
            vals = []
            for length in lens:
                width = int(max(length, other))
                tok = np.array([length] + [other] * (g - 1))
                mask = (np.arange(width)[None, :] < tok[:, None]).astype(float)
                adv = np.array([sign] + [-sign / (g - 1)] * (g - 1), dtype=float)
                lp = np.log(np.full(mask.shape, 0.3))
                out = grpo_loss(
                    lp,
                    lp,
                    None,
                    adv,
                    mask,
                    beta=0.0,
                    loss_type=lt,
                    max_completion_length=lmax,
                )
                vals.append(-out.grad[0, 0])
            push[lt][sign] = np.array(vals)
    total = {lt: {s: push[lt][s] * lens for s in (1, -1)} for lt in LOSS_TYPES_DRAWN}
    return {
        "lengths": lens,
        "push": push,
        "total": total,
        "params": {
            "other_length": other,
            "max_completion_length": lmax,
            "group_size": g,
        },
    }


def _traces(d):
    t = []
    for col, key in ((1, "push"), (2, "total")):
        for lt in LOSS_TYPES_DRAWN:
            for sign, dash in ((1, "solid"), (-1, "dash")):
                t.append(
                    {
                        "type": "scatter",
                        "mode": "lines+markers",
                        "x": d["lengths"].tolist(),
                        "y": round_sig(d[key][lt][sign]),
                        "name": f"{lt}, A {'> 0' if sign > 0 else '< 0'}",
                        "legendgroup": f"{lt}{sign}",
                        "showlegend": col == 1,
                        "line": {"color": COLORS[lt], "dash": dash},
                        "marker": {"size": 5},
                        "hovertemplate": tr(
                            "{lt}, A={sign:+d}<br>length %{{x}}: "
                            "%{{y:.3g}}<extra></extra>",
                            lt=lt,
                            sign=sign,
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
            tr("push per token (−∂loss/∂log π)"),
            tr("push per answer (per token × length)"),
        ],
        height=520,
        horizontal_spacing=0.1,
    )
    fig.update_xaxes(type="log", title_text=tr("length of this answer (tokens)"))
    # the legend
    fig.update_layout(
        title={
            "text": tr(
                "one answer in a group of 4; the other answers have the slider's "
                "length; on-policy, β = 0"
            ),
            "font": {"size": 13},
            "x": 0,
            "xref": "paper",
        },
        margin={"r": 160},
    )
    return fig.layout.to_plotly_json()


LENGTH_NORM = Explorable(
    name="length_norm",
    title=N_("Length normalisation"),
    defaults={"other_length": 100, "max_completion_length": 512, "group_size": 4},
    grid={"other_length": [10, 25, 50, 100, 200, 400]},
    labels={"other_length": N_("other answers' length")},
    data=lambda p: length_norm_data(**p),
    traces=_traces,
    updates=lambda d: {},
    layout=_layout,
)


def length_norm_figure(**grid):
    """Kernel-free figure: per-token and per-answer push vs answer length for the four
    loss types, A > 0 (solid) and A < 0 (dashed); slider: the other answers' length."""
    return LENGTH_NORM.figure(**grid)


def length_norm_widget(other_length=100, max_completion_length=512, group_size=4):
    """Live version: the other answers' length, max_completion_length and the group
    size."""
    from .widgets import ExplorableWidget, int_slider

    controls = {
        "other_length": int_slider(tr("other answers' length"), other_length, 1, 512),
        "max_completion_length": int_slider(
            "max_completion_length", max_completion_length, 512, 4096, 64
        ),
        "group_size": int_slider(tr("group size G"), group_size, 2, 16),
    }
    return ExplorableWidget(
        LENGTH_NORM,
        controls,
        dict,
        title=tr("Length normalisation"),
        help_text=tr("who gets pushed how hard per token"),
        columns=3,
    )
