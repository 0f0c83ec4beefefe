"""The live ipywidgets UIs: they build without a kernel, and setting a control
programmatically recomputes the figure to the package's values (no latency assertion
here: bench/bench_widgets.py measures that)."""

import math

import numpy as np
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from dpo_grpo.interactive import explorables as xp  # noqa: E402
from dpo_grpo.interactive import (  # noqa: E402
    bandit,
    clip_platform,
    dpo_margin,
    group_advantage,
    kl_estimator,
    memory_ledger,
    registry,
    widgets,
    zero_std,
)
from dpo_grpo.interactive.explorable import flatten_attributes, same_value  # noqa: E402
from dpo_grpo.reference.advantages import group_advantages  # noqa: E402
from dpo_grpo.reference.bandit import bandit_trajectory  # noqa: E402
from dpo_grpo.reference.grpo import clipped_objective, clipped_objective_grad  # noqa: E402
from dpo_grpo.reference.zero_std import zero_std_probability  # noqa: E402


def _close(got, want, rel=1e-3):
    np.testing.assert_allclose(
        np.asarray(got, dtype=float), np.asarray(want, dtype=float), rtol=rel, atol=1e-9
    )


def _trace(ui, name=None, index=None):
    if index is not None:
        return ui.figure["data"][index]
    return next(t for t in ui.figure["data"] if t.get("name") == name)


#: The live UIs of chapters 1-5 (tests/interactive/test_registry.py builds the other
#: four).
SEVEN = (
    "clip_platform",
    "zero_std",
    "group_advantage",
    "dpo",
    "kl_estimator",
    "bandit",
    "memory_ledger",
)


