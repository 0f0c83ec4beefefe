"""Plotly figures of the book's original seven explorables, with sliders precomputed over a parameter grid.

The newer explorables live in their own modules beside this one (length_norm, difficulty, dpo_dynamics, clip_reuse,
kl_variance, token_level) and reuse its helpers.

Each ``*_figure()`` returns a :class:`plotly.graph_objects.Figure` whose ``layout.sliders`` carry every state of a
modest grid (rounded numbers, so a figure stays well under the 1.5 MB page budget): the sliders work in the static
HTML book with no kernel, and the same figure shows in Jupyter and Colab. The data comes from
:mod:`dpo_grpo.interactive.explorables` (NumPy only); the live, kernel-backed versions are in :mod:`dpo_grpo.interactive.widgets`.

=====================  ==========================  =============================
explorable             static figure               live UI (Jupyter / Colab)
=====================  ==========================  =============================
clip platforms         clip_platform_figure()      widgets.clip_platform_widget()
zero-std groups        zero_std_figure()           widgets.zero_std_widget()
group advantages       group_advantage_figure()    widgets.group_advantage_widget()
DPO loss and weight    dpo_figure()                widgets.dpo_widget()
KL estimators          kl_estimator_figure()       widgets.kl_estimator_widget()
the group bandit       bandit_figure()             widgets.bandit_widget()
memory ledger          memory_ledger_figure()      widgets.memory_ledger_widget()
=====================  ==========================  =============================

Embedding one in a chapter notebook (the gallery ``book/explorables.ipynb`` shows all seven)::

    from dpo_grpo.interactive import figures
    figures.clip_platform_figure()        # a shown code cell: the static figure, its sliders work in the HTML

and, in a code cell whose metadata has ``"tags": ["remove-cell", "skip-execution"]`` (hidden from the HTML and not
run by the build, since embedded widget state cannot call Python; it runs when a reader executes the notebook in
Jupyter or Colab)::

    from dpo_grpo.interactive import widgets
    widgets.clip_platform_widget()

How the static sliders stay exact. Plotly sliders are independent: a step cannot read the other sliders. Every
figure is therefore laid out so that each trace attribute and each layout property depends on one slider at most
(for instance the A < 0 objective is drawn as two traces, left of rho = 1 owned by eps_low and right of it by
delta); :meth:`Explorable.figure` verifies this while building the steps, so any combination of slider positions
shows exactly ``*_data`` at those parameters. A slider's step updates only the traces and layout keys it owns.

In the book build the figures reach the HTML through :class:`dpo_grpo.book_assets.PlotlyMimeRenderer` (plotly.js
is loaded once per page from ``_static/vendor/``); ``import dpo_grpo`` does not import plotly.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..reference import examples as ex
from . import explorables as xp
from .explorables import (
    bandit_data,
    clip_platform_data,
    dpo_data,
    group_advantage_data,
    kl_estimator_data,
    memory_ledger_data,
    zero_std_data,
)
from ..reference.memory import GB, GiB

__all__ = [
    "Explorable",
    "EXPLORABLES",
    "FIGURES",
    "clip_platform_figure",
    "zero_std_figure",
    "group_advantage_figure",
    "dpo_figure",
    "kl_estimator_figure",
    "bandit_figure",
    "memory_ledger_figure",
    "figure_html_size",
    "clip_platform_data",
    "zero_std_data",
    "group_advantage_data",
    "dpo_data",
    "kl_estimator_data",
    "bandit_data",
    "memory_ledger_data",
    "PAGE_BUDGET_BYTES",
]

#: Upper bound on the HTML of one chapter page (all its figures together).
PAGE_BUDGET_BYTES = 1_500_000
TEMPLATE = "plotly_white"
BLUE, RED, GREEN, PURPLE, ORANGE, GREY = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#7f7f7f",
)
ACTION_COLORS = ("#8c564b", "#17becf", GREEN, GREY)
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
    "platform": "clip platform: gradient 0",
    "wrong_direction": "wrong direction: not clipped",
    "capped": "capped by δ: gradient 0",
    "inside": "inside the clip interval",
}


# ----------------------------------------------------------------------------------------------------------------
# Small helpers
# ----------------------------------------------------------------------------------------------------------------


def _n(x, digits=4):
    """Round to ``digits`` significant digits; NaN/inf -> None. Arrays -> lists, scalars -> float."""
    arr = np.asarray(x, dtype=np.float64)
    out = np.full(arr.shape, np.nan)
    finite = np.isfinite(arr)
    nz = finite & (arr != 0)
    if nz.any():
        mag = np.floor(np.log10(np.abs(arr[nz])))
        factor = 10.0 ** (digits - 1 - mag)
        out[nz] = np.round(arr[nz] * factor) / factor
    out[finite & (arr == 0)] = 0.0
    if arr.ndim == 0:
        return None if not finite else float(out)
    lst = out.tolist()
    if not finite.all():
        lst = [None if not f else v for v, f in zip(np.ravel(lst), np.ravel(finite))]
    return lst


def _fmt(value, digits=3):
    if value is None:
        return "off"
    if isinstance(value, (tuple, list)):
        return ", ".join(_fmt(v, digits) for v in value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    v = float(value)
    if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e4):
        mant, exp = f"{v:.0e}".split("e")
        return f"{mant}e{int(exp)}"
    return f"{v:.{digits}g}"


def _axis(row, col, ncols):
    k = (row - 1) * ncols + col
    return ("x" if k == 1 else f"x{k}"), ("y" if k == 1 else f"y{k}")


def _on(row, col, ncols):
    xa, ya = _axis(row, col, ncols)
    return {"xaxis": xa, "yaxis": ya}


def _flatten(obj, prefix=""):
    out = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object))
    return a == b


def _set_path(obj, path, value):
    """Set ``obj`` at a plotly attribute path such as ``shapes[2].x0`` or ``xaxis.range``."""
    parts = path.replace("]", "").replace("[", ".").split(".")
    for part in parts[:-1]:
        obj = obj[int(part)] if part.isdigit() else obj.setdefault(part, {})
    last = parts[-1]
    if last.isdigit():
        obj[int(last)] = value
    else:
        obj[last] = value


def _jsonable(value):
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _vline(
    x,
    y0,
    y1,
    on,
    color=GREY,
    name="",
    dash="dot",
    width=1.5,
    showlegend=False,
    hover=None,
):
    return {
        "type": "scatter",
        "mode": "lines",
        "x": [x, x],
        "y": [y0, y1],
        "name": name,
        "line": {"color": color, "dash": dash, "width": width},
        "showlegend": showlegend,
        "hoverinfo": "skip" if hover is None else "text",
        "text": hover,
        **on,
    }


def _legend_square(name, color, legendgroup=None):
    return {
        "type": "scatter",
        "mode": "markers",
        "x": [None],
        "y": [None],
        "name": name,
        "marker": {
            "symbol": "square",
            "size": 14,
            "color": color,
            "line": {"width": 0},
        },
        "legendgroup": legendgroup or name,
        "hoverinfo": "skip",
        "showlegend": True,
    }


def _rect(xref, x0, x1, fill, yref="paper", y0=0.0, y1=1.0):
    return {
        "type": "rect",
        "xref": xref,
        "yref": yref,
        "x0": x0,
        "x1": x1,
        "y0": y0,
        "y1": y1,
        "fillcolor": fill,
        "line": {"width": 0},
        "layer": "below",
    }


def _subplots(rows, cols, titles, height, **kw):
    """A grid of subplots in the book's style. Each figure sets margins that hold its legend, titles and tick labels
    (a legend at the right needs ``r`` of its width): where they do not, plotly widens the margins and draws the
    whole figure a second time, on every draw (tests/browser/test_figure_margins.py checks every explorable)."""
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, **kw)
    fig.update_layout(
        template=TEMPLATE,
        height=height,
        hovermode="closest",
        margin={"l": 60, "r": 20, "t": 70, "b": 150},
        font={"size": 12},
        legend={"font": {"size": 11}},
    )
    fig.update_annotations(font_size=13)
    return fig


# ----------------------------------------------------------------------------------------------------------------
# The explorable spec and the static slider builder
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class Explorable:
    """One explorable: parameters -> data -> traces (+ layout keys), and the static slider grid.

    ``defaults`` holds every parameter ``data`` accepts; ``grid`` lists, in slider order, the parameters the static
    figure exposes and their values (each default must be one of them). ``traces(data)`` returns plain trace dicts
    (same number and order for every parameter value) and ``updates(data)`` a dict of plotly layout paths
    (``"shapes[0].x0"``) whose values change with the parameters.
    """

    name: str
    title: str
    defaults: dict
    grid: dict
    labels: dict
    data: Callable[[dict], dict]
    traces: Callable[[dict], list]
    updates: Callable[[dict], dict]
    layout: Callable[[], dict]
    slider_places: Callable[[dict, list], list] | None = None
    formats: dict = field(default_factory=dict)
    _layout_cache: Any = field(default=None, repr=False)

    def params(self, **overrides) -> dict:
        unknown = set(overrides) - set(self.defaults)
        if unknown:
            raise TypeError(
                f"{self.name}: unknown parameter(s) {sorted(unknown)}; known: {sorted(self.defaults)}"
            )
        return {**self.defaults, **overrides}

    def state(self, **overrides):
        """``(data, traces, layout_updates)`` at the given parameters (others at their defaults)."""
        d = self.data(self.params(**overrides))
        return d, self.traces(d), self.updates(d)

    def base_layout(self) -> dict:
        """The layout as a plain dict (template expanded), computed once."""
        if self._layout_cache is None:
            self._layout_cache = go.Figure(layout=self.layout()).to_plotly_json()[
                "layout"
            ]
        # the template is never updated: share it instead of copying ~10 kB of nested dicts on every update
        return {
            k: v if k == "template" else copy.deepcopy(v)
            for k, v in self._layout_cache.items()
        }

    def figure_dict(self, data=None, **overrides) -> dict:
        """The figure at one parameter point as a plain dict, without sliders (what the live widgets show)."""
        d = self.data(self.params(**overrides)) if data is None else data
        layout = self.base_layout()
        for path, value in self.updates(d).items():
            _set_path(layout, path, value)
        layout.pop("sliders", None)
        return {"data": self.traces(d), "layout": layout}

    def label(self, param, value):
        fmt = self.formats.get(param)
        return fmt(value) if fmt else _fmt(value)

    def figure(self, **grid) -> go.Figure:
        """The static figure: defaults plus one slider per ``grid`` entry (``grid`` overrides ``self.grid``)."""
        grid = {**self.grid, **grid}
        base_data, base_traces, base_updates = self.state()
        flat0 = [_flatten(t) for t in base_traces]
        per_param = {}
        for param, values in grid.items():
            if param not in self.defaults:
                raise TypeError(f"{self.name}: {param!r} is not a parameter")
            values = list(values)
            default = self.defaults[param]
            if not any(_same(_jsonable(v), _jsonable(default)) for v in values):
                raise ValueError(
                    f"{self.name}: the default {param}={default!r} must be one of the grid values"
                )
            states, owned, owned_layout = [], set(), set()
            for value in values:
                _, traces, updates = self.state(**{param: value})
                if len(traces) != len(base_traces):
                    raise ValueError(
                        f"{self.name}: {param}={value!r} changes the number of traces"
                    )
                flats = [_flatten(t) for t in traces]
                for i, (f, f0) in enumerate(zip(flats, flat0)):
                    for key in set(f) | set(f0):
                        if not _same(f.get(key), f0.get(key)):
                            owned.add((i, key))
                for key in set(updates) | set(base_updates):
                    if not _same(updates.get(key), base_updates.get(key)):
                        owned_layout.add(key)
                states.append((value, flats, updates))
            per_param[param] = (states, owned, owned_layout)
        # Each slider rewrites the rectangle (its traces) x (its attributes): no other slider may own a cell of it.
        rects = {}
        for param, (_, owned, _) in per_param.items():
            tr = sorted({i for i, _ in owned})
            at = sorted({a for _, a in owned})
            rects[param] = (tr, at)
        params = list(per_param)
        for a in params:
            tr, at = rects[a]
            cells = {(i, k) for i in tr for k in at}
            for b in params:
                if a != b and (
                    cells & per_param[b][1] or per_param[a][2] & per_param[b][2]
                ):
                    clash = (
                        sorted(cells & per_param[b][1])[:3]
                        or sorted(per_param[a][2] & per_param[b][2])[:3]
                    )
                    raise ValueError(
                        f"{self.name}: sliders {a!r} and {b!r} both change {clash}"
                    )
        layout = self.base_layout()
        for path, value in base_updates.items():
            _set_path(layout, path, value)
        sliders = []
        for param, (states, owned, owned_layout) in per_param.items():
            tr, at = rects[param]
            steps = []
            for value, flats, updates in states:
                data_update = {k: [flats[i].get(k) for i in tr] for k in at}
                layout_update = {k: updates[k] for k in sorted(owned_layout)}
                steps.append(
                    {
                        "method": "update",
                        "label": self.label(param, value),
                        "args": [data_update, layout_update, tr],
                    }
                )
            active = next(
                j
                for j, (v, _, _) in enumerate(states)
                if _same(_jsonable(v), _jsonable(self.defaults[param]))
            )
            sliders.append(
                {
                    "active": active,
                    "steps": steps,
                    "name": param,
                    "currentvalue": {
                        "prefix": f"{self.labels.get(param, param)} = ",
                        "font": {"size": 13},
                        "xanchor": "left",
                    },
                    "font": {"size": 10},
                    "ticklen": 3,
                    "minorticklen": 2,
                    "xanchor": "left",
                    "yanchor": "top",
                }
            )
        places = (self.slider_places or _sliders_below)(layout, params)
        for slider, place in zip(sliders, places):
            slider.update(place)
        layout["sliders"] = sliders
        layout["meta"] = {
            "explorable": self.name,
            "sliders": [
                {"param": p, "values": [_jsonable(v) for v in grid[p]]} for p in params
            ],
        }
        return go.Figure(data=base_traces, layout=layout)


def _sliders_below(layout, params):
    """Sliders side by side below the plotting area (``pad.t`` clears the x-axis titles)."""
    n = max(len(params), 1)
    gap = 0.04
    width = (1.0 - gap * (n - 1)) / n
    return [
        {
            "x": k * (width + gap),
            "len": width,
            "y": 0.0,
            "pad": {"t": 62, "b": 0, "l": 0, "r": 0},
        }
        for k in range(n)
    ]


def figure_html_size(fig) -> int:
    """Bytes of the figure's HTML fragment as the book embeds it (no plotly.js)."""
    if not isinstance(fig, (go.Figure, dict, str, bytes)):
        raise TypeError(
            f"fig must be a plotly Figure, a figure dict or its JSON, got {type(fig).__name__}"
        )
    if isinstance(fig, (str, bytes)):
        try:
            fig = json.loads(fig)
        except ValueError as exc:
            raise ValueError(f"fig is not valid figure JSON ({exc})") from None

    return len(plotly_fragment(fig).encode("utf-8"))


