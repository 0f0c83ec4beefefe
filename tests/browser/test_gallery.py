"""The built gallery page (book/explorables) in headless Chromium, served from 127.0.0.1
with every other host blocked: plotly sliders move the plotted data to the package's
values, math and embedded widget state render, no request leaves the machine and the
console stays free of errors. Screenshots go to artifacts/screenshots/.

Reads the one book build of the test run (the ``built_book`` fixture of conftest.py,
which runs ``make book`` when ``_build/html`` is missing or older than its sources).
Skipped when ``/usr/bin/chromium`` is missing (``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest

# One worker drives one Chromium for the whole module (the page is opened once, by the
# module's fixture).
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("gallery")]

from testing_support import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_FLAGS,
    local_only_route,
    skip_without_chromium,
)

sync_api = skip_without_chromium()

import dpo_grpo as dg  # noqa: E402
from dpo_grpo.reference import examples as ex  # noqa: E402
from dpo_grpo.interactive.explorables import difficulty_spread  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
PAGE = "book/explorables.html"
SHOTS = ROOT / "artifacts" / "screenshots"
#: Console errors that may be ignored, each with its reason. None are needed at present:
#: the stock theme's two errors are fixed at their source (see dpo_grpo_book and
#: _config.yml).
IGNORED_CONSOLE_ERRORS: dict[str, str] = {}
PAGE_BUDGET = 1_500_000


# --------------------------------------------------------------------------------------
# Build (if stale), serve, open
# --------------------------------------------------------------------------------------


class Gallery:
    def __init__(self, browser, page, console, blocked, open_page):
        self.browser, self.page, self.console, self.blocked, self.open = (
            browser,
            page,
            console,
            blocked,
            open_page,
        )


@pytest.fixture(scope="module")
def gallery(site):
    console, blocked = [], []
    route = local_only_route(site, blocked)

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True
        )

        def open_page(path):
            """A new tab on ``path`` with the same network block and console capture."""
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.on(
                "console",
                lambda m: (
                    console.append(f"{path}: {m.text}") if m.type == "error" else None
                ),
            )
            page.on("pageerror", lambda e: console.append(f"{path}: uncaught: {e}"))
            page.route("**/*", route)
            page.goto(f"{site}/{path}", wait_until="load", timeout=120_000)
            return page

        page = open_page(PAGE)
        # book.js draws a figure, and loads the widget manager, as it nears the screen
        page.evaluate("() => Promise.all([bookDrawAllFigures(), bookLoadWidgets()])")
        page.wait_for_function(
            "() => [...document.querySelectorAll('.plotly-graph-div')].length === "
            f"{N_FIGURES} && "
            "[...document.querySelectorAll('.plotly-graph-div')].every(g => "
            "g._fullData)",
            timeout=120_000,
        )
        page.wait_for_function(
            "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
            timeout=60_000,
        )
        page.evaluate("() => MathJax.startup.promise")
        page.wait_for_selector(".jupyter-widgets .widget-slider", timeout=60_000)
        yield Gallery(browser, page, console, blocked, open_page)
        browser.close()


# --------------------------------------------------------------------------------------
# Expected values from the package's functions
# --------------------------------------------------------------------------------------


def _close(got, want, what, rel=2e-3):
    got = np.asarray(got, dtype=float)
    want = np.asarray(want, dtype=float)
    assert got.shape == want.shape, what
    assert np.allclose(got, want, rtol=rel, atol=1e-9), (
        f"{what}: {got[:6]} != {want[:6]}"
    )


def _check_clip(p, data, layout):
    eps, eps_h, delta = p["epsilon"], p["epsilon_high"], p["delta"]
    kw = dict(epsilon=eps, epsilon_high=eps_h, delta=delta)
    for i, (a, fn) in enumerate(
        (
            (1, dg.clipped_objective),
            (-1, dg.clipped_objective),
            (-1, dg.clipped_objective),
            (1, dg.clipped_objective_grad),
            (-1, dg.clipped_objective_grad),
            (-1, dg.clipped_objective_grad),
        )
    ):
        _close(
            data[i]["y"], fn(np.array(data[i]["x"]), a, **kw), f"clip trace {i} at {p}"
        )
    inputs = ex.grpo_token_example()
    ratio = np.exp(inputs["new_logps"] - inputs["old_logps"])[:, 0]
    for k in range(4):
        _close(
            data[6 + k]["y"],
            [dg.clipped_objective(ratio[k], np.sign(inputs["advantages"][k]), **kw)],
            f"answer {k} at {p}",
        )
    shapes = layout["shapes"]
    for row in (0, 6):
        assert shapes[row]["x0"] == pytest.approx(1 + eps_h) and shapes[row + 4][
            "x0"
        ] == pytest.approx(1 + eps_h)
        assert shapes[row + 1]["x1"] == pytest.approx(1 - eps) and shapes[row + 3][
            "x1"
        ] == pytest.approx(1 - eps)
        if delta is None:
            assert shapes[row + 2]["x0"] > 2.2
        else:
            assert shapes[row + 5]["x0"] == pytest.approx(delta)


def _check_zero_std(p, data, layout):
    g, q, eps = int(p["group_size"]), p["pass_rate"], p["eps"]
    _close(
        data[0]["y"],
        dg.zero_std_probability(np.array(data[0]["x"]), g),
        f"exact vs p at {p}",
    )
    _close(
        data[1]["y"],
        [dg.zero_std_monte_carlo(x, g, 2000, 0) for x in data[1]["x"]],
        f"MC vs p at {p}",
    )
    _close(
        data[2]["y"],
        [dg.zero_std_probability(q, int(k)) for k in data[2]["x"]],
        f"exact vs G at {p}",
    )
    _close(
        data[3]["y"],
        [dg.zero_std_monte_carlo(q, int(k), 2000, 0) for k in data[3]["x"]],
        f"MC vs G at {p}",
    )
    batch = difficulty_spread(q, 256, 2.0, 0)
    _close(
        data[4]["y"],
        [dg.expected_zero_std_fraction(batch, int(k)) for k in data[4]["x"]],
        f"batch at {p}",
    )
    gap = np.array(data[7]["x"])
    _close(data[7]["y"], gap / (gap + 2 * eps), f"two-sample curve at {p}")
    _close(
        data[8]["y"],
        [dg.two_sample_advantage(d, eps) for d in ex.TWO_SAMPLE_GAPS],
        f"article gaps at {p}",
    )
    _close(data[9]["x"], [q, q], "p marker")
    _close(data[10]["x"], [g, g], "G marker")


def _check_group_advantage(p, data, layout):
    a, b = p["transform"]
    r = ex.REWARD_GROUPS[0] * a + b
    _close(data[0]["y"], r, f"rewards at {p}", rel=1e-5)
    _close(
        data[2]["y"],
        dg.group_advantages(r[None], eps=1e-4, ddof=0)[0],
        f"ddof 0 at {p}",
    )
    _close(
        data[3]["y"],
        dg.group_advantages(r[None], eps=1e-4, ddof=1)[0],
        f"ddof 1 at {p}",
    )


def _check_kl(p, data, layout):
    d, t = p["delta"], p["mix"]
    for i, fn in zip((3, 4, 5), (dg.k1, dg.k2, dg.k3)):
        _close(data[i]["y"], [float(fn(d))], f"k at Δ={d}")
    e = ex.KL_EXAMPLE
    s = (1 - t) * e["p"] + t * e["old"]
    _close(data[8]["y"], s, f"sampling at t={t}", rel=1e-3)
    want = [
        dg.k3_expectation(e["p"], e["q"], s / s.sum()),
        dg.k3_expectation(e["p"], e["q"], s / s.sum(), ratio_weighted=True),
    ]
    _close(data[12]["y"], want, f"expectations at t={t}")


BANDIT_PARAMS = ("group_size", "beta", "lr", "epsilon", "seed")


def _check_bandit(p, data, layout):
    base = {"group_size": 32, "beta": 0.02, "lr": 0.18, "epsilon": 0.2, "seed": 7}
    for k, name in enumerate(BANDIT_PARAMS):
        run = dg.bandit_trajectory(steps=80, **{**base, name: p[name]})
        for a in range(4):
            _close(
                data[4 * k + a]["y"],
                run[:, a],
                f"bandit panel {name}={p[name]} action {a}",
            )


def _check_length_norm(p, data, layout):
    from dpo_grpo.interactive.length_norm import LOSS_TYPES_DRAWN, length_norm_data

    d = length_norm_data(other_length=int(p["other_length"]))
    k = 0
    for key in ("push", "total"):
        for lt in LOSS_TYPES_DRAWN:
            for sign in (1, -1):
                _close(
                    data[k]["y"],
                    d[key][lt][sign],
                    f"length_norm {key} {lt} {sign} at {p}",
                )
                k += 1
    lens = np.array(data[0]["x"])
    _close(data[0]["y"], 1 / (4 * lens), f"grpo push = 1/(B |y|) at {p}")


def _check_difficulty(p, data, layout):
    g = int(p["group_size"])
    ks = np.arange(g + 1)
    rewards = np.array([[1.0] * k + [0.0] * (g - k) for k in ks]).reshape(-1, 1)
    for j, scale in enumerate(("group", "batch", "none")):
        w = np.abs(
            dg.trl_exact.reward_advantages(
                rewards, g, scale_rewards=scale
            ).advantages.reshape(g + 1, g)
        ).sum(axis=1)
        _close(data[j]["y"], w, f"difficulty weight {scale} at {p}")
        _close(data[3 + j]["y"], w / w[g // 2], f"difficulty relative {scale} at {p}")


def _check_dpo_dynamics(p, data, layout):
    from dpo_grpo.chapters.displacement import dpo_displacement

    runs = (
        dpo_displacement(beta=p["beta"], similarity=0.9, steps=150),
        dpo_displacement(beta=0.1, similarity=p["similarity"], steps=150),
    )
    for j, run in enumerate(runs):
        for i, key in enumerate(("chosen", "rejected", "margins")):
            _close(
                data[3 * j + i]["y"], run[key], f"dpo dynamics {key} panel {j} at {p}"
            )


def _check_clip_reuse(p, data, layout):
    from dpo_grpo.interactive.clip_reuse import reuse_run

    runs = (
        reuse_run(int(p["num_iterations"]), 1),
        reuse_run(1, int(p["steps_per_generation"])),
    )
    for j, run in enumerate(runs):
        _close(data[2 * j]["y"], run["clip"], f"clip fraction row {j} at {p}")
        _close(data[2 * j + 1]["y"], run["spread"], f"ratio spread row {j} at {p}")


# The gallery's nine figures (the DPO-loss and memory-ledger figures moved out: chapters
# 3 and 1 keep them)
CHECKS = {
    "clip_platform": _check_clip,
    "zero_std": _check_zero_std,
    "group_advantage": _check_group_advantage,
    "dpo_dynamics": _check_dpo_dynamics,
    "kl_estimator": _check_kl,
    "bandit": _check_bandit,
    "length_norm": _check_length_norm,
    "difficulty": _check_difficulty,
    "clip_reuse": _check_clip_reuse,
}
N_FIGURES = len(CHECKS)

READ_GRAPH = """(gd) => ({
  meta: gd.layout.meta,
  active: gd._fullLayout.sliders.map(s => s.active),
  data: gd._fullData.map(t => ({name: t.name, visible: t.visible,
                                x: t.x ? Array.from(t.x) : null, y: t.y ? Array.from(t.y) : null})),
  layout: {shapes: (gd._fullLayout.shapes || []).map(s => ({x0: s.x0, x1: s.x1}))},
})"""  # noqa: E501


def _state(graph):
    return graph.evaluate(READ_GRAPH)


def _params(state):
    return {
        s["param"]: (
            tuple(s["values"][j])
            if isinstance(s["values"][j], list)
            else s["values"][j]
        )
        for s, j in zip(state["meta"]["sliders"], state["active"])
    }


def _move(page, graph, k, state):
    """Click slider k's rail at its far end from the current step (first or last step);
    return the new state."""
    rails = graph.query_selector_all(".slider-rail-touch-rect")
    box = rails[k].bounding_box()
    n = len(state["meta"]["sliders"][k]["values"])
    current = state["active"][k]
    target = 0.02 if current > (n - 1) / 2 else 0.98
    page.mouse.click(box["x"] + target * box["width"], box["y"] + box["height"] / 2)
    page.wait_for_function(
        "([gd, k, old]) => gd._fullLayout.sliders[k].active !== old",
        arg=[graph, k, current],
        timeout=10_000,
    )
    page.wait_for_timeout(150)
    return _state(graph)


# --------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------


def test_pages_hold_figures_as_data_and_stay_under_budget(site):
    """No page inlines or blocks on plotly.js: a figure is its JSON beside an empty
    div, and book.js (once per page) loads plotly.js after the text."""
    for page in sorted(HTML.rglob("*.html")):
        text = page.read_text(encoding="utf-8", errors="replace")
        if "plotly-graph-div" in text:
            assert "plotly.js v" not in text, f"{page.name} inlines plotly.js"
            assert "vendor/plotly/plotly.min.js" not in text, (
                f"{page.name} loads plotly.js with the page"
            )
            assert text.count('class="book-plotly-json"') == text.count(
                'class="plotly-graph-div"'
            ), page.name
            assert len(re.findall(r"<script[^>]*_static/book\.js", text)) == 1, (
                page.name
            )
            assert page.stat().st_size < PAGE_BUDGET, (
                f"{page.name}: {page.stat().st_size} bytes"
            )
        assert (
            "cdn.jsdelivr.net/npm/mathjax" not in text and "require.min.js" not in text
        ), page.name


def test_math_is_typeset(gallery):
    page = gallery.page
    assert page.evaluate("document.querySelectorAll('mjx-container').length") > 20
    raw = page.evaluate(
        "[...document.querySelectorAll('article p')].filter(p => "
        "/\\\\varepsilon|\\$/.test(p.textContent)).length"
    )
    assert raw == 0, "some paragraphs still show raw TeX"


def test_embedded_widget_state_renders_and_links_in_the_browser(gallery):
    page = gallery.page
    cell = (
        page.locator(".jupyter-widgets")
        .filter(has=page.locator(".widget-slider"))
        .first
    )
    cell.scroll_into_view_if_needed()
    assert page.locator(".widget-slider").count() >= 1
    box = page.locator(".jupyter-widgets input[type='number']").first
    box.fill("20")
    box.press("Enter")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.widget-readout')].some(r => "
        "(r.textContent || r.value || '').trim() === '20')",
        timeout=10_000,
    )
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator(".cell_output").filter(
        has=page.locator(".widget-slider")
    ).first.screenshot(path=str(SHOTS / "gallery-widget-state.png"))


def test_every_slider_moves_the_data_to_the_package_values(gallery):
    page = gallery.page
    graphs = page.query_selector_all(".plotly-graph-div")
    seen = set()
    SHOTS.mkdir(parents=True, exist_ok=True)
    for graph in graphs:
        graph.scroll_into_view_if_needed()
        state = _state(graph)
        name = state["meta"]["explorable"]
        seen.add(name)
        check = CHECKS[name]
        check(_params(state), state["data"], state["layout"])  # defaults
        assert len(graph.query_selector_all(".slider-rail-touch-rect")) == len(
            state["meta"]["sliders"]
        )
        for k in range(len(state["meta"]["sliders"])):
            before = state
            state = _move(page, graph, k, state)
            assert state["active"][k] != before["active"][k]
            changed = (
                any(
                    a["y"] != b["y"] or a["visible"] != b["visible"] or a["x"] != b["x"]
                    for a, b in zip(state["data"], before["data"])
                )
                or state["layout"] != before["layout"]
            )
            assert changed, f"{name}: moving slider {k} changed nothing"
            # all sliders now sit at some combination: the plot must equal the package's
            # values there
            check(_params(state), state["data"], state["layout"])
        graph.screenshot(path=str(SHOTS / f"gallery-{name}.png"))
    assert seen == set(CHECKS)
    page.screenshot(path=str(SHOTS / "gallery-page.png"), full_page=True)


def test_a_plain_page_has_a_clean_console_too(gallery):
    """The stock theme's errors (THEBE_JS_URL declared twice, invalid theme mode) would
    show on every page."""
    page = gallery.open("book/intro.html")
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(500)
    assert page.evaluate("document.documentElement.dataset.mode") == "light"
    # declared once, so the script ran
    assert page.evaluate("typeof THEBE_JS_URL") == "string"
    page.close()


def test_the_page_also_works_opened_from_disk(gallery):
    """file:// (no server): plotly.js, MathJax (and its fonts) and the widget manager
    load from relative paths."""
    errors, outside = [], []
    page = gallery.browser.new_page(viewport={"width": 1280, "height": 1000})
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    page.route(
        "**/*",
        lambda r: (
            r.continue_()
            if urlparse(r.request.url).scheme in ("file", "data", "blob")
            else (outside.append(r.request.url), r.abort())
        ),
    )
    page.goto((HTML / PAGE).as_uri(), wait_until="load", timeout=120_000)
    page.evaluate("() => Promise.all([bookDrawAllFigures(), bookLoadWidgets()])")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.plotly-graph-div')].filter(g => "
        f"g._fullData).length === {N_FIGURES}",
        timeout=120_000,
    )
    page.wait_for_function(
        "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
        timeout=60_000,
    )
    page.evaluate("() => MathJax.startup.promise")
    page.wait_for_selector(".jupyter-widgets .widget-slider", timeout=60_000)
    assert page.evaluate("document.querySelectorAll('mjx-container').length") > 20
    assert outside == [] and errors == [], (outside, errors)
    page.close()


def test_no_request_left_the_machine_and_the_console_is_clean(gallery):
    assert gallery.blocked == [], gallery.blocked
    errors = [
        m
        for m in gallery.console
        if not any(key in m for key in IGNORED_CONSOLE_ERRORS)
    ]
    assert errors == [], json.dumps(errors, indent=1)
