"""Chinese text renders in the built Chinese site (issue #32), in headless Chromium,
served from 127.0.0.1 with every other host blocked: the site's own web font, "Noto
Sans SC" (mplfonts' Noto Sans CJK SC cut down to the site's characters by
``book/_ext/dpo_grpo_book.write_cjk_subset``, in ``_static/vendor/cjk/``), is loaded and
covers every Han character of the page's text, and every plotly figure draws its text in
that font. A system CJK font (or none) would pass unseen on one machine and show
missing-glyph boxes on another; the served font is the same everywhere.

Three pages: a chapter with a plotly figure, the explorables and the lab. Screenshots
(the top of each page and its first figure: plotly, else a matplotlib image) go to
``artifacts/browser/zh-*.png``, to be looked at.

Reads the one book build of the test run (the ``built_book`` fixture of conftest.py).
Skipped when ``/usr/bin/chromium`` is missing (``.ci/run`` installs it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("zh_fonts")]

from testing_support import (
    local_only_route,
    serve_directory,
    skip_without_chromium,
)

skip_without_chromium()  # skips the module where Chromium or Playwright is missing

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "artifacts" / "browser"
FAMILY = "Noto Sans SC"
#: name -> page of the Chinese site (below _build/html/)
PAGES = {
    "chapter": "zh/book/01_why.html",
    "explorables": "zh/book/explorables.html",
    "lab": "zh/book/lab_tiny_grpo.html",
}

#: After the plotly figures are drawn and the page's fonts have loaded: the distinct Han
#: characters of the page's rendered text (MathJax left out), the Noto Sans SC faces the
#: page has and has loaded, which of the characters no face's unicode-range covers, and
#: whether document.fonts.check says the font is ready for all of them.
FONT_STATE = """async (family) => {
  await document.fonts.ready;
  const root = document.querySelector('main') || document.body;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {acceptNode: (n) => {
    const el = n.parentElement;
    if (!el || el.closest('mjx-container, .MathJax, script, style, noscript')) return NodeFilter.FILTER_REJECT;
    return el.getClientRects().length ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT;
  }});
  let text = '';
  while (walker.nextNode()) text += walker.currentNode.data;
  const han = [...new Set(text.match(/[\\u3400-\\u9fff\\uf900-\\ufaff]/g) || [])].join('');
  const faces = [...document.fonts].filter((f) => f.family.replace(/["']/g, '') === family);
  const ranges = faces.flatMap((f) => f.unicodeRange.split(',')).map((r) => {
    const [a, b] = r.trim().replace(/^U\\+/i, '').split('-');
    return [parseInt(a, 16), parseInt(b || a, 16)];
  });
  const uncovered = [...han].filter((c) => {
    const cp = c.codePointAt(0);
    return !ranges.some(([a, b]) => a <= cp && cp <= b);
  }).join('');
  return {
    han, uncovered,
    faces: faces.length,
    loaded: faces.filter((f) => f.status === 'loaded').length,
    check: document.fonts.check(`16px "${family}"`, han),
  };
}"""  # noqa: E501

#: The font family of every text element of every plotly figure that holds Han
#: characters.
FIGURE_FONTS = """() => [...document.querySelectorAll('.plotly-graph-div')].map((g) =>
  [...g.querySelectorAll('text')].filter((t) => /[\\u3400-\\u9fff]/.test(t.textContent))
    .map((t) => ({text: t.textContent, font: getComputedStyle(t).fontFamily})))"""


@pytest.fixture(scope="module")
def site(built_book):
    html = built_book / "html"
    missing = [page for page in PAGES.values() if not (html / page).is_file()]
    assert not missing, f"the Chinese site lacks {missing}: run make book"
    with serve_directory(html) as url:
        yield url


@pytest.fixture(scope="module", params=sorted(PAGES))
def opened(request, site, browser):
    """(name, page, state): the page drawn, its font state (FONT_STATE) and the blocked
    requests."""
    name, blocked = request.param, []
    route = local_only_route(site, blocked)

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.route("**/*", route)
    page.goto(f"{site}/{PAGES[name]}", wait_until="load", timeout=120_000)
    # book.js draws a figure as it nears the screen: draw them all
    page.evaluate("() => window.bookDrawAllFigures()")
    state = page.evaluate(FONT_STATE, FAMILY)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"zh-{name}.png"))
    # the first plotly figure, else the first image the page's code drew (matplotlib,
    # its CJK font from the mplfonts package)
    figure = page.query_selector(".plotly-graph-div") or page.query_selector(
        ".cell_output img"
    )
    if figure is not None:
        figure.scroll_into_view_if_needed()
        figure.screenshot(path=str(SHOTS / f"zh-{name}-figure.png"))
    yield name, page, state, blocked
    page.close()


def test_the_served_cjk_font_covers_the_pages_chinese_text(opened):
    name, _, state, blocked = opened
    assert len(state["han"]) > 50, f"{name}: too little Chinese text on the page"
    assert state["faces"], (
        f"{name}: the page declares no {FAMILY!r} font face (the font is not served)"
    )
    assert state["loaded"], f"{name}: no {FAMILY!r} face was loaded for the page's text"
    assert not state["uncovered"], (
        f"{name}: {FAMILY} has no glyph for {state['uncovered']!r}"
    )
    assert state["check"], (
        f"{name}: {FAMILY} is not loaded for all of the page's Chinese characters"
    )
    assert not blocked, f"{name}: requests to other hosts: {blocked[:5]}"


def test_plotly_figures_draw_chinese_in_the_served_font(opened):
    name, page, _, _ = opened
    figures = page.evaluate(FIGURE_FONTS)
    if name in ("chapter", "explorables"):
        assert figures, f"{name}: no plotly figure on the page"
    for i, texts in enumerate(figures):
        assert texts, f"{name}: figure {i} has no Chinese text"
        wrong = [t for t in texts if FAMILY not in t["font"]]
        assert not wrong, (
            f"{name}: figure {i} draws Chinese without {FAMILY}: {wrong[:3]}"
        )