# ----------------------------------------------------------------------------------------------------------------
# 1. Clip platforms
# ----------------------------------------------------------------------------------------------------------------

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
                "x": _n(x),
                "y": _n(y),
                "name": name,
                "line": {"color": color, "width": 2.5},
                "legendgroup": name,
                "showlegend": legend,
                "hovertemplate": "ρ = %{x:.3f}<br>%{y:.3f}<extra></extra>",
                **_on(row, col, 2),
            }
        )

    pos, neg = "A > 0 (per unit |A|)", "A < 0 (per unit |A|)"
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
        text = (
            f"{seq['label'][i]}<br>ρ = {seq['ratio'][i]:.4f}, A = {a:+.4f}<br>objective ρA clipped = "
            f"{seq['objective'][i]:+.4f}<br>d/dρ = {seq['grad'][i]:+.4f}<br>{REGION_TEXT[region]}"
        )
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": _n([seq["ratio"][i]]),
                "y": _n([seq["objective_unit"][i]]),
                "name": f"answer {i}: ρ = {seq['ratio'][i]:.4f}",
                "marker": {
                    "size": 13,
                    "symbol": SEQ_SYMBOLS[i],
                    "color": REGION_COLOR[region],
                    "line": {"color": "white", "width": 1.5},
                },
                "text": [text],
                "hovertemplate": "%{text}<extra></extra>",
                "legendgroup": f"seq{i}",
                **_on(1, col, 2),
            }
        )
    for key in ("platform", "wrong_direction", "capped"):  # 10-12: legend only
        traces.append(_legend_square(REGION_TEXT[key], REGION_LEGEND[key]))
    return traces


