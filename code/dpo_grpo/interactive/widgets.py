"""Live ipywidgets UIs of the book's original seven explorables: controls that recompute the figure in the kernel.

Each ``*_widget()`` returns an :class:`ExplorableWidget` (an ``ipywidgets.VBox``): core ipywidgets controls plus the
figure, shown in one of two ways (:func:`live_figure_mode`):

- ``"figurewidget"``: a ``plotly.graph_objects.FigureWidget`` updated in place (one ``Plotly.update`` of the values
  that changed). Chosen where it works without set-up: plotly >= 6 with ``anywidget`` installed, outside Colab
  (JupyterLab 4, Notebook 7, VS Code).
- ``"output"``: an ``Output`` widget whose figure is replaced after every change. Core widgets only, so it works in
  every frontend with ipywidgets 7.6+ or 8, Colab included (where a FigureWidget needs Colab's custom widget manager);
  Colab draws the figure with its own plotly renderer, Jupyter with plotly's mimetype renderer, which draws a new
  figure three times (a plot, a redraw and an offscreen copy for a cached PNG): slower than the in-place update in
  JupyterLab 4 (``bench/bench_frontend_draw.py`` measures both in one run).

``DPO_GRPO_LIVE_FIGURE=output`` or ``=figurewidget`` overrides the choice. Sliders use ``continuous_update=False``:
the figure is recomputed when a slider is released.

In a chapter notebook, put the UI in a code cell tagged ``remove-cell`` and ``skip-execution`` (it is hidden from
the static HTML, where no kernel could answer its callbacks, and not run by the build; the precomputed figure from
:mod:`dpo_grpo.interactive.figures` is the static version)::

    from dpo_grpo.interactive import widgets
    widgets.zero_std_widget()

Programmatic use (tests, benchmarks): ``ui.controls[name].value = x`` runs the callback synchronously;
``ui.figure`` is the plotly figure dict now shown, ``ui.data`` the :mod:`dpo_grpo.interactive.explorables` data behind it,
``ui.last_update_ms`` how long the recompute took, ``ui.error`` the last input error (or ``None``), ``ui.view`` the
widget that shows the figure (the ``Output`` or the ``FigureWidget``). Outside a kernel the ``Output`` shows nothing.
``bench/bench_widgets.py`` measures the latency of a slider move, ``bench/bench_frontend_draw.py`` the browser's redraw.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import time

import ipywidgets as W

from . import figures as F

__all__ = [
    "ExplorableWidget",
    "display_data",
    "live_figure_mode",
    "LIVE_FIGURE_MODES",
    "clip_platform_widget",
    "zero_std_widget",
    "group_advantage_widget",
    "dpo_widget",
    "kl_estimator_widget",
    "bandit_widget",
    "memory_ledger_widget",
    "WIDGETS",
]

_STYLE = {"description_width": "initial"}
_WIDE = W.Layout(width="340px")


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - ipywidgets depends on IPython
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


LIVE_FIGURE_MODES = ("output", "figurewidget")


def live_figure_mode() -> str:
    """How the live UIs show their figure: ``DPO_GRPO_LIVE_FIGURE`` if set, else ``"figurewidget"`` where a plotly
    FigureWidget works without set-up (plotly >= 6 and ``anywidget`` installed, not in Colab), else ``"output"``."""
    forced = os.environ.get("DPO_GRPO_LIVE_FIGURE", "").strip().lower()
    if forced:
        if forced not in LIVE_FIGURE_MODES:
            raise ValueError(
                f"DPO_GRPO_LIVE_FIGURE must be one of {LIVE_FIGURE_MODES}, got {forced!r}"
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


def _float_slider(description, value, lo, hi, step, fmt=".2f"):
    return W.FloatSlider(
        value=value,
        min=lo,
        max=hi,
        step=step,
        description=description,
        readout_format=fmt,
        continuous_update=False,
        style=_STYLE,
        layout=_WIDE,
    )


def _log_slider(description, value, lo_exp, hi_exp, step=0.25, fmt=".2g"):
    return W.FloatLogSlider(
        value=value,
        base=10,
        min=lo_exp,
        max=hi_exp,
        step=step,
        description=description,
        readout_format=fmt,
        continuous_update=False,
        style=_STYLE,
        layout=_WIDE,
    )


def _int_slider(description, value, lo, hi, step=1):
    return W.IntSlider(
        value=value,
        min=lo,
        max=hi,
        step=step,
        description=description,
        continuous_update=False,
        style=_STYLE,
        layout=_WIDE,
    )


def _numbers(text, name):
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
    """Controls + the figure of ``spec`` at ``to_params(control values)``, shown as :func:`live_figure_mode` says."""

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
            self._flat_traces = [F._flatten(t) for t in self.figure["data"]]
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
        self.status.value = f"<span style='color:#888;font-size:11px'>recomputed in {self.last_update_ms:.1f} ms</span>"
        if self.mode == "figurewidget":
            if (
                self._flat_traces is not None
            ):  # None while __init__ computes the first figure
                self._update_in_place()
        elif _in_kernel():
            self.output.outputs = (display_data(self.figure),)

    def _update_in_place(self):
        """Send the FigureWidget only what changed: the trace attributes whose value differs, and the layout paths
        of ``spec.updates`` (traces keep their number and order: :class:`~dpo_grpo.interactive.figures.Explorable`)."""
        new = [F._flatten(t) for t in self.figure["data"]]
        with self.view.batch_update():
            for trace, old_attrs, new_attrs in zip(
                self.view.data, self._flat_traces, new
            ):
                for key in old_attrs.keys() | new_attrs.keys():
                    if not F._same(old_attrs.get(key), new_attrs.get(key)):
                        trace[key] = new_attrs.get(key)
            for path, value in self.spec.updates(self.data).items():
                self.view.layout[path] = value
        self._flat_traces = new


def display_data(figure) -> dict:
    """The ``display_data`` output of a plotly figure dict, in the active renderer's MIME types.

    The widgets set an ``Output``'s ``outputs`` to this instead of capturing a display with ``with output:``.
    Capturing makes the frontend route the cell's output messages into the widget; nbclient (nbconvert, nbmake,
    papermill) imitates that by sending a ``comm_msg`` on the kernel's shell socket from its IOPub task while its
    reply task awaits the same socket, and that receive can then miss the ``execute_reply`` until the cell timeout
    (jupyter/nbclient#312). Setting the trait sends a plain widget state update and involves no capture.
    """
    import plotly.io as pio

    from .figures import PLOTLY_CONFIG

    bundle = pio.renderers._build_mime_bundle(figure, config=PLOTLY_CONFIG)
    return {"output_type": "display_data", "data": bundle, "metadata": {}}


# ----------------------------------------------------------------------------------------------------------------
# The seven UIs
# ----------------------------------------------------------------------------------------------------------------


def clip_platform_widget(epsilon=0.2, epsilon_high=0.2, delta=None) -> ExplorableWidget:
    """Live clip platforms: eps_low, eps_high and the two-sided cap delta (checkbox to switch it on)."""
    controls = {
        "epsilon": _float_slider("ε_low", epsilon, 0.01, 0.6, 0.01),
        "epsilon_high": _float_slider("ε_high", epsilon_high, 0.0, 0.8, 0.01),
        "delta_on": W.Checkbox(
            value=delta is not None, description="cap with δ", style=_STYLE
        ),
        "delta": _float_slider("δ", 2.0 if delta is None else delta, 1.05, 3.0, 0.05),
    }

    def to_params(v):
        return {
            "epsilon": v["epsilon"],
            "epsilon_high": v["epsilon_high"],
            "delta": v["delta"] if v["delta_on"] else None,
        }

    return ExplorableWidget(
        F.CLIP,
        controls,
        to_params,
        title="Clip platforms",
        help_text="per-token objective and gradient vs the ratio ρ",
    )


def zero_std_widget(group_size=8, pass_rate=0.8, eps=1e-4) -> ExplorableWidget:
    """Live zero-std groups: group size G, pass rate p, and the eps of the two-sample example."""
    controls = {
        "group_size": _int_slider("group size G", group_size, 2, 64),
        "pass_rate": _float_slider("pass rate p", pass_rate, 0.01, 0.99, 0.01),
        "eps": _log_slider("ϵ", eps, -9, 0),
    }
    return ExplorableWidget(
        F.ZERO_STD,
        controls,
        dict,
        title="Zero-std groups",
        help_text="0/1 rewards: when does a group carry no signal?",
        columns=3,
    )


def group_advantage_widget(
    rewards=(0.2, 0.8, 1.4, 0.6), scale=1.0, shift=0.0, eps=1e-4
) -> ExplorableWidget:
    """Live group advantages: an editable group (2 to 16 rewards), the affine map a r + b, and eps."""
    controls = {
        "rewards": W.Text(
            value=", ".join(f"{r:g}" for r in rewards),
            description="rewards (2 to 16)",
            continuous_update=False,
            style=_STYLE,
            layout=W.Layout(width="420px"),
        ),
        "eps": _log_slider("ϵ", eps, -10, 0),
        "log10_scale": _float_slider(
            "log₁₀ |a|", math.log10(abs(scale)) if scale else 0.0, -7.0, 2.0, 0.25
        ),
        "negate": W.Checkbox(value=scale < 0, description="a < 0 (flip)", style=_STYLE),
        "shift": _float_slider("shift b", shift, -50.0, 50.0, 0.5, ".1f"),
    }

    def to_params(v):
        a = (-1.0 if v["negate"] else 1.0) * 10.0 ** v["log10_scale"]
        r = _numbers(v["rewards"], "rewards")
        if not 2 <= len(r) <= 16:
            raise ValueError(f"rewards: a group needs 2 to 16 numbers, got {len(r)}")
        return {"transform": (a, float(v["shift"])), "rewards": r, "eps": v["eps"]}

    return ExplorableWidget(
        F.GROUP_ADVANTAGE,
        controls,
        to_params,
        title="Group advantages",
        help_text="advantages are invariant to a·r + b (a > 0) until a·std ≈ ϵ",
    )


def dpo_widget(
    beta=0.1,
    policy_chosen=-2.2,
    policy_rejected=-2.8,
    ref_chosen=-2.0,
    ref_rejected=-2.4,
) -> ExplorableWidget:
    """Live DPO: beta and the four sequence log-probs of one pair (default: the article's first pair)."""
    controls = {
        "beta": _log_slider("β", beta, -2, 1, 0.05),
        "policy_chosen": _float_slider("log π_θ(y_w)", policy_chosen, -10.0, 0.0, 0.05),
        "ref_chosen": _float_slider("log π_ref(y_w)", ref_chosen, -10.0, 0.0, 0.05),
        "policy_rejected": _float_slider(
            "log π_θ(y_l)", policy_rejected, -10.0, 0.0, 0.05
        ),
        "ref_rejected": _float_slider("log π_ref(y_l)", ref_rejected, -10.0, 0.0, 0.05),
    }
    return ExplorableWidget(
        F.DPO,
        controls,
        dict,
        title="DPO",
        help_text="loss and gradient weight vs the margin",
    )


def kl_estimator_widget(
    delta=0.5, mix=1.0, p=(0.7, 0.2, 0.1), q=(0.2, 0.3, 0.5), old=(0.3, 0.3, 0.4)
) -> ExplorableWidget:
    """Live KL estimators: Delta, the sampling mix tau, and editable p, q, old (each must sum to 1)."""
    text = lambda name, v: W.Text(
        value=", ".join(f"{x:g}" for x in v),
        description=name,  # noqa: E731
        continuous_update=False,
        style=_STYLE,
        layout=W.Layout(width="260px"),
    )
    controls = {
        "delta": _float_slider("Δ = log π_ref − log π_θ", delta, -3.0, 3.0, 0.05),
        "mix": _float_slider("τ (sample from (1−τ)p + τ·old)", mix, 0.0, 1.0, 0.02),
        "p": text("p = π_θ", p),
        "q": text("q = π_ref", q),
        "old": text("π_old", old),
    }

    def to_params(v):
        return {
            "delta": v["delta"],
            "mix": v["mix"],
            "p": _numbers(v["p"], "p"),
            "q": _numbers(v["q"], "q"),
            "old": _numbers(v["old"], "old"),
        }

    return ExplorableWidget(
        F.KL,
        controls,
        to_params,
        title="KL estimators",
        help_text="k3 is unbiased on-policy; off-policy it needs the ratio p/μ",
    )


def bandit_widget(
    group_size=32, beta=0.02, lr=0.18, epsilon=0.2, seed=7, steps=80
) -> ExplorableWidget:
    """Live group bandit: every knob of the chapter-4 run (a change re-runs the seeded training; a longer ``steps``
    only runs the new steps of the kept run)."""
    controls = {
        "group_size": _int_slider("group size G", group_size, 2, 128),
        "beta": _float_slider("β (KL weight)", beta, 0.0, 1.0, 0.01),
        "lr": _float_slider("learning rate", lr, 0.01, 1.0, 0.01),
        "epsilon": _float_slider("clip ε", epsilon, 0.05, 0.5, 0.01),
        "seed": _int_slider("seed", seed, 0, 99),
        "steps": _int_slider("steps", steps, 10, 200, 10),
    }
    return ExplorableWidget(
        F.BANDIT_LIVE,
        controls,
        dict,
        title="The group bandit",
        help_text="GRPO on four actions, no critic",
        columns=3,
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
    """Live memory ledger: model size, precisions, optimizer, master copy, reward/reference models, GB or GiB."""
    dtypes = ["fp32", "bf16", "fp16", "fp8"]
    drop = lambda name, options, value: W.Dropdown(
        options=options,
        value=value,
        description=name,  # noqa: E731
        style=_STYLE,
        layout=W.Layout(width="220px"),
    )
    controls = {
        "n_billion": _log_slider(
            "parameters (billions)", n_billion, -1, 3, 0.05, ".3g"
        ),
        "unit": W.ToggleButtons(
            options=["GB", "GiB"], value=unit, description="unit", style=_STYLE
        ),
        "weight_dtype": drop("weights", dtypes, weight_dtype),
        "grad_dtype": drop("gradients", dtypes, grad_dtype),
        "optimizer": drop("optimizer", ["adamw", "sgd_momentum", "sgd"], optimizer),
        "master_weights": W.Checkbox(
            value=master_weights, description="fp32 master weights", style=_STYLE
        ),
        "reward_model": W.Checkbox(
            value=reward_model,
            description="PPO: reward model (same size)",
            style=_STYLE,
        ),
        "grpo_reward_model": W.Checkbox(
            value=grpo_reward_model,
            description="GRPO: reward model (else rule-based)",
            style=_STYLE,
        ),
        "precomputed_reference": W.Checkbox(
            value=precomputed_reference,
            description="DPO: precomputed reference log-probs",
            style=_STYLE,
        ),
    }
    return ExplorableWidget(
        F.MEMORY_LIVE,
        controls,
        dict,
        title="Memory ledger",
        help_text="logical training state, no activations or sharding",
    )


WIDGETS = {
    "clip_platform": clip_platform_widget,
    "zero_std": zero_std_widget,
    "group_advantage": group_advantage_widget,
    "dpo": dpo_widget,
    "kl_estimator": kl_estimator_widget,
    "bandit": bandit_widget,
    "memory_ledger": memory_ledger_widget,
}
