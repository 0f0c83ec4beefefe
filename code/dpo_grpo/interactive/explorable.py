"""The explorable framework: a spec (parameters -> data -> plotly traces) and the static
slider figure built from it.

An :class:`Explorable` names its parameters and their defaults, computes its data
(NumPy), draws that data as plain trace dicts and lays out the figure.
:meth:`Explorable.figure` precomputes every state of a modest grid of parameter values
into ``layout.sliders`` (rounded numbers, so a figure stays well under the 1.5 MB page
budget): the sliders work in the static HTML book with no kernel, and the same figure
shows in Jupyter and Colab. :meth:`Explorable.figure_dict` is one state without sliders,
what the live widgets (:mod:`dpo_grpo.interactive.widgets`) show. Each explorable is a
module of its own beside this one (``clip_platform``, ``zero_std``, ``group_advantage``,
``dpo_margin``, ``kl_estimator``, ``bandit``, ``memory_ledger``, ``length_norm``, ...),
holding its spec, its ``*_figure()`` and its ``*_widget()``;
:mod:`dpo_grpo.interactive.registry` lists them by name.

Embedding one in a chapter notebook::

    from dpo_grpo.interactive import clip_platform
    # the static figure, its sliders work in the HTML
    clip_platform.clip_platform_figure()

and, in a code cell whose metadata has ``"tags": ["remove-cell", "skip-execution"]``
(hidden from the HTML and not run by the build, since embedded widget state cannot call
Python; it runs when a reader executes the notebook in Jupyter or Colab)::

    clip_platform.clip_platform_widget()

How the static sliders stay exact. Plotly sliders are independent: a step cannot read
the other sliders. Every figure is therefore laid out so that each trace attribute and
each layout property depends on one slider at most (for instance the A < 0 objective is
drawn as two traces, left of rho = 1 owned by eps_low and right of it by delta);
:meth:`Explorable.figure` verifies this while building the steps, so any combination of
slider positions shows exactly ``data`` at those parameters. A slider's step updates
only the traces and layout keys it owns.

In the book build the figures reach the HTML through the book's MIME renderer
(``book/_ext/dpo_grpo_book``) as :func:`plotly_fragment` writes them: the figure's JSON,
drawn by the book's script once plotly.js has loaded after the text (once per page,
from ``_static/vendor/``); ``import dpo_grpo`` does not import plotly.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..i18n import language, plotly_font, tr

__all__ = [
    "Explorable",
    "PAGE_BUDGET_BYTES",
    "PLOTLY_CONFIG",
    "TEMPLATE",
    "book_subplots",
    "figure_html_size",
    "flatten_attributes",
    "format_value",
    "jsonable",
    "legend_square_trace",
    "on_subplot",
    "plotly_fragment",
    "rect_shape",
    "round_sig",
    "same_value",
    "set_layout_path",
    "sliders_below",
    "subplot_axis_names",
    "vline_trace",
]

#: Upper bound on the HTML of one chapter page (all its figures together).
PAGE_BUDGET_BYTES = 1_500_000
#: The plotly template of every figure.
TEMPLATE = "plotly_white"
#: The book's colours (matplotlib's tab10).
BLUE, RED, GREEN, PURPLE, ORANGE, GREY = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#7f7f7f",
)


# --------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------


def round_sig(x, digits=4):
    """Round to ``digits`` significant digits; NaN/inf -> None. Arrays -> lists, scalars
    -> float."""
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


def format_value(value, digits=3):
    """A slider label: ``None`` -> "off", ints as they are, floats to ``digits``
    significant digits (``1e-4`` style when tiny or huge), sequences joined by ", "."""
    if value is None:
        return tr("off")
    if isinstance(value, (tuple, list)):
        return ", ".join(format_value(v, digits) for v in value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    v = float(value)
    if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e4):
        mant, exp = f"{v:.0e}".split("e")
        return f"{mant}e{int(exp)}"
    return f"{v:.{digits}g}"


def subplot_axis_names(row, col, ncols):
    """Plotly's axis names of subplot (row, col) in a grid of ``ncols`` columns:
    ``("x", "y")``, ``("x2", "y2")``, ... (1-based, row-major)."""
    k = (row - 1) * ncols + col
    return ("x" if k == 1 else f"x{k}"), ("y" if k == 1 else f"y{k}")


def on_subplot(row, col, ncols):
    """The keys that put a trace on subplot (row, col):
    ``{"xaxis": ..., "yaxis": ...}``."""
    xa, ya = subplot_axis_names(row, col, ncols)
    return {"xaxis": xa, "yaxis": ya}


def flatten_attributes(obj, prefix=""):
    """A nested dict as one level of dotted paths: ``{"line": {"color": c}}`` ->
    ``{"line.color": c}`` (how slider steps and widget updates name trace
    attributes)."""
    out = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_attributes(value, name + "."))
        else:
            out[name] = value
    return out


def same_value(a, b):
    """``a == b``, elementwise for arrays (True when every element matches)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object))
    return a == b