def _clip_updates(d):
    b = d["bounds"]
    cap = X_MAX + 0.1 if b["delta"] is None else b["delta"]
    out = {}
    for row in (
        0,
        6,
    ):  # the same six regions in the objective row (shapes 0-5) and the gradient row (6-11)
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
    fig = _subplots(
        2,
        2,
        [
            "A > 0 (a good answer): objective",
            "A < 0 (a bad answer): objective",
            "A > 0: gradient d/dρ",
            "A < 0: gradient d/dρ",
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
            _rect(
                pos[0], 1.2, hi, REGION_FILL["platform"], pos[1]
            ),  # +0 A>0 platform [1+eps_h, .)
            _rect(
                pos[0], lo, 0.8, REGION_FILL["wrong_direction"], pos[1]
            ),  # +1 A>0 wrong    [., 1-eps_l]
            _rect(
                pos[0], hi, hi, REGION_FILL["capped"], pos[1]
            ),  # +2 A>0 capped   [delta, .)
            _rect(
                neg[0], lo, 0.8, REGION_FILL["platform"], neg[1]
            ),  # +3 A<0 platform [., 1-eps_l]
            _rect(
                neg[0], 1.2, hi, REGION_FILL["wrong_direction"], neg[1]
            ),  # +4 A<0 wrong    [1+eps_h, .)
            _rect(neg[0], hi, hi, REGION_FILL["capped"], neg[1]),
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
    fig.update_xaxes(title_text="ratio ρ = π_θ / π_old", row=2)
    fig.update_yaxes(
        range=[0.3, 1.5], row=1, col=1, title_text="min(ρA, clip(ρ)A) / |A|"
    )
    fig.update_yaxes(range=[-2.3, -0.5], row=1, col=2)
    fig.update_yaxes(
        range=[-0.15, 1.15], row=2, col=1, title_text="d objective / dρ / |A|"
    )
    fig.update_yaxes(range=[-1.15, 0.15], row=2, col=2)
    return fig.layout.to_plotly_json()


CLIP = Explorable(
    name="clip_platform",
    title="Clip platforms",
    defaults={"epsilon": 0.2, "epsilon_high": 0.2, "delta": None},
    grid={
        "epsilon": [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4],
        "epsilon_high": [0.1, 0.15, 0.2, 0.25, 0.28, 0.3, 0.35, 0.4],
        "delta": [None, 1.5, 1.75, 2.0, 2.5],
    },
    labels={"epsilon": "ε_low", "epsilon_high": "ε_high", "delta": "δ"},
    data=_clip_data,
    traces=_clip_traces,
    updates=_clip_updates,
    layout=_clip_layout,
)


def clip_platform_figure(**grid) -> go.Figure:
    """GRPO's per-token objective and gradient vs the ratio, A > 0 and A < 0, with eps_low, eps_high, delta sliders.

    Shaded: the flat clip platforms (gradient 0), the wrong-direction regions that are not clipped, and the
    region capped by delta. Markers: the article's four answers (ratios 1.2840, 1.1052, 0.7788, 0.9048) at their
    objective per unit |A|, coloured by region. ``grid`` may override the slider values, e.g. ``delta=[None, 2.0]``.
    """
    return CLIP.figure(**grid)


# ----------------------------------------------------------------------------------------------------------------
# 2. Zero-std groups
# ----------------------------------------------------------------------------------------------------------------


def _zero_data(p):
    return zero_std_data(
        group_size=int(p["group_size"]),
        pass_rate=p["pass_rate"],
        eps=p["eps"],
        n_groups=p["n_groups"],
        n_prompts=p["n_prompts"],
        seed=p["seed"],
    )


def _zero_traces(d):
    g, p, eps = d["params"]["group_size"], d["params"]["pass_rate"], d["params"]["eps"]
    counts, edges = np.histogram(d["batch_pass_rates"], bins=20, range=(0.0, 1.0))
    t = []
    line = lambda x, y, name, color, on, dash=None, legend=True, hover="%{y:.4f}": {  # noqa: E731
        "type": "scatter",
        "mode": "lines",
        "x": _n(x),
        "y": _n(y),
        "name": name,
        "showlegend": legend,
        "line": {"color": color, "width": 2.5, "dash": dash or "solid"},
        "hovertemplate": f"%{{x}}<br>{hover}<extra>{name}</extra>",
        **on,
    }
    dots = lambda x, y, name, color, on, symbol="circle": {  # noqa: E731
        "type": "scatter",
        "mode": "markers",
        "x": _n(x),
        "y": _n(y),
        "name": name,
        "marker": {
            "color": color,
            "size": 7,
            "symbol": symbol,
            "line": {"width": 1, "color": "white"},
        },
        "hovertemplate": f"%{{x}}<br>%{{y:.4f}}<extra>{name}</extra>",
        **on,
    }
    a, b, c, e = _on(1, 1, 2), _on(1, 2, 2), _on(2, 1, 2), _on(2, 2, 2)
    t.append(line(d["p"], d["prob_vs_p"], "pᴳ + (1−p)ᴳ (exact)", BLUE, a))  # 0: G
    # 1: G
    t.append(
        dots(
            d["mc_p"],
            d["mc_vs_p"],
            f"Monte Carlo ({d['n_groups']} groups, seed {d['seed']})",
            BLUE,
            a,
        )
    )
    # 2: p
    t.append(line(d["g"], d["prob_vs_g"], "one prompt: exact", BLUE, b, legend=False))
    t.append(dots(d["g"], d["mc_vs_g"], "one prompt: Monte Carlo", BLUE, b))  # 3: p
    # 4: p
    t.append(
        line(
            d["g"],
            d["batch_expected_vs_g"],
            "batch of prompts: expected fraction",
            ORANGE,
            b,
        )
    )
    # 5: p
    t.append(
        dots(
            d["g"], d["batch_simulated_vs_g"], "batch: one seeded draw", ORANGE, b, "x"
        )
    )
    # 6: p
    t.append(
        {
            "type": "bar",
            "x": _n((edges[:-1] + edges[1:]) / 2),
            "y": counts.tolist(),
            "width": 0.048,
            "name": f"batch pass rates ({d['batch_pass_rates'].size} prompts)",
            "marker": {"color": ORANGE},
            "hovertemplate": "pass rate ≈ %{x:.3f}<br>%{y} prompts<extra></extra>",
            **c,
        }
    )
    # 7: eps
    t.append(
        line(
            d["gap"],
            d["two_sample"],
            "advantage of the better answer in [0, d]",
            PURPLE,
            e,
            hover="A = %{y:.4f}",
        )
    )
    # 8: eps
    t.append(
        {
            "type": "scatter",
            "mode": "markers+text",
            "x": _n(d["gaps"]),
            "y": _n(d["two_sample_at_gaps"]),
            "text": [
                f"d = {_fmt(x)}: {y:.4f}"
                for x, y in zip(d["gaps"], d["two_sample_at_gaps"])
            ],
            "textposition": ["top center", "bottom right", "top right"],
            "name": "the article's gaps",
            "marker": {"color": PURPLE, "size": 9},
            "textfont": {"size": 10},
            "showlegend": False,
            "hovertemplate": "%{text}<extra></extra>",
            **e,
        }
    )
    t.append(_vline(p, 0, 1, a, name="pass rate p", hover=[f"p = {p:g}"] * 2))  # 9: p
    t.append(_vline(g, 0, 1, b, name="group size G", hover=[f"G = {g}"] * 2))  # 10: G
    # 11: eps
    t.append(
        {
            "type": "scatter",
            "mode": "markers",
            "x": _n([2 * eps]),
            "y": [0.5],
            "showlegend": False,
            "marker": {"symbol": "x", "size": 10, "color": "black"},
            "name": "d = 2ϵ",
            "hovertemplate": "d = 2ε: the advantage is halved<extra></extra>",
            **e,
        }
    )
    return t


def _zero_layout():
    fig = _subplots(
        2,
        2,
        [
            "all G rewards equal, vs pass rate p",
            "no signal, vs group size G (at p)",
            "a batch's pass rates (Beta, mean p)",
            "group [0, d]: advantage d / (d + 2ϵ)",
        ],
        height=720,
        vertical_spacing=0.16,
        horizontal_spacing=0.1,
    )
    fig.update_xaxes(title_text="pass rate p", range=[0, 1], row=1, col=1)
    fig.update_yaxes(
        title_text="probability of zero std", range=[0, 1.02], row=1, col=1
    )
    fig.update_xaxes(
        title_text="group size G (log scale)",
        type="log",
        tickvals=[2, 4, 8, 16, 32, 64],
        row=1,
        col=2,
    )
    fig.update_yaxes(
        title_text="fraction with no signal", range=[0, 1.02], row=1, col=2
    )
    fig.update_xaxes(title_text="pass rate", range=[0, 1], row=2, col=1)
    fig.update_yaxes(title_text="prompts", row=2, col=1)
    fig.update_xaxes(title_text="reward gap d (log scale)", type="log", row=2, col=2)
    fig.update_yaxes(
        title_text="advantage of the better answer", range=[0, 1.1], row=2, col=2
    )
    fig.update_layout(
        legend={"orientation": "h", "x": 0, "y": 1.08, "yanchor": "bottom"},
        margin={"t": 140},
    )
    return fig.layout.to_plotly_json()


ZERO_STD = Explorable(
    name="zero_std",
    title="Zero-std groups",
    defaults={
        "group_size": 8,
        "pass_rate": 0.8,
        "eps": 1e-4,
        "n_groups": 2000,
        "n_prompts": 256,
        "seed": 0,
    },
    grid={
        "group_size": [2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64],
        "pass_rate": [round(0.05 * k, 2) for k in range(1, 20)],
        "eps": [1e-8, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1],
    },
    labels={"group_size": "G", "pass_rate": "p", "eps": "ϵ"},
    data=_zero_data,
    traces=_zero_traces,
    updates=lambda d: {},
    layout=_zero_layout,
)


def zero_std_figure(**grid) -> go.Figure:
    """When a group of 0/1 rewards carries no signal: ``p**G + (1-p)**G`` (exact and seeded Monte Carlo) against p
    and against G, the expected fraction of a batch with a spread of difficulties, and the two-sample
    suppression ``d / (d + 2 eps)``. Sliders: G, p, eps."""
    return ZERO_STD.figure(**grid)


# ----------------------------------------------------------------------------------------------------------------
# 3. Group advantages
# ----------------------------------------------------------------------------------------------------------------

#: The static figure's path through affine maps r -> a r + b: shifts, scales, scales small enough for eps to bite,
#: a sign flip.
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
    scale = "" if a == 1 else ("−" if a == -1 else f"{_fmt(a)} ")
    shift = "" if b == 0 else (f" + {_fmt(b)}" if b > 0 else f" − {_fmt(-b)}")
    return f"{scale}r{shift}"


def _adv_data(p):
    a, b = p["transform"]
    return group_advantage_data(rewards=p["rewards"], scale=a, shift=b, eps=p["eps"])


def _adv_traces(d):
    g = d["rewards"].size
    x = list(range(1, g + 1))
    a_on, b_on, c_on = _on(1, 1, 2), _on(1, 2, 2), _on(2, 1, 2)
    t = [
        {
            "type": "bar",
            "x": x,
            "y": _n(d["transformed"], 6),
            "name": "rewards a·r + b",
            "marker": {"color": GREY},
            "hovertemplate": "answer %{x}: %{y:.6g}<extra></extra>",
            **a_on,
        },  # 0
        {
            "type": "scatter",
            "mode": "lines",
            "x": [0.5, g + 0.5],
            "y": _n([d["mean"]] * 2, 6),
            "name": "group mean (the baseline)",
            "line": {"color": "black", "dash": "dash"},
            "hovertemplate": "mean %{y:.6g}<extra></extra>",
            **a_on,
        },  # 1
        {
            "type": "bar",
            "x": x,
            "y": _n(d["advantages_ddof0"]),
            "name": "advantage, ddof 0 (population std)",
            "marker": {"color": BLUE},
            "hovertemplate": "answer %{x}: %{y:.4f}<extra>ddof 0</extra>",
            **b_on,
        },  # 2
        {
            "type": "bar",
            "x": x,
            "y": _n(d["advantages_ddof1"]),
            "name": "advantage, ddof 1 (sample std, TRL)",
            "marker": {"color": ORANGE},
            "hovertemplate": "answer %{x}: %{y:.4f}<extra>ddof 1</extra>",
            **b_on,
        },
    ]  # 3
    dashes = ("dot", "dash", "solid", "dashdot")
    for k, e in enumerate(d["eps_values"]):  # 4..: static
        t.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": _n(d["scales"]),
                "y": _n(d["best_advantage_vs_scale"][e]),
                "name": f"best answer, ϵ = {_fmt(e)}",
                "line": {"color": PURPLE, "dash": dashes[k % 4], "width": 2},
                "hovertemplate": "scale %{x:.2g}: %{y:.4f}<extra>ϵ = "
                + _fmt(e)
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
            "x": [_n(max(abs(a), 1e-7))],
            "y": [_n(d["advantages_ddof0"][d["best_index"]])],
            "name": "this transform (ϵ of the bars)",
            "marker": {"color": BLUE, "size": 12, "symbol": "diamond"},
            "hovertemplate": "|a| = %{x:.2g}: %{y:.4f}<extra></extra>",
            **c_on,
        }
    )
    return t


