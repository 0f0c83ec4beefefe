"""The live-widget framework: ipywidgets controls that recompute an explorable's figure
in the kernel.

Each explorable module's ``*_widget()`` (``clip_platform.clip_platform_widget()``, ...)
returns an :class:`ExplorableWidget` (an ``ipywidgets.VBox``): core ipywidgets controls
plus the figure, shown in one of two ways (:func:`live_figure_mode`):

- ``"figurewidget"``: a ``plotly.graph_objects.FigureWidget`` updated in place (one
  ``Plotly.update`` of the values that changed). Chosen where it works without set-up:
  plotly >= 6 with ``anywidget`` installed, outside Colab (JupyterLab 4, Notebook 7, VS
  Code).
- ``"output"``: an ``Output`` widget whose figure is replaced after every change. Core
  widgets only, so it works in every frontend with ipywidgets 7.6+ or 8, Colab included
  (where a FigureWidget needs Colab's custom widget manager); Colab draws the figure
  with its own plotly renderer, Jupyter with plotly's mimetype renderer, which draws a
  new figure three times (a plot, a redraw and an offscreen copy for a cached PNG):
  slower than the in-place update in JupyterLab 4 (``bench/bench_frontend_draw.py``
  measures both in one run).

``DPO_GRPO_LIVE_FIGURE=output`` or ``=figurewidget`` overrides the choice. Sliders use
``continuous_update=False``: the figure is recomputed when a slider is released.

In a chapter notebook, put the UI in a code cell tagged ``remove-cell`` and
``skip-execution`` (it is hidden from the static HTML, where no kernel could answer its
callbacks, and not run by the build; the precomputed figure from the module's
``*_figure()`` is the static version)::

    from dpo_grpo.interactive import zero_std
    zero_std.zero_std_widget()

Programmatic use (tests, benchmarks): ``ui.controls[name].value = x`` runs the callback
synchronously; ``ui.figure`` is the plotly figure dict now shown, ``ui.data`` the
:mod:`dpo_grpo.interactive.explorables` data behind it, ``ui.last_update_ms`` how long
the recompute took, ``ui.error`` the last input error (or ``None``), ``ui.view`` the
widget that shows the figure (the ``Output`` or the ``FigureWidget``). Outside a kernel
the ``Output`` shows nothing. ``bench/bench_widgets.py`` measures the latency of a
slider move, ``bench/bench_frontend_draw.py`` the browser's redraw.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time

import ipywidgets as W

from ..i18n import tr
from .explorable import PLOTLY_CONFIG, flatten_attributes, same_value

__all__ = [
    "ExplorableWidget",
    "display_data",
    "live_figure_mode",
    "in_kernel",
    "LIVE_FIGURE_MODES",
    "CONTROL_STYLE",
    "float_slider",
    "log_slider",
    "int_slider",
    "parse_numbers",
]

#: The style of every control: the description takes the width it needs.
CONTROL_STYLE = {"description_width": "initial"}
_WIDE = W.Layout(width="340px")


def in_kernel() -> bool:
    """Whether this code runs in a Jupyter kernel (where an ``Output`` can show a
    figure)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - ipywidgets depends on IPython
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


LIVE_FIGURE_MODES = ("output", "figurewidget")


def live_figure_mode() -> str:
    """How the live UIs show their figure: ``DPO_GRPO_LIVE_FIGURE`` if set, else
    ``"figurewidget"`` where a plotly FigureWidget works without set-up (plotly >= 6 and
    ``anywidget`` installed, not in Colab), else ``"output"``."""
    forced = os.environ.get("DPO_GRPO_LIVE_FIGURE", "").strip().lower()
    if forced:
        if forced not in LIVE_FIGURE_MODES:
            raise ValueError(
                f"DPO_GRPO_LIVE_FIGURE must be one of {LIVE_FIGURE_MODES}, got "
                f"{forced!r}"
            )
        return forced
    import plotly

    if "google.colab" in sys.modules or int(plotly.__version__.split(".")[0]) < 6:
        return "output"
    return (
        "figurewidget"
        if importlib.util.find_spec("anywidget") is not None
        else "output"
    )


def float_slider(description, value, lo, hi, step, fmt=".2f"):
    """A ``FloatSlider`` from ``lo`` to ``hi`` that updates on release."""
    return W.FloatSlider(
        value=value,
        min=lo,
        max=hi,
        step=step,
        description=description,
        readout_format=fmt,
        continuous_update=False,
        style=CONTROL_STYLE,
        layout=_WIDE,
    )


def log_slider(description, value, lo_exp, hi_exp, step=0.25, fmt=".2g"):
    """A ``FloatLogSlider`` from ``10**lo_exp`` to ``10**hi_exp`` that updates on
    release."""
    return W.FloatLogSlider(
        value=value,
        base=10,
        min=lo_exp,
        max=hi_exp,
        step=step,
        description=description,
        readout_format=fmt,
        continuous_update=False,
        style=CONTROL_STYLE,
        layout=_WIDE,
    )


