"""The live explorables in a real frontend: JupyterLab 4 (and Notebook 7) in headless Chromium, on 127.0.0.1 only.

The reader edition of the explorables page (scripts/reader_edition.py) is opened in a fresh JupyterLab server, every cell is
run, then for each live explorable (dpo_grpo.interactive.widgets) the first slider is moved one step with the
keyboard. The test asserts that the figure in the widget's Output changes to the package's values for the new
control value (computed here by the same widget class), that it is drawn promptly after the websocket frame that
carries the kernel's new figure (under MAX_DRAW_MS_EACH: a hang, not a speed target), and that the browser console
shows no error. Every request to another host is blocked. Kernel: this environment's (ipywidgets 8, plotly 7). Not
covered yet: Notebook 7 (see ``server``) and a kernel with ipywidgets 7.7.1.

Draw times are a speed target (200 ms, the issue's budget), and speed is measured by benchmarks, never asserted in
a test on a shared machine: the test writes them to ``artifacts/jupyterlab_draw_ms.json`` (measured here: single
redraws 90-380 ms on a loaded 2-core machine, median 135-240 ms).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import urlopen

import numpy as np
import pytest

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip("Chromium is not installed at /usr/bin/chromium (.ci/run installs it)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")
pytest.importorskip("jupyterlab")
pytest.importorskip("ipywidgets")

import ipywidgets as W  # noqa: E402

from dpo_grpo.interactive import widgets  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
TOKEN = "dpo-grpo-browser-test"
MAX_DRAW_MS_EACH = 2000  # a redraw that takes longer is a hang (a loaded 2-core machine measured 90-380 ms)
DRAW_MS: dict[str, dict[str, float]] = {}
#: Console errors that may be ignored, each with its reason (none at present).
IGNORED_CONSOLE_ERRORS: dict[str, str] = {}
#: The gallery's sections whose live widget is one of widgets.WIDGETS (the newer explorables have their own
#: modules and kernel tests, tests/test_new_explorables.py; the DPO and memory-ledger widgets live in chapters 3, 1).
TITLES = {"clip_platform": "Clip platforms", "zero_std": "Zero-std groups", "group_advantage": "Group advantages",
          "kl_estimator": "KL estimators", "bandit": "The group bandit"}

# Records, in the page, when each websocket frame carrying a plotly figure arrives (performance.now()).
INIT_SCRIPT = """
window.__figureFrames = [];
const NativeWS = window.WebSocket;
window.WebSocket = function (...args) {
  const ws = new NativeWS(...args);
  ws.addEventListener('message', (ev) => {
    const t = performance.now();
    let text = typeof ev.data === 'string' ? ev.data : null;
    if (text === null && ev.data instanceof ArrayBuffer) text = new TextDecoder().decode(ev.data);
    if (text !== null && text.includes('application/vnd.plotly.v1+json')) window.__figureFrames.push(t);
  });
  return ws;
};
window.WebSocket.prototype = NativeWS.prototype;
Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
"""

FIND_PLOT = """(title) => {
  const box = [...document.querySelectorAll('.widget-vbox')].find(
      v => [...v.querySelectorAll(':scope > .widget-html b')].some(b => b.textContent === title));
  if (!box) return null;
  const plot = box.querySelector('.widget-output .js-plotly-plot');
  return plot && plot._fullData ? plot._fullData.map(t => Array.from(t.y || [])) : null;
}"""

WAIT_CHANGE = """async ([title, before, framesBefore]) => {
  const start = performance.now();
  const find = """ + FIND_PLOT + """;
  while (performance.now() - start < 60000) {
    const ys = find(title);
    // a redraw counts once the kernel's figure has arrived (JupyterLab may redraw the old figure meanwhile)
    if (ys && JSON.stringify(ys) !== before && window.__figureFrames.length > framesBefore)
      return {t: performance.now(), ys: ys};
    await new Promise(r => requestAnimationFrame(r));
  }
  return null;
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _first_slider(ui):
    return next((name, c) for name, c in ui.controls.items()
                if isinstance(c, (W.IntSlider, W.FloatSlider, W.FloatLogSlider)))


def _candidates(control):
    """Every value the slider can take (the frontend snaps to min + k * step), nearest to the current one first."""
    n = int(round((control.max - control.min) / control.step))
    grid = [control.min + k * control.step for k in range(n + 1)]
    if isinstance(control, W.FloatLogSlider):
        values = [control.base ** e for e in grid]
    elif isinstance(control, W.IntSlider):
        values = [int(round(v)) for v in grid]
    else:
        values = [round(v, 12) for v in grid]  # the frontend sends 0.55, not -3 + 71 * 0.05
    return sorted((v for v in values if not np.isclose(v, control.value, rtol=1e-9, atol=0)),
                  key=lambda v: abs(v - control.value))


def _numeric(values):
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return None


def _mismatches(ys, figure) -> list[int]:
    """Indices of the traces whose drawn numeric y differs from the package's figure (all, if the counts differ)."""
    if len(ys) != len(figure["data"]):
        return list(range(max(len(ys), len(figure["data"]))))
    bad = []
    for i, (got, want) in enumerate(zip(ys, figure["data"])):
        want_y, got_y = _numeric(want.get("y", [])), _numeric(got)
        if want_y is None or got_y is None or not len(want_y):
            continue
        # the figures round to 4 significant digits, and the frontend's slider value may differ from k*step in
        # the last bit, so a value at a rounding boundary can flip one unit of the 4th digit
        if got_y.shape != want_y.shape or not np.allclose(got_y, want_y, rtol=1e-3, atol=1e-9, equal_nan=True):
            bad.append(i)
    return bad


@pytest.fixture(scope="module")
def notebook_dir(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("reader_edition", ROOT / "scripts" / "reader_edition.py")
    reader = importlib.util.module_from_spec(spec)
    sys.modules["reader_edition"] = reader
    spec.loader.exec_module(reader)
    out = tmp_path_factory.mktemp("reader")
    reader.build(out, ROOT / "_build" / "jupyter_execute", execute=True, stems=["explorables"])
    shutil.rmtree(out / "binder")
    return out


# Notebook 7 ("notebook") is not in the list yet: there the keyboard move of the slider did not reach the kernel
# within 60 s (under investigation); JupyterLab 4 passes.
@pytest.fixture(scope="module", params=["lab"])
def server(request, notebook_dir, tmp_path_factory):
    port, app = _free_port(), request.param
    env = {k: v for k, v in os.environ.items() if k != "PLOTLY_RENDERER"}  # the frontend's renderer, as a reader
    env["JUPYTER_CONFIG_DIR"] = str(tmp_path_factory.mktemp("jupyter-config"))
    env["JUPYTER_RUNTIME_DIR"] = str(tmp_path_factory.mktemp("jupyter-runtime"))
    common = ["--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
              f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={notebook_dir}"]
    if app == "lab":  # no news, no update check, no PyPI extension manager: nothing leaves the machine
        cmd = [sys.executable, "-m", "jupyterlab", *common, "--LabApp.news_url=None",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
               "--LabApp.extension_manager=readonly", "--LabApp.expose_app_in_browser=True"]
    else:
        cmd = [sys.executable, "-m", "notebook", *common, "--JupyterNotebookApp.expose_app_in_browser=True"]
    log = tmp_path_factory.mktemp("jupyter-log") / "server.log"
    proc = subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            urlopen(f"{base}/api/status?token={TOKEN}", timeout=2)
            break
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.5)
    if proc.poll() is not None or time.monotonic() >= deadline:
        proc.kill()
        pytest.fail("the Jupyter server did not start:\n" + log.read_text()[-3000:])
    yield app, base
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def page(server):
    app, base = server
    errors, offsite = [], []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})

        def route(r):
            if urlparse(r.request.url).hostname == "127.0.0.1":
                return r.continue_()
            offsite.append(r.request.url)
            return r.abort()

        context.route("**/*", route)
        context.add_init_script(INIT_SCRIPT)
        pg = context.new_page()
        pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        pg.on("pageerror", lambda e: errors.append(str(e)))
        path = "lab/tree" if app == "lab" else "notebooks"
        pg.goto(f"{base}/{path}/explorables.ipynb?token={TOKEN}")
        pg.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                             " && window.jupyterapp.shell.currentWidget.sessionContext"
                             " && window.jupyterapp.shell.currentWidget.sessionContext.session"
                             " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel"
                             " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status"
                             " === 'idle'", timeout=120_000)
        pg.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        pg.wait_for_function("() => { const c = window.jupyterapp.shell.currentWidget.content;"
                             " return c.widgets.filter(w => w.model.type === 'code')"
                             "   .every(w => w.model.executionCount !== null)"
                             "   && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status"
                             " === 'idle'; }", timeout=300_000)
        yield pg, errors, offsite
        context.close()
        browser.close()


