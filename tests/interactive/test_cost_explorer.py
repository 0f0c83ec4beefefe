"""dpo_grpo.interactive.cost_explorer: the chapter-6 cost figure (static HTML, dropdown
and sliders) and the live ipywidgets explorer, against the cost model of
dpo_grpo.chapters.costs."""

import json

import pytest

from dpo_grpo.chapters import costs as c
from dpo_grpo.interactive import cost_explorer as ce

N7 = 7_000_000_000


def test_figure_is_self_contained_and_small():
    pytest.importorskip("plotly")
    fig = ce.cost_figure()
    payload = fig.to_json()
    assert len(payload) < 1_000_000
    layout = json.loads(payload)["layout"]
    n_scen = len(ce.DEFAULT_MODEL_SIZES) * 2
    assert (
        len(layout["sliders"]) == n_scen
        and len(layout["updatemenus"][0]["buttons"]) == n_scen
    )
    assert sum(bool(s.get("visible", True)) for s in layout["sliders"]) == 1
    # each slider step shows one length's 6 lines + the 4 memory bars of its own
    # scenario
    for s in layout["sliders"]:
        for step in s["steps"]:
            assert sum(step["args"][0]["visible"]) == 6 + 4
    # the data behind the default view is the model's own numbers
    grpo = next(t for t in fig.data if t.visible and t.name == "GRPO")
    # default view: the base workload's size
    w = c.Workload(n_params=N7, answer_len=1024, group_size=2)
    # 4 digits
    assert grpo.y[0] == pytest.approx(
        sum(c.step_time(c.step_cost("grpo", w)).values()), rel=1e-3
    )


def test_explorer_builds_and_recomputes():
    pytest.importorskip("ipywidgets")
    ui = ce.cost_explorer()
    assert ui.state["workload"].group_size == 8
    ui.controls["group_size"].value = 16  # the callback recomputes synchronously
    ui.controls["reward"].value = 7e9
    w = ui.state["workload"]
    assert w.group_size == 16 and w.reward_params == 7_000_000_000
    assert ui.state["text"] == c.format_rows(c.budget_rows(w))


def test_figure_menu_and_sliders_work_in_a_browser(tmp_path):
    """The dropdown swaps scenario and slider, the slider then changes the answer length
    (headless Chromium)."""
    pytest.importorskip("plotly")
    sync_api = pytest.importorskip("playwright.sync_api")
    import shutil

    import plotly.io as pio

    fig = ce.cost_figure()
    page = tmp_path / "fig.html"
    page.write_text(
        pio.to_html(fig, include_plotlyjs=True, full_html=True, div_id="cf"),
        encoding="utf-8",
    )
    state = """() => { const g = document.getElementById('cf');
        const vis = g.data.map((t, i) => t.visible === true ? i : -1).filter(i => i >= 0);
        return {vis: vis, sliders: g.layout.sliders.map(s => s.visible)}; }"""  # noqa: E501
    with sync_api.sync_playwright() as p:
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        try:
            browser = (
                p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
                if exe
                else p.chromium.launch()
            )
        except Exception as exc:  # no browser installed here
            pytest.skip(f"no headless Chromium: {exc}")
        try:
            pg = browser.new_page(viewport={"width": 760, "height": 760})
            pg.goto(page.as_uri())
            pg.wait_for_function(
                "() => document.getElementById('cf') && "
                "document.getElementById('cf').data"
            )
            before = pg.evaluate(state)
            head = pg.query_selector(".updatemenu-item-rect").bounding_box()
            pg.mouse.click(head["x"] + 10, head["y"] + head["height"] / 2)
            pg.wait_for_timeout(300)
            item = pg.query_selector_all(".updatemenu-dropdown-button")[
                3
            ].bounding_box()
            pg.mouse.click(item["x"] + 10, item["y"] + item["height"] / 2)
            pg.wait_for_timeout(300)
            after_menu = pg.evaluate(state)
            rail = [
                b
                for b in (
                    r.bounding_box() for r in pg.query_selector_all(".slider-rail-rect")
                )
                if b and b["width"] > 0
            ]
            assert len(rail) == 1  # only the chosen scenario's slider is shown
            pg.mouse.click(
                rail[0]["x"] + rail[0]["width"] - 3,
                rail[0]["y"] + rail[0]["height"] / 2,
            )
            pg.wait_for_timeout(300)
            after_slider = pg.evaluate(state)
        finally:
            browser.close()
    # 7B rule -> 7B RM
    assert before["sliders"].index(True) == 2 and after_menu["sliders"].index(True) == 3
    assert set(after_menu["vis"]).isdisjoint(before["vis"])
    # same scenario's memory bars
    assert after_slider["vis"][-4:] == after_menu["vis"][-4:]
    # another answer length's lines
    assert after_slider["vis"][:6] != after_menu["vis"][:6]