def _adv_updates(d):
    # the first subplot title (annotation 0) carries the group's statistics
    return {
        "annotations[0].text": (
            f"rewards: mean {d['mean']:.4g}, std {d['std_ddof0']:.3g} (ddof 0), "
            f"{d['std_ddof1']:.3g} (ddof 1)"
        )
    }


def _adv_layout():
    fig = _subplots(
        2,
        2,
        [
            "rewards",
            "advantages (r − mean) / (std + ϵ), ϵ = 1e-4",
            "the best answer's advantage for rewards a·r, vs the scale a",
        ],
        height=720,
        specs=[[{}, {}], [{"colspan": 2}, None]],
        vertical_spacing=0.17,
        horizontal_spacing=0.1,
    )
    fig.update_xaxes(title_text="answer", dtick=1, row=1, col=1)
    fig.update_xaxes(title_text="answer", dtick=1, row=1, col=2)
    fig.update_xaxes(
        title_text="scale a (log scale): ϵ stops mattering once a·std ≫ ϵ",
        type="log",
        row=2,
        col=1,
    )
    fig.update_yaxes(range=[-2.2, 2.2], row=1, col=2)
    fig.update_yaxes(range=[-1.8, 1.8], title_text="advantage", row=2, col=1)
    fig.update_layout(
        barmode="group",
        legend={"orientation": "h", "x": 0, "y": 1.06, "yanchor": "bottom"},
        margin={"t": 150, "b": 145, "r": 30},
    )
    return fig.layout.to_plotly_json()