@pytest.mark.parametrize("mode", widgets.LIVE_FIGURE_MODES)
@pytest.mark.parametrize("name", SEVEN)
def test_every_widget_builds_and_shows_the_default_figure(name, mode, monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LIVE_FIGURE", mode)
    ui = registry.WIDGETS[name]()
    assert (
        ui.mode == mode
        and ui.error is None
        and ui.figure is not None
        and ui.last_update_ms is not None
    )
    want = ui.spec.figure_dict(**ui.params())
    assert [flatten_attributes(t) for t in ui.figure["data"]] == [
        flatten_attributes(t) for t in want["data"]
    ]
    assert "sliders" not in ui.figure["layout"]
    assert ui.children[-2] is ui.view
    if mode == "output":
        # no kernel here: nothing is displayed
        assert ui.view is ui.output and ui.output.outputs == ()
    else:
        assert ui.output is None and type(ui.view).__name__ == "FigureWidget"


def _moves(control):
    """Two values a reader can set on ``control`` (its ends, or its other options); none
    for text boxes."""
    import ipywidgets as W

    if isinstance(control, W.FloatLogSlider):
        return [control.base**control.max, control.base**control.min]
    if isinstance(control, (W.FloatSlider, W.IntSlider)):
        return [control.max, control.min]
    if isinstance(control, W.Checkbox):
        return [not control.value, control.value]
    if isinstance(control, (W.Dropdown, W.ToggleButtons)):
        return [o for o in control.options if o != control.value][:2]
    return []


def _assert_shows(view, figure, paths):
    """The FigureWidget ``view`` holds ``figure``'s traces and its values at the layout
    ``paths``."""
    shown = view.to_plotly_json()
    assert len(shown["data"]) == len(figure["data"])
    for got, want in zip(shown["data"], figure["data"]):
        got, want = flatten_attributes(got), flatten_attributes(want)
        for key, value in want.items():
            numeric = (
                isinstance(value, (list, tuple, np.ndarray))
                and len(value)
                and all(
                    isinstance(v, (int, float, np.number)) or v is None
                    for v in np.asarray(value, dtype=object).ravel()
                )
            )
            if numeric:
                _close(
                    np.asarray(got.get(key), dtype=float),
                    np.asarray(value, dtype=float),
                    rel=1e-12,
                )
            else:
                assert same_value(got.get(key), value) or same_value(
                    np.asarray(got.get(key), dtype=object).tolist(),
                    np.asarray(value, dtype=object).tolist(),
                ), key
    for path, value in paths.items():
        got = view.layout[path]
        assert same_value(got, value) or np.allclose(
            np.asarray(got, dtype=float), np.asarray(value, dtype=float)
        ), path


def _all_live_widgets():
    from dpo_grpo.interactive.kl_variance import kl_variance_widget

    return {**registry.WIDGETS, "kl_variance": kl_variance_widget}


@pytest.mark.parametrize("name", list(_all_live_widgets()))
def test_the_figurewidget_is_updated_in_place_to_the_packages_figure(name, monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LIVE_FIGURE", "figurewidget")
    ui = _all_live_widgets()[name]()
    view = ui.view
    moved = 0
    for control in ui.controls.values():
        for value in _moves(control):
            control.value = value
            assert ui.error is None, (name, value, ui.error)
            assert ui.view is view  # the same widget, updated, not a new one
            _assert_shows(view, ui.figure, ui.spec.updates(ui.data))
            moved += 1
    assert moved >= 2


def test_live_figure_mode_is_chosen_by_the_environment(monkeypatch):
    import importlib.util
    import sys

    monkeypatch.setenv("DPO_GRPO_LIVE_FIGURE", "Output")
    assert widgets.live_figure_mode() == "output"
    monkeypatch.setenv("DPO_GRPO_LIVE_FIGURE", "canvas")
    with pytest.raises(ValueError, match="DPO_GRPO_LIVE_FIGURE"):
        widgets.live_figure_mode()
    monkeypatch.delenv("DPO_GRPO_LIVE_FIGURE")
    has_anywidget = importlib.util.find_spec("anywidget") is not None
    assert widgets.live_figure_mode() == ("figurewidget" if has_anywidget else "output")
    monkeypatch.setitem(sys.modules, "google.colab", type(sys)("google.colab"))
    # Colab: a FigureWidget needs its custom widget manager
    assert widgets.live_figure_mode() == "output"
    monkeypatch.delitem(sys.modules, "google.colab")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda n, *a: None if n == "anywidget" else real(n, *a),
    )
    assert widgets.live_figure_mode() == "output"


def test_clip_widget_recomputes_on_a_programmatic_change():
    ui = clip_platform.clip_platform_widget()
    ui.controls["epsilon_high"].value = 0.3
    obj = _trace(ui, index=0)
    _close(
        obj["y"],
        clipped_objective(np.array(obj["x"]), 1.0, epsilon=0.2, epsilon_high=0.3),
    )
    assert obj["y"][obj["x"].index(1.5)] == pytest.approx(1.3)
    ui.controls["delta"].value = 1.4  # not active until the checkbox is ticked
    assert _trace(ui, index=2)["y"][-1] == pytest.approx(-2.2)
    ui.controls["delta_on"].value = True
    right = _trace(ui, index=2)
    _close(
        right["y"],
        clipped_objective(
            np.array(right["x"]), -1.0, epsilon=0.2, epsilon_high=0.3, delta=1.4
        ),
    )
    assert right["y"][-1] == pytest.approx(-1.4)
    grad = _trace(ui, index=5)
    _close(
        grad["y"],
        clipped_objective_grad(
            np.array(grad["x"]), -1.0, epsilon=0.2, epsilon_high=0.3, delta=1.4
        ),
    )
    assert ui.figure["layout"]["shapes"][0]["x0"] == pytest.approx(1.3)
    assert ui.figure["layout"]["shapes"][5]["x0"] == pytest.approx(1.4)


def test_zero_std_widget_recomputes():
    ui = zero_std.zero_std_widget()
    ui.controls["group_size"].value = 16
    curve = _trace(ui, index=0)
    _close(curve["y"], zero_std_probability(np.array(curve["x"]), 16))
    assert ui.data["probability"] == pytest.approx(0.8**16 + 0.2**16)
    ui.controls["pass_rate"].value = 0.5
    vs_g = _trace(ui, index=2)
    _close(vs_g["y"], [2 * 0.5**g for g in vs_g["x"]])
    assert _trace(ui, index=9)["x"] == [0.5, 0.5]  # the p marker line moved
    ui.controls["eps"].value = 1e-2
    _close(_trace(ui, index=8)["y"], [d / (d + 2e-2) for d in (1.0, 0.01, 1e-5)])


def test_group_advantage_widget_edits_the_group_and_the_transform():
    ui = group_advantage.group_advantage_widget()
    ui.controls["rewards"].value = "1, 2, 3, 4, 10"
    r = np.array([1.0, 2, 3, 4, 10])
    _close(_trace(ui, index=2)["y"], group_advantages(r[None], eps=1e-4, ddof=0)[0])
    _close(_trace(ui, index=3)["y"], group_advantages(r[None], eps=1e-4, ddof=1)[0])
    ui.controls["shift"].value = 20.0
    _close(_trace(ui, index=0)["y"], r + 20)
    # shift-invariant
    _close(_trace(ui, index=2)["y"], group_advantages(r[None], eps=1e-4)[0])
    ui.controls["negate"].value = True
    _close(_trace(ui, index=2)["y"], -group_advantages(r[None], eps=1e-4)[0])
    ui.controls["rewards"].value = "1, oops"
    # last figure kept
    assert ui.error and "numbers" in ui.error and len(_trace(ui, index=0)["y"]) == 5
    ui.controls["rewards"].value = ", ".join(["1"] * 17)
    assert "2 to 16" in ui.error
    ui.controls["rewards"].value = "0, 1"
    assert ui.error is None and len(_trace(ui, index=0)["y"]) == 2


def test_dpo_widget_recomputes_loss_and_weight():
    ui = dpo_margin.dpo_widget()
    ui.controls["beta"].value = 0.5
    loss = _trace(ui, index=8)
    m = np.array(loss["x"])
    _close(loss["y"], np.log1p(np.exp(-0.5 * m)))
    _close(_trace(ui, index=9)["y"], 1 / (1 + np.exp(0.5 * m)))
    ui.controls["policy_chosen"].value = -1.0
    assert ui.data["margin"] == pytest.approx((-1.0 + 2.0) - (-2.8 + 2.4))
    assert _trace(ui, index=10)["y"][0] == pytest.approx(
        math.log1p(math.exp(-0.5 * 1.4)), rel=1e-3
    )


def test_kl_widget_on_policy_removes_the_bias():
    ui = kl_estimator.kl_estimator_widget()
    ui.controls["mix"].value = 0.0
    biased, corrected = _trace(ui, index=12)["y"]
    assert biased == pytest.approx(corrected, rel=1e-3) and biased == pytest.approx(
        ui.data["exact"], rel=1e-3
    )
    ui.controls["delta"].value = -1.0
    assert [_trace(ui, index=i)["y"][0] for i in (3, 4, 5)] == pytest.approx(
        [1.0, 0.5, math.exp(-1.0)], rel=1e-3
    )
    ui.controls["p"].value = "0.5, 0.5"
    assert ui.error  # shape mismatch with q is reported, not raised


def test_bandit_widget_reruns_the_training():
    ui = bandit.bandit_widget()
    ui.controls["seed"].value = 3
    ui.controls["group_size"].value = 8
    want = bandit_trajectory(steps=80, group_size=8, seed=3)
    for a in range(4):
        _close(_trace(ui, index=a)["y"], want[:, a])
    assert "G = 8" in ui.figure["layout"]["title"]["text"]


def test_memory_widget_ledger_and_units():
    ui = memory_ledger.memory_ledger_widget()
    assert _trace(ui, index=7)["y"] == pytest.approx([252.0, 140.0, 126.0])
    ui.controls["n_billion"].value = 70.0
    # bf16 weights: 2 bytes x 70e9
    assert _trace(ui, index=0)["y"] == pytest.approx([140.0] * 3)
    ui.controls["unit"].value = "GiB"
    assert _trace(ui, index=7)["y"] == pytest.approx(
        [x * 1e9 / 2**30 for x in (2520, 1400, 1260)], rel=1e-4
    )
    assert ui.figure["layout"]["yaxis"]["title"]["text"].startswith("GiB")
    ui.controls["precomputed_reference"].value = True
    assert ui.data["totals_gb"][2] == pytest.approx(1120.0)
    assert ui.data == xp.memory_ledger_data(70 * 10**9, precomputed_reference=True) | {
        "unit": "GiB"
    }


def test_in_a_kernel_the_ui_draws_the_plotly_figure_into_its_output(
    tmp_path, monkeypatch
):
    """Run a UI in a real kernel (nbclient emulates the front end's Output widget, like
    Jupyter does)."""
    monkeypatch.setenv("DPO_GRPO_LIVE_FIGURE", "output")  # the kernel inherits it
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(
        metadata={
            "kernelspec": {
                "name": "python3",
                "display_name": "Python 3",
                "language": "python",
            }
        }
    )
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import plotly.io as pio\npio.renderers.default = 'plotly_mimetype'\n"
            "from dpo_grpo.interactive import zero_std\n"
            "ui = zero_std.zero_std_widget()\nui"
        ),
        nbformat.v4.new_code_cell(
            "ui.controls['group_size'].value = 16\nprint(ui.last_update_ms is not None)"
        ),
    ]
    NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    assert any(
        "application/vnd.jupyter.widget-view+json" in o.get("data", {})
        for o in nb.cells[0].outputs
    )
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    outputs = [
        m["state"].get("outputs", [])
        for m in state.values()
        if m["model_name"] == "OutputModel"
    ]
    assert outputs and outputs[0], "the Output widget received no display"
    figure = outputs[0][-1]["data"]["application/vnd.plotly.v1+json"]
    want = zero_std_probability(np.array(figure["data"][0]["x"], dtype=float), 16)
    _close(figure["data"][0]["y"], want)