@pytest.mark.parametrize("name", list(TITLES))
def test_moving_a_slider_redraws_the_package_values(page, name):
    pg, errors, offsite = page
    title = TITLES[name]
    ui = widgets.WIDGETS[name]()
    control_name, control = _first_slider(ui)
    pg.wait_for_function(f"() => ({FIND_PLOT})({json.dumps(title)}) !== null", timeout=60_000)
    before = pg.evaluate(FIND_PLOT, title)
    assert _mismatches(before, ui.figure) == [], f"{name}: the first figure is not the package's"

    box = pg.locator(".widget-vbox", has=pg.locator(f":scope > .widget-html b:text-is('{title}')")).first
    handle = box.locator(".widget-slider .noUi-handle, .widget-hslider .noUi-handle, .ui-slider-handle").first
    handle.scroll_into_view_if_needed()
    frames_before = pg.evaluate("() => window.__figureFrames.length")
    handle.focus()
    pg.keyboard.press("ArrowRight")
    changed = pg.evaluate(WAIT_CHANGE, [title, json.dumps(before), frames_before])
    assert changed is not None, f"{name}: the figure did not change after moving {control_name}"

    # the package's figure at the value the frontend set: one of the values a few steps from the start, and it
    # must be the only one that reproduces the drawn data
    pg.wait_for_timeout(1000)
    assert pg.evaluate(FIND_PLOT, title) == changed["ys"], f"{name}: the figure changed again after its redraw"
    start = control.value
    readout = box.locator(".widget-readout").first.inner_text()
    found = []
    for value in _candidates(control)[:12]:
        control.value = value
        if ui.error is None and not _mismatches(changed["ys"], ui.figure):
            found.append(value)
            break
    control.value = start + control.step if not isinstance(control, W.FloatLogSlider) else control.value
    assert found, (f"{name}: the drawn figure is not the package's figure for any {control_name} near {start} "
                   f"(one step: traces {_mismatches(changed['ys'], ui.figure)} differ; readout {readout!r})")
    assert start not in found
    frames = pg.evaluate("() => window.__figureFrames")[frames_before:]
    assert frames, f"{name}: no websocket frame carried the new figure"
    reply = max(t for t in frames if t <= changed["t"])
    DRAW_MS.setdefault(pg.url.split("/")[3], {})[name] = changed["t"] - reply
    assert changed["t"] - reply < MAX_DRAW_MS_EACH, f"{name}: drawn {changed['t'] - reply:.0f} ms after the kernel's reply"
    assert not [e for e in errors if not any(k in e for k in IGNORED_CONSOLE_ERRORS)], (errors, offsite)
    assert offsite == [], offsite


def test_every_explorable_was_drawn_and_times_are_recorded(page):
    """Runs after the slider tests of the same frontend (pytest groups tests by the module-scoped server)."""
    pg, _, _ = page
    frontend = pg.url.split("/")[3]
    times = DRAW_MS.get(frontend, {})
    assert sorted(times) == sorted(TITLES), f"run with the slider tests: {times}"
    out = ROOT / "artifacts" / "jupyterlab_draw_ms.json"
    out.parent.mkdir(exist_ok=True)
    recorded = json.loads(out.read_text()) if out.exists() else {}
    recorded[frontend] = {"draw_ms": times, "median_ms": float(np.median(list(times.values())))}
    out.write_text(json.dumps(recorded, indent=1))