GROUP_ADVANTAGE = Explorable(
    name="group_advantage",
    title="Group advantages",
    defaults={
        "transform": (1.0, 0.0),
        "rewards": tuple(float(r) for r in ex.REWARD_GROUPS[0]),
        "eps": 1e-4,
    },
    grid={"transform": list(TRANSFORMS)},
    labels={"transform": "rewards"},
    formats={"transform": _transform_label},
    data=_adv_data,
    traces=_adv_traces,
    updates=_adv_updates,
    layout=_adv_layout,
)


def group_advantage_figure(**grid) -> go.Figure:
    """Rewards of the article's group [0.2, 0.8, 1.4, 0.6] under affine maps and their advantages (ddof 0 and 1).

    The slider walks through shifts and scales (no change), scales small enough for eps = 1e-4 to shrink the
    advantages, and a sign flip; the right panel shows where eps breaks scale invariance for four eps values.
    """
    return GROUP_ADVANTAGE.figure(**grid)


# ----------------------------------------------------------------------------------------------------------------
# 4. DPO
# ----------------------------------------------------------------------------------------------------------------


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
    a_on, b_on, c_on, e_on = _on(1, 1, 2), _on(1, 2, 2), _on(2, 1, 2), _on(2, 2, 2)
    t = []
    for k, b in enumerate(d["betas"]):  # 0..7: static
        for key, on in (("loss_by_beta", a_on), ("weight_by_beta", b_on)):
            t.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "x": _n(m),
                    "y": _n(d[key][b]),
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
                "x": _n(m),
                "y": _n(d[key]),
                "name": "selected β",
                "legendgroup": "sel",
                "showlegend": key == "loss",
                "line": {"color": BLUE, "width": 3},
                "hovertemplate": "u = %{x:.2f}: %{y:.4f}<extra>selected β</extra>",
                **on,
            }
        )
    for key, on in (("pair_loss", a_on), ("pair_weight", b_on)):  # 10, 11: beta
        t.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": [_n(d["margin"])],
                "y": [_n(d[key])],
                "name": "the article's pair",
                "legendgroup": "pair",
                "showlegend": key == "pair_loss",
                "marker": {"color": RED, "size": 11, "symbol": "diamond"},
                "hovertemplate": "u = %{x:.3f}: %{y:.4f}<extra>the article's pair</extra>",
                **on,
            }
        )
    lp = d["logps"]
    cats = [
        "log π_θ(y_w)",
        "log π_ref(y_w)",
        "log π_θ(y_l)",
        "log π_ref(y_l)",
        "chosen log-ratio",
        "rejected log-ratio",
        "margin u",
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
            "x": _n(vals),
            "text": [f"{v:+.3f}" for v in vals],
            "textposition": "outside",
            "marker": {"color": [PURPLE, RED, BLUE, GREY, RED, GREY, BLUE]},
            "showlegend": False,
            "name": "log-probs",
            "hovertemplate": "%{y}: %{x:.4f}<extra></extra>",
            "cliponaxis": False,
            **c_on,
        }
    )
    cats2 = [
        "reward r_w = β·chosen",
        "reward r_l = β·rejected",
        "logit β·u",
        "loss −log σ(β·u)",
        "weight σ(−β·u)",
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
            "x": _n(vals2),
            "text": [f"{v:+.4f}" for v in vals2],
            "textposition": "outside",
            "marker": {"color": [ORANGE, GREEN, PURPLE, RED, BLUE]},
            "showlegend": False,
            "name": "β-scaled",
            "hovertemplate": "%{y}: %{x:.4f}<extra></extra>",
            "cliponaxis": False,
            **e_on,
        }
    )
    return t


