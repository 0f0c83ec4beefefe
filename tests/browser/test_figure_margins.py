"""Every explorable's figure fits its margins, so plotly draws it once, in headless
Chromium.

Plotly's ``automargin`` (on for the axes of the book's template) and its legends,
sliders and titles may ask for more room than ``layout.margin`` gives. Plotly then
widens the margin and draws the whole figure a second time, on every ``newPlot``: each
move of a live explorable shown in an ``Output`` (Colab, a kernel without anywidget),
each page load. This test draws every
:class:`~dpo_grpo.interactive.explorable.Explorable` of the package (found by scanning
``dpo_grpo.interactive``, so a new one is checked too): the static figure with its
sliders, and the live figure at the defaults and at both ends of every slider, in a page
as wide as the book's column and as a wide notebook. It asserts that the margins plotly
drew with are the figure's own (no widening).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

from testing_support import CHROMIUM, CHROMIUM_FLAGS, skip_without_chromium  # noqa: E402

sync_api = skip_without_chromium()
plotly = pytest.importorskip("plotly")

import dpo_grpo.interactive as interactive  # noqa: E402
from dpo_grpo.interactive.explorable import PLOTLY_CONFIG, Explorable  # noqa: E402

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
WIDTHS = (700, 1200)  # px: the book's content column, a wide JupyterLab notebook

DRAW = """async ([fig, config, width]) => {
  const host = document.getElementById('host');
  host.style.width = width + 'px';
  host.innerHTML = '';
  const gd = document.createElement('div');
  host.appendChild(gd);
  await Plotly.newPlot(gd, fig.data, fig.layout, config);
  const m = gd._fullLayout.margin, s = gd._fullLayout._size;
  const out = {given: [m.l, m.r, m.t, m.b], drawn: [s.l, s.r, s.t, s.b]};
  Plotly.purge(gd);
  return out;
}"""


def _explorables() -> dict[str, Explorable]:
    found = {}
    for info in pkgutil.iter_modules(interactive.__path__):
        module = importlib.import_module(f"{interactive.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Explorable):
                found[f"{module.__name__.rsplit('.', 1)[1]}.{value.name}"] = value
    return found


EXPLORABLES = _explorables()


def _figures(spec: Explorable):
    """(what, figure dict): the static figure with sliders, the live one at the defaults
    and at every slider's ends."""
    yield "static", json.loads(spec.figure().to_json())
    yield "defaults", spec.figure_dict()
    for param, values in spec.grid.items():
        values = list(values)
        for value in (values[0], values[-1]):
            yield f"{param}={value!r}", spec.figure_dict(**{param: value})


@pytest.fixture(scope="module")
def page():
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        pg.set_content(
            "<html><body style='margin:0'><div id='host'></div></body></html>"
        )
        pg.add_script_tag(content=PLOTLY_JS.read_text())
        yield pg
        browser.close()


def test_every_explorable_module_is_scanned():
    names = {name.split(".")[1] for name in EXPLORABLES}
    assert {
        "clip_platform",
        "zero_std",
        "group_advantage",
        "dpo",
        "kl_estimator",
        "bandit",
        "memory_ledger",
        "length_norm",
        "difficulty",
        "dpo_dynamics",
        "clip_reuse",
        "kl_variance",
        "token_level",
    } <= names, names


@pytest.mark.parametrize("name", sorted(EXPLORABLES))
def test_the_figure_fits_its_margins_and_is_drawn_once(page, name):
    widened = []
    for what, figure in _figures(EXPLORABLES[name]):
        for width in WIDTHS:
            got = page.evaluate(DRAW, [figure, PLOTLY_CONFIG, width])
            if got["drawn"] != got["given"]:
                widened.append(
                    f"{what} at {width} px: margins (l, r, t, b) {got['given']} -> "
                    f"{got['drawn']}"
                )
    assert widened == [], (
        f"{name}: plotly widened the margins and drew again:\n" + "\n".join(widened)
    )