def int_slider(description, value, lo, hi, step=1):
    """An ``IntSlider`` from ``lo`` to ``hi`` that updates on release."""
    return W.IntSlider(
        value=value,
        min=lo,
        max=hi,
        step=step,
        description=description,
        continuous_update=False,
        style=CONTROL_STYLE,
        layout=_WIDE,
    )


def parse_numbers(text, name):
    """The numbers of a text box, separated by commas or semicolons, as a tuple of
    floats (ValueError naming the box ``name`` otherwise)."""
    try:
        values = tuple(
            float(x) for x in str(text).replace(";", ",").split(",") if x.strip()
        )
    except ValueError:
        raise ValueError(
            f"{name}: write numbers separated by commas, got {text!r}"
        ) from None
    return values


class ExplorableWidget(W.VBox):
    """Controls + the figure of ``spec`` at ``to_params(control values)``, shown as
    :func:`live_figure_mode` says."""

    def __init__(self, spec, controls, to_params, *, title, help_text="", columns=2):
        self.spec = spec
        self.controls = dict(controls)
        self._to_params = to_params
        self.mode = live_figure_mode()
        self.output = (
            W.Output(layout=W.Layout(min_height="200px"))
            if self.mode == "output"
            else None
        )
        self.status = W.HTML(layout=W.Layout(margin="0 0 0 4px"))
        self.figure = None
        self.data = None
        self.error = None
        self.last_update_ms = None
        self._flat_traces = None
        items = list(self.controls.values())
        rows = [W.HBox(items[i : i + columns]) for i in range(0, len(items), columns)]
        header = W.HTML(
            f"<b>{title}</b>"
            + (f" <span style='color:#666'>{help_text}</span>" if help_text else "")
        )
        for control in items:
            control.observe(self._on_change, names="value")
        self.update()
        if self.mode == "figurewidget":
            import plotly.graph_objects as go

            self.view = go.FigureWidget(self.figure)
            self._flat_traces = [flatten_attributes(t) for t in self.figure["data"]]
        else:
            self.view = self.output
        super().__init__([header, *rows, self.view, self.status])

    def values(self) -> dict:
        return {name: control.value for name, control in self.controls.items()}

    def params(self) -> dict:
        """The explorable's parameters for the current control values."""
        return self._to_params(self.values())

    def _on_change(self, change):
        self.update()

    def update(self):
        """Recompute the data and the figure from the controls, then show it."""
        start = time.perf_counter()
        try:
            params = self.params()
            data = self.spec.data(self.spec.params(**params))
            figure = self.spec.figure_dict(data)
        except (
            ValueError,
            TypeError,
        ) as exc:  # bad input in a text box: keep the last figure, say why
            self.error = str(exc)
            self.status.value = f"<span style='color:#b00'>⚠ {self.error}</span>"
            return
        self.error = None
        self.data, self.figure = data, figure
        self.last_update_ms = (time.perf_counter() - start) * 1e3
        self.status.value = (
            "<span style='color:#888;font-size:11px'>"
            + tr("recomputed in {ms:.1f} ms", ms=self.last_update_ms)
            + "</span>"
        )
        if self.mode == "figurewidget":
            if (
                self._flat_traces is not None
            ):  # None while __init__ computes the first figure
                self._update_in_place()
        elif in_kernel():
            self.output.outputs = (display_data(self.figure),)

    def _update_in_place(self):
        """Send the FigureWidget only what changed: the trace attributes whose value
        differs, and the layout paths of ``spec.updates`` (traces keep their number and
        order: :class:`~dpo_grpo.interactive.explorable.Explorable`)."""
        new = [flatten_attributes(t) for t in self.figure["data"]]
        with self.view.batch_update():
            for trace, old_attrs, new_attrs in zip(
                self.view.data, self._flat_traces, new
            ):
                for key in old_attrs.keys() | new_attrs.keys():
                    if not same_value(old_attrs.get(key), new_attrs.get(key)):
                        trace[key] = new_attrs.get(key)
            for path, value in self.spec.updates(self.data).items():
                self.view.layout[path] = value
        self._flat_traces = new


def display_data(figure) -> dict:
    """The ``display_data`` output of a plotly figure dict, in the active renderer's
    MIME types.

    The widgets set an ``Output``'s ``outputs`` to this instead of capturing a display
    with ``with output:``. Capturing makes the frontend route the cell's output messages
    into the widget; nbclient (nbconvert, nbmake, papermill) imitates that by sending a
    ``comm_msg`` on the kernel's shell socket from its IOPub task while its reply task
    awaits the same socket, and that receive can then miss the ``execute_reply`` until
    the cell timeout (jupyter/nbclient#312). Setting the trait sends a plain widget
    state update and involves no capture.
    """
    import plotly.io as pio

    bundle = pio.renderers._build_mime_bundle(figure, config=PLOTLY_CONFIG)
    return {"output_type": "display_data", "data": bundle, "metadata": {}}