def _dpo_layout():
    fig = _subplots(
        2,
        2,
        [
            "loss −log σ(β u)",
            "gradient weight σ(−β u)",
            "the article's pair: log-probs",
            "scaled by β",
        ],
        height=760,
        vertical_spacing=0.2,
        horizontal_spacing=0.22,
    )
    fig.update_xaxes(title_text="log-ratio margin u", row=1)
    fig.update_yaxes(range=[0, 6], row=1, col=1)
    fig.update_yaxes(range=[0, 1.02], row=1, col=2)
    fig.update_xaxes(range=[-3.6, 1.2], title_text="nats", row=2, col=1)
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
    """DPO's loss and gradient weight vs the log-ratio margin for several beta (slider: the highlighted beta), and
    the article's pair decomposed into its four log-probs, log-ratios, implicit rewards, logit, loss and weight."""
    return DPO.figure(**grid)


# ----------------------------------------------------------------------------------------------------------------
# 5. KL estimators
# ----------------------------------------------------------------------------------------------------------------


def _kl_data(p):
    return kl_estimator_data(
        delta=p["delta"], mix=p["mix"], p=p["p"], q=p["q"], old=p["old"]
    )


def _kl_traces(d):
    a_on, b_on, c_on = _on(1, 1, 2), _on(1, 2, 2), _on(2, 1, 2)
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
                "x": _n(d["deltas"]),
                "y": _n(d[key]),
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
                "x": [_n(dl)],
                "y": [_n(d["at_delta"][key])],
                "name": f"{key} at Δ",
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
    acts = ["action 0", "action 1", "action 2"]
    for key, color, name in (
        ("p", BLUE, "π_θ = p (current)"),
        ("q", GREY, "π_ref = q"),
        ("sampling", ORANGE, "sampling μ = (1−τ)·p + τ·π_old"),
    ):  # 6,7 static; 8 mix
        t.append(
            {
                "type": "bar",
                "x": acts,
                "y": _n(d[key]),
                "name": name,
                "marker": {"color": color},
                "hovertemplate": "%{x}: %{y:.3f}<extra>" + name + "</extra>",
                **b_on,
            }
        )
    for key, color, name in (
        ("biased_vs_mix", RED, "E_μ[k3] (bare: biased)"),
        ("corrected_vs_mix", GREEN, "E_μ[(p/μ)·k3] (ratio-corrected)"),
    ):  # 9,10 static
        t.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": _n(d["mixes"]),
                "y": _n(d[key]),
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
            "y": _n([d["exact"]] * 2),
            "name": "KL(p‖q) exact",
            "line": {"color": "black", "dash": "dot"},
            "hovertemplate": "%{y:.4f}<extra>exact KL</extra>",
            **c_on,
        }
    )
    # 12 mix
    t.append(
        {
            "type": "scatter",
            "mode": "markers",
            "x": _n([d["params"]["mix"]] * 2),
            "y": _n([d["biased"], d["corrected"]]),
            "name": "at this t",
            "showlegend": False,
            "marker": {"color": [RED, GREEN], "size": 12, "symbol": "diamond"},
            "text": [f"biased {d['biased']:.4f}", f"corrected {d['corrected']:.4f}"],
            "hovertemplate": "%{text}<extra></extra>",
            **c_on,
        }
    )
    return t