def set_layout_path(obj, path, value):
    """Set ``obj`` at a plotly attribute path such as ``shapes[2].x0`` or
    ``xaxis.range``."""
    parts = path.replace("]", "").replace("[", ".").split(".")
    for part in parts[:-1]:
        obj = obj[int(part)] if part.isdigit() else obj.setdefault(part, {})
    last = parts[-1]
    if last.isdigit():
        obj[int(last)] = value
    else:
        obj[last] = value


def jsonable(value):
    """``value`` with tuples as lists and NumPy scalars as Python numbers (as in the
    figure's JSON)."""
    if isinstance(value, tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def vline_trace(
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
    """A vertical line from (x, y0) to (x, y1) as a scatter trace on the subplot ``on``
    (:func:`on_subplot`); ``hover`` text, else no hover."""
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


def legend_square_trace(name, color, legendgroup=None):
    """A trace that draws nothing but a square of ``color`` in the legend (for shaded
    regions)."""
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


def rect_shape(xref, x0, x1, fill, yref="paper", y0=0.0, y1=1.0):
    """A borderless filled rectangle shape from x0 to x1 (full height by default), below
    the traces."""
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


def book_subplots(rows, cols, titles, height, **kw):
    """A ``rows`` x ``cols`` plotly figure of subplots in the book's style. Each figure
    sets margins that hold its legend, titles and tick labels (a legend at the right
    needs ``r`` of its width): where they do not, plotly widens the margins and draws
    the whole figure a second time, on every draw (tests/browser/test_figure_margins.py
    checks every explorable)."""
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, **kw)
    fig.update_layout(
        template=TEMPLATE,
        height=height,
        hovermode="closest",
        margin={"l": 60, "r": 20, "t": 70, "b": 150},
        font={"size": 12},
        legend={"font": {"size": 11}},
    )
    # subplot titles a few pixels above their plot, clear of its top tick label
    fig.update_annotations(font_size=13, yshift=6)
    return fig


# --------------------------------------------------------------------------------------
# The explorable spec and the static slider builder
# --------------------------------------------------------------------------------------


@dataclass
class Explorable:
    """One explorable: parameters -> data -> traces (+ layout keys), and the static
    slider grid.

    ``defaults`` holds every parameter ``data`` accepts; ``grid`` lists, in slider
    order, the parameters the static figure exposes and their values (each default must
    be one of them). ``traces(data)`` returns plain trace dicts (same number and order
    for every parameter value) and ``updates(data)`` a dict of plotly layout paths
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
                f"{self.name}: unknown parameter(s) {sorted(unknown)}; known: "
                f"{sorted(self.defaults)}"
            )
        return {**self.defaults, **overrides}

    def state(self, **overrides):
        """``(data, traces, layout_updates)`` at the given parameters (others at their
        defaults)."""
        d = self.data(self.params(**overrides))
        return d, self.traces(d), self.updates(d)

    def base_layout(self) -> dict:
        """The layout as a plain dict (template expanded), computed once per language
        (:mod:`dpo_grpo.i18n`); in Chinese its font family is a CJK stack."""
        lang = language()
        if self._layout_cache is None:
            self._layout_cache = {}
        if lang not in self._layout_cache:
            layout = go.Figure(layout=self.layout()).to_plotly_json()["layout"]
            if plotly_font():
                layout["font"] = {**layout.get("font", {}), **plotly_font()}
            self._layout_cache[lang] = layout
        # the template is never updated: share it instead of copying ~10 kB of nested
        # dicts on every update
        return {
            k: v if k == "template" else copy.deepcopy(v)
            for k, v in self._layout_cache[lang].items()
        }

    def figure_dict(self, data=None, **overrides) -> dict:
        """The figure at one parameter point as a plain dict, without sliders (what the
        live widgets show)."""
        d = self.data(self.params(**overrides)) if data is None else data
        layout = self.base_layout()
        for path, value in self.updates(d).items():
            set_layout_path(layout, path, value)
        layout.pop("sliders", None)
        return {"data": self.traces(d), "layout": layout}

    def label(self, param, value):
        fmt = self.formats.get(param)
        return fmt(value) if fmt else format_value(value)

    def figure(self, **grid) -> go.Figure:
        """The static figure: defaults plus one slider per ``grid`` entry (``grid``
        overrides ``self.grid``)."""
        grid = {**self.grid, **grid}
        base_data, base_traces, base_updates = self.state()
        flat0 = [flatten_attributes(t) for t in base_traces]
        per_param = {}
        for param, values in grid.items():
            if param not in self.defaults:
                raise TypeError(f"{self.name}: {param!r} is not a parameter")
            values = list(values)
            default = self.defaults[param]
            if not any(same_value(jsonable(v), jsonable(default)) for v in values):
                raise ValueError(
                    f"{self.name}: the default {param}={default!r} must be one of the "
                    "grid values"
                )
            states, owned, owned_layout = [], set(), set()
            for value in values:
                _, traces, updates = self.state(**{param: value})
                if len(traces) != len(base_traces):
                    raise ValueError(
                        f"{self.name}: {param}={value!r} changes the number of traces"
                    )
                flats = [flatten_attributes(t) for t in traces]
                for i, (f, f0) in enumerate(zip(flats, flat0)):
                    for key in set(f) | set(f0):
                        if not same_value(f.get(key), f0.get(key)):
                            owned.add((i, key))
                for key in set(updates) | set(base_updates):
                    if not same_value(updates.get(key), base_updates.get(key)):
                        owned_layout.add(key)
                states.append((value, flats, updates))
            per_param[param] = (states, owned, owned_layout)
        # Each slider rewrites the rectangle (its traces) x (its attributes): no other
        # slider may own a cell of it.
        rects = {}
        for param, (_, owned, _) in per_param.items():
            owned_tr = sorted({i for i, _ in owned})
            at = sorted({a for _, a in owned})
            rects[param] = (owned_tr, at)
        params = list(per_param)
        for a in params:
            owned_tr, at = rects[a]
            cells = {(i, k) for i in owned_tr for k in at}
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
            set_layout_path(layout, path, value)
        sliders = []
        for param, (states, owned, owned_layout) in per_param.items():
            owned_tr, at = rects[param]
            steps = []
            for value, flats, updates in states:
                data_update = {k: [flats[i].get(k) for i in owned_tr] for k in at}
                layout_update = {k: updates[k] for k in sorted(owned_layout)}
                steps.append(
                    {
                        "method": "update",
                        "label": self.label(param, value),
                        "args": [data_update, layout_update, owned_tr],
                    }
                )
            active = next(
                j
                for j, (v, _, _) in enumerate(states)
                if same_value(jsonable(v), jsonable(self.defaults[param]))
            )
            sliders.append(
                {
                    "active": active,
                    "steps": steps,
                    "name": param,
                    "currentvalue": {
                        "prefix": f"{tr(self.labels.get(param, param))} = ",
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
        places = (self.slider_places or sliders_below)(layout, params)
        for slider, place in zip(sliders, places):
            slider.update(place)
        layout["sliders"] = sliders
        layout["meta"] = {
            "explorable": self.name,
            "sliders": [
                {"param": p, "values": [jsonable(v) for v in grid[p]]} for p in params
            ],
        }
        return go.Figure(data=base_traces, layout=layout)


def sliders_below(layout, params):
    """Sliders side by side below the plotting area (``pad.t`` clears the x-axis
    titles)."""
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
            "fig must be a plotly Figure, a figure dict or its JSON, got "
            f"{type(fig).__name__}"
        )
    if isinstance(fig, (str, bytes)):
        try:
            fig = json.loads(fig)
        except ValueError as exc:
            raise ValueError(f"fig is not valid figure JSON ({exc})") from None

    return len(plotly_fragment(fig).encode("utf-8"))


#: The plotly config of every figure in the book (built site, live widgets).
PLOTLY_CONFIG = {
    "responsive": True,
    "displaylogo": False,
    "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"],
}


def plotly_fragment(figure, div_id: str | None = None) -> str:
    """HTML for one figure (dict, JSON string or ``go.Figure``) as the built book embeds
    it: an empty ``div.plotly-graph-div`` as tall as the figure, and the figure's JSON
    in a ``<script type="application/json">`` beside it, inside ``div.book-plotly``. The
    book's script (``book/_ext/dpo_grpo_book/static/book.js``) loads plotly.js after the
    text is drawn and draws the figure when it nears the screen, laid out for the
    width it gets; no plotly.js, no inline ``Plotly.newPlot``, no CDN."""
    import hashlib

    import plotly.io as pio

    if not isinstance(figure, (str, bytes)):
        figure = pio.to_json(figure, validate=False)  # numpy arrays included
    figure = json.loads(figure)
    if div_id is None:
        digest = hashlib.sha1(
            json.dumps(figure, sort_keys=True, default=str).encode()
        ).hexdigest()
        div_id = f"plotly-{digest[:12]}"
    layout = figure.get("layout") or {}
    height = int(layout.get("height") or 450)
    spec = {
        "data": figure.get("data") or [],
        "layout": layout,
        "config": {**PLOTLY_CONFIG, **(figure.get("config") or {})},
    }
    # "</" would end the script element early
    payload = json.dumps(spec, separators=(",", ":"), ensure_ascii=False).replace(
        "</", "<\\/"
    )
    return (
        f'<div class="book-plotly" style="min-height:{height}px">'
        f'<div id="{div_id}" class="plotly-graph-div" '
        f'style="height:{height}px;width:100%"></div>'
        f'<script type="application/json" class="book-plotly-json">{payload}</script>'
        "</div>"
    )
