"""The explorable framework (dpo_grpo.interactive.explorable) on the seven figures of
chapters 1-5: sliders, size, exactness of every slider combination, the decoupling
check, offline HTML and the book's MIME renderer."""

import copy
import json
import re

import numpy as np
import pytest

plotly = pytest.importorskip("plotly")

from dpo_grpo.interactive import dpo_margin, registry  # noqa: E402
from dpo_grpo.interactive.explorable import (  # noqa: E402
    PAGE_BUDGET_BYTES,
    Explorable,
    figure_html_size,
    flatten_attributes,
    jsonable,
    same_value,
    set_layout_path,
)
from dpo_grpo_book import (  # noqa: E402
    PLOTLY_CONFIG,
    PLOTLY_MIME,
    PlotlyMimeRenderer,
    dedupe_scripts,
    plotly_fragment,
)

STEPS = {
    "clip_platform": [8, 8, 5],
    "zero_std": [13, 19, 7],
    "group_advantage": [12],
    "dpo": [9],
    "kl_estimator": [11, 11],
    "bandit": [6, 7, 6, 6, 10],
    "memory_ledger": [10, 4],
}


@pytest.fixture(scope="module")
def built():
    return {name: registry.FIGURES[name]() for name in STEPS}


@pytest.mark.parametrize("name", list(STEPS))
def test_figure_has_the_expected_sliders_and_defaults(built, name):
    fig, spec = built[name], registry.EXPLORABLES[name]
    assert [len(s.steps) for s in fig.layout.sliders] == STEPS[name]
    assert [s["param"] for s in fig.layout.meta["sliders"]] == list(spec.grid)
    assert fig.layout.meta["explorable"] == name
    for slider, (param, values) in zip(fig.layout.sliders, spec.grid.items()):
        assert slider.active == [jsonable(v) for v in values].index(
            jsonable(spec.defaults[param])
        )
        assert all(step.method == "update" for step in slider.steps)


def test_figures_stay_under_the_page_budget(built):
    sizes = {name: figure_html_size(fig) for name, fig in built.items()}
    assert all(size < 300_000 for size in sizes.values()), sizes
    assert sum(sizes.values()) < PAGE_BUDGET_BYTES  # the gallery page holds all seven


def _apply_steps(fig_dict, fig, choice):
    """Emulate plotly.js: apply slider k's step choice[k] (Plotly.update with per-trace
    values)."""
    for slider, j in zip(fig["layout"]["sliders"], choice):
        data_update, layout_update, traces = slider["steps"][j]["args"]
        for attr, values in data_update.items():
            for value, i in zip(values, traces):
                set_layout_path(fig_dict["data"][i], attr, value)
        for path, value in layout_update.items():
            set_layout_path(fig_dict["layout"], path, value)
    return fig_dict


def _flat_traces(traces):
    return [flatten_attributes(t) for t in traces]


@pytest.mark.parametrize("name", list(STEPS))
def test_every_slider_combination_shows_the_data_at_those_parameters(built, name):
    """Sliders are independent in plotly; the figure is built so that their combination
    is still exact."""
    spec, fig = registry.EXPLORABLES[name], built[name].to_plotly_json()
    rng = np.random.default_rng(0)
    grid = list(spec.grid.items())
    base = {
        "data": [dict(t) for t in spec.state()[1]],
        "layout": copy.deepcopy(fig["layout"]),
    }
    for _ in range(4):
        choice = [int(rng.integers(len(values))) for _, values in grid]
        shown = _apply_steps(
            {
                "data": copy.deepcopy(base["data"]),
                "layout": copy.deepcopy(base["layout"]),
            },
            fig,
            choice,
        )
        params = {param: values[j] for (param, values), j in zip(grid, choice)}
        _, traces, updates = spec.state(**params)
        for i, (got, want) in enumerate(
            zip(_flat_traces(shown["data"]), _flat_traces(traces))
        ):
            for key in set(got) | set(want):
                assert same_value(got.get(key), want.get(key)), (name, params, i, key)
        for path, value in updates.items():
            node = shown["layout"]
            for part in path.replace("]", "").replace("[", ".").split("."):
                node = node[int(part)] if part.isdigit() else node[part]
            assert node == value, (name, params, path)


def test_decoupling_is_enforced():
    spec = registry.EXPLORABLES["zero_std"]
    coupled = Explorable(
        name="bad",
        title="",
        defaults=dict(spec.defaults),
        grid={"group_size": [2, 8], "pass_rate": [0.5, 0.8]},
        labels={},
        data=spec.data,
        layout=spec.layout,
        updates=lambda d: {},
        traces=lambda d: [
            {
                "type": "scatter",
                "x": [d["params"]["pass_rate"]],
                "y": [d["probability"]],
            }
        ],
    )
    with pytest.raises(ValueError, match="both change"):
        coupled.figure()


def test_figure_html_is_offline_and_deterministic(built):
    html = plotly_fragment(built["dpo"], div_id="x")
    assert "<script src" not in html and "cdn" not in html.lower()
    assert "Plotly.newPlot" not in html  # drawn by book.js, after the text
    payload = re.search(
        r'<script type="application/json" class="book-plotly-json">(.*)</script>', html
    ).group(1)
    spec = json.loads(payload)
    want = json.loads(built["dpo"].to_json())
    assert spec["data"] == want["data"] and spec["layout"] == want["layout"]
    assert spec["config"] == PLOTLY_CONFIG
    assert 'id="x" class="plotly-graph-div"' in html
    assert plotly_fragment(built["dpo"]) == plotly_fragment(dpo_margin.dpo_figure())


def test_figure_json_cannot_end_its_script_early():
    html = plotly_fragment({"data": [], "layout": {"title": {"text": "a</script>b"}}})
    assert html.count("</script>") == 1 and "a<\\/script>b" in html


def test_mime_renderer_registration_and_script_dedupe():
    assert ("html", PLOTLY_MIME, 5) in PlotlyMimeRenderer.mime_priority_overrides
    from importlib.metadata import entry_points

    names = [ep.value for ep in entry_points(group="myst_nb.mime_renderers")]
    assert "dpo_grpo_book:PlotlyMimeRenderer" in names

    class JS:
        def __init__(self, filename, body):
            self.filename, self.priority, self.attributes = (
                filename,
                500,
                {"body": body},
            )

    files = [
        JS(None, "const THEBE_JS_URL = 1"),
        JS("a.js", ""),
        JS("", "const THEBE_JS_URL = 1"),
    ]
    dedupe_scripts(files)
    assert [f.filename for f in files] == [None, "a.js"]