def _kl_layout():
    fig = _subplots(
        2,
        2,
        [
            "k1, k2, k3 at one sampled token",
            "p, q and the sampling distribution μ",
            "average of k3 over tokens drawn from μ, vs the mix τ",
        ],
        height=720,
        specs=[[{}, {}], [{"colspan": 2}, None]],
        vertical_spacing=0.17,
        horizontal_spacing=0.1,
    )
    fig.update_xaxes(title_text="Δ = log π_ref − log π_θ", row=1, col=1)
    fig.update_yaxes(range=[-3.2, 8], row=1, col=1)
    fig.update_yaxes(range=[0, 0.8], title_text="probability", row=1, col=2)
    fig.update_xaxes(
        title_text="τ: μ = (1 − τ)·p + τ·π_old (τ = 0: on-policy; τ = 1: the old policy)",
        row=2,
        col=1,
    )
    fig.update_yaxes(range=[0, 1.25], title_text="nats", row=2, col=1)
    fig.update_layout(
        barmode="group",
        legend={"orientation": "h", "x": 0, "y": 1.06, "yanchor": "bottom"},
        margin={"t": 130},
    )
    return fig.layout.to_plotly_json()


KL = Explorable(
    name="kl_estimator",
    title="KL estimators",
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
    """k1, k2, k3 vs Delta (slider: a marked Delta), and the article's off-policy example p = [0.7, 0.2, 0.1],
    q = [0.2, 0.3, 0.5], old = [0.3, 0.3, 0.4]: sampling from ``mu = (1-tau) p + tau old`` biases the bare k3 average;
    weighting by p/mu restores KL(p || q) (slider: tau)."""
    return KL.figure(**grid)


# ----------------------------------------------------------------------------------------------------------------
# 6. The bandit
# ----------------------------------------------------------------------------------------------------------------

BANDIT_PARAMS = ("group_size", "beta", "lr", "epsilon", "seed")
BANDIT_LABELS = {
    "group_size": "G",
    "beta": "β",
    "lr": "lr",
    "epsilon": "ε",
    "seed": "seed",
}
BANDIT_DEFAULTS = {
    "group_size": 32,
    "beta": 0.02,
    "lr": 0.18,
    "epsilon": 0.2,
    "seed": 7,
    "steps": 80,
}
ACTION_NAMES = [f"a{i} (reward {r:g})" for i, r in enumerate(xp.DEFAULT_REWARDS)]
_BANDIT_PANELS = ((1, 1), (1, 2), (1, 3), (2, 1), (2, 2))


@lru_cache(maxsize=512)
def _bandit_cached(items):
    return bandit_data(**dict(items))


def _bandit_run(**params):
    """:func:`bandit_data`, memoised (runs are seeded, so equal parameters give equal trajectories)."""
    return _bandit_cached(tuple(sorted(params.items())))


def _bandit_panel_data(p):
    # Panel k varies parameter k alone; the others stay at the defaults (so each slider owns one panel).
    return {k: _bandit_run(**{**BANDIT_DEFAULTS, k: p[k]}) for k in BANDIT_PARAMS}


def _bandit_lines(d, on, showlegend):
    return [
        {
            "type": "scatter",
            "mode": "lines",
            "x": d["step"].tolist(),
            "y": _n(d["probs"][:, a]),
            "name": ACTION_NAMES[a],
            "legendgroup": f"a{a}",
            "showlegend": showlegend,
            "line": {"color": ACTION_COLORS[a], "width": 3 if a == d["best"] else 1.8},
            "hovertemplate": "step %{x}: %{y:.4f}<extra>"
            + ACTION_NAMES[a]
            + "</extra>",
            **on,
        }
        for a in range(d["probs"].shape[1])
    ]


def _bandit_traces(panels):
    t = []
    for k, (name, (row, col)) in enumerate(zip(BANDIT_PARAMS, _BANDIT_PANELS)):
        t.extend(_bandit_lines(panels[name], _on(row, col, 3), showlegend=k == 0))
    return t


def _bandit_layout():
    titles = [f"vary {BANDIT_LABELS[k]}" for k in BANDIT_PARAMS]
    fig = _subplots(
        2,
        3,
        titles + [""],
        height=820,
        vertical_spacing=0.3,
        horizontal_spacing=0.07,
        shared_yaxes=True,
    )
    fig.update_yaxes(range=[0, 1], title_text="probability", col=1)
    fig.update_yaxes(range=[0, 1])
    fig.update_xaxes(title_text="step")
    fig.update_xaxes(visible=False, row=2, col=3)
    fig.update_yaxes(visible=False, row=2, col=3)
    fig.update_layout(
        legend={
            "x": 0.72,
            "y": 0.28,
            "xanchor": "left",
            "yanchor": "top",
            "font": {"size": 12},
            "title": {"text": "action (reward)"},
        },
        margin={"t": 80, "b": 130},
        title={
            "text": "each panel varies one knob; the others stay at G = 32, β = 0.02, lr = 0.18, "
            "ε = 0.2, seed 7",
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
        xa, ya = _axis(row, col, 3)
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
    title="The group bandit",
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
    """The four-action group bandit (80 steps): probability trajectories, one panel per knob (G, beta, lr, eps,
    seed), each varied alone from the chapter-4 run. 34 precomputed runs."""
    return BANDIT.figure(**grid)


# ----------------------------------------------------------------------------------------------------------------
# 7. Memory ledger
# ----------------------------------------------------------------------------------------------------------------

COMPONENT_COLORS = {
    "policy weights": "#1f77b4",
    "policy gradients": "#aec7e8",
    "policy fp32 master weights": "#9467bd",
    "policy optimizer states": "#c5b0d5",
    "critic (trainable state)": "#d62728",
    "reference (frozen)": "#7f7f7f",
    "reward model (frozen)": "#bcbd22",
}
RECIPES = tuple(xp.MEMORY_RECIPES)


def _memory_traces_for(d, visible=True, unit="GB"):
    scale = GB if unit == "GB" else GiB
    other, other_scale = ("GiB", GiB) if unit == "GB" else ("GB", GB)
    t = []
    for comp in xp.MEMORY_COMPONENTS:
        b = np.asarray(d["components"][comp], dtype=np.float64)
        t.append(
            {
                "type": "bar",
                "x": d["labels"],
                "y": _n(b / scale, 5),
                "name": d["component_labels"][comp],
                "legendgroup": comp,
                "visible": visible,
                "marker": {"color": COMPONENT_COLORS[comp]},
                "customdata": _n(b / other_scale, 5),
                "hovertemplate": f"%{{x}}<br>{d['component_labels'][comp]}: %{{y:.4g}} {unit} "
                f"(%{{customdata:.4g}} {other})<extra></extra>",
            }
        )
    tot = np.asarray(d["totals_bytes"], dtype=np.float64)
    t.append(
        {
            "type": "scatter",
            "mode": "text",
            "x": d["labels"],
            "y": _n(tot / scale, 5),
            "visible": visible,
            "text": [
                f"{x / scale:.4g} {unit} = {x / other_scale:.4g} {other}" for x in tot
            ],
            "textposition": "top center",
            "showlegend": False,
            "name": "total",
            "hoverinfo": "skip",
            "textfont": {"size": 12},
        }
    )
    # an invisible point above the tallest bar, so the y autorange leaves room for the total labels
    t.append(
        {
            "type": "scatter",
            "mode": "markers",
            "x": d["labels"][:1],
            "y": _n([tot.max() / scale * 1.12], 5),
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
            int(round(p["n_billion"] * 1e9)), **xp.MEMORY_RECIPES[name]
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
            "text": "logical training state (no activations, no sharding)",
            "font": {"size": 14},
        },
        yaxis={"title": {"text": "GB (10⁹ bytes)"}, "rangemode": "tozero"},
        legend={"x": 1.02, "y": 1, "font": {"size": 11}},
        margin={"l": 70, "r": 310, "t": 60, "b": 150},
    )
    return fig.layout.to_plotly_json()


MEMORY = Explorable(
    name="memory_ledger",
    title="Memory ledger",
    defaults={"n_billion": 7.0, "recipe": RECIPES[0]},
    grid={
        "n_billion": [0.5, 1.0, 1.5, 3.0, 7.0, 8.0, 13.0, 14.0, 32.0, 70.0],
        "recipe": list(RECIPES),
    },
    labels={"n_billion": "parameters (billions)", "recipe": "precision + optimizer"},
    formats={
        "n_billion": lambda v: f"{v:g}B",
        "recipe": lambda v: xp.MEMORY_RECIPE_SHORT[v],
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
    """Stacked GB of logical training state for PPO (actor + critic), GRPO and DPO; sliders: model size and the
    precision/optimizer recipe. Default: the article's 7B with mixed-precision AdamW (112 GB of trainable state per
    trained model; PPO 252 GB, GRPO 140 GB and DPO 126 GB, with a bf16 reference and, for PPO and GRPO, a same-size
    reward model)."""
    return MEMORY.figure(**grid)


# Live-only specs (no static grid): the widgets' single-panel bandit and single-recipe ledger.


def _bandit_live_layout():
    fig = go.Figure()
    fig.update_layout(
        template=TEMPLATE,
        height=440,
        title={"text": "", "font": {"size": 13}},
        xaxis={"title": {"text": "step"}},
        yaxis={"title": {"text": "probability"}, "range": [0, 1]},
        legend={"title": {"text": "action (reward)"}},
        margin={"l": 60, "r": 175, "t": 50, "b": 60},
    )
    return fig.layout.to_plotly_json()


BANDIT_LIVE = Explorable(
    name="bandit_live",
    title="The group bandit (live)",
    defaults=dict(BANDIT_DEFAULTS),
    grid={},
    labels=BANDIT_LABELS,
    data=lambda p: _bandit_run(**p),
    traces=lambda d: _bandit_lines(d, {}, showlegend=True),
    updates=lambda d: {
        "title.text": "G = {group_size}, β = {beta:g}, lr = {lr:g}, ε = {epsilon:g}, seed {seed}, "
        "{steps} steps".format(**d["params"])
    },
    layout=_bandit_live_layout,
)


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
    title="Memory ledger (live)",
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
        "yaxis.title.text": "GB (10⁹ bytes)" if d["unit"] == "GB" else "GiB (2³⁰ bytes)"
    },
    layout=_memory_layout,
)


#: Every explorable's spec, by name (the figure functions above call ``spec.figure()``).
EXPLORABLES = {
    spec.name: spec
    for spec in (CLIP, ZERO_STD, GROUP_ADVANTAGE, DPO, KL, BANDIT, MEMORY)
}
FIGURES = {
    "clip_platform": clip_platform_figure,
    "zero_std": zero_std_figure,
    "group_advantage": group_advantage_figure,
    "dpo": dpo_figure,
    "kl_estimator": kl_estimator_figure,
    "bandit": bandit_figure,
    "memory_ledger": memory_ledger_figure,
}


#: The plotly config of every figure in the book (built site, live widgets).
PLOTLY_CONFIG = {
    "responsive": True,
    "displaylogo": False,
    "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"],
}


def plotly_fragment(figure, div_id: str | None = None) -> str:
    """HTML for one figure (dict, JSON string or ``go.Figure``) without plotly.js: ``<div>`` + ``Plotly.newPlot``."""
    import plotly.io as pio

    import hashlib

    if isinstance(figure, (str, bytes)):
        figure = json.loads(figure)
    if hasattr(figure, "to_plotly_json"):
        figure = figure.to_plotly_json()
    if div_id is None:
        digest = hashlib.sha1(
            json.dumps(figure, sort_keys=True, default=str).encode()
        ).hexdigest()
        div_id = f"plotly-{digest[:12]}"
    config = {**PLOTLY_CONFIG, **(figure.get("config") or {})}
    return pio.to_html(
        figure,
        config=config,
        include_plotlyjs=False,
        include_mathjax=False,
        full_html=False,
        validate=False,
        div_id=div_id,
    )
