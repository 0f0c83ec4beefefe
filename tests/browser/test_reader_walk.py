"""Every page of both editions as a reader meets it: in headless Chromium, at a phone's
390 x 844 and a desktop's 1440 x 900, served from 127.0.0.1 with every other host
blocked.

On each page:

- the navigation opens and closes: on a phone the hamburger opens the chapter list (the
  theme's dialog, with links on screen) and the contents button opens the page's
  contents; on a desktop the hamburger collapses the sidebar and brings it back;
- nothing is wider than the screen (the document does not scroll sideways), and nothing
  in the article is cut off by a box that hides what does not fit (a wide equation or
  table scrolls in its own box instead), and on a desktop every display equation fits
  its column;
- every plotly figure is drawn with each plotting area at least 150 px wide, its
  text inside the figure and no two texts on top of each other, and every image loaded;
- no TeX is left untypeset, every Chinese character (the Chinese pages, the English
  pages' 中文 switch) has a glyph in the site's own CJK font, and the console stays free
  of errors (failed requests included).

The language switch is checked on one page per edition: it opens the other edition's
page in the same tab, at the section the reader was reading.

Reads the one book build of the test run (the ``built_book`` fixture). With
``DPO_GRPO_SCREENSHOTS=1`` it saves full-page screenshots of chapters 1, 3b, 4 and 6,
the lab and the explorables, in both editions and at both sizes, to
``artifacts/screenshots/walk/``, for a person to look at.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

from testing_support import (  # noqa: E402
    local_only_route,
    skip_without_chromium,
)

skip_without_chromium()  # skips the module where Chromium or Playwright is missing

ROOT = Path(__file__).resolve().parents[2]
STEMS = sorted(p.stem for p in (ROOT / "book").glob("*.ipynb")) + sorted(
    p.stem for p in (ROOT / "book").glob("*.md")
)
EDITIONS = {"en": "", "zh": "zh/"}
VIEWPORTS = {"phone": (390, 844), "desktop": (1440, 900)}
MIN_PLOT_WIDTH = 150
SHOTS = ROOT / "artifacts" / "screenshots" / "walk"
SHOT_STEMS = (
    "01_why",
    "03b_grpo_derivations",
    "04_code",
    "06_costs_and_limits",
    "lab_tiny_grpo",
    "explorables",
)

#: In the page: every figure drawn, the widget manager loaded (where the page has
#: widgets), MathJax done.
SETTLE = """async () => {
  if (window.bookDrawAllFigures) { await window.bookDrawAllFigures(); }
  if (window.bookLoadWidgets) { await window.bookLoadWidgets(); }
  // images load as the reader scrolls to them (loading="lazy"): load them all
  const images = [...document.querySelectorAll('img[loading="lazy"]')];
  images.forEach(img => { img.loading = 'eager'; });
  await Promise.all(images.map(img => img.decode().catch(() => null)));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
}"""

#: Wider than the screen: the document's width, and the elements that stick out of it
#: (not inside a box that scrolls or clips them).
OVERFLOW = """() => {
  const vw = document.documentElement.clientWidth;
  const clipped = el => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      const s = getComputedStyle(p);
      if (s.overflowX !== 'visible' || s.display === 'none') return true;
    }
    return false;
  };
  const out = [];
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.width && r.right > vw + 1 && !clipped(el)) {
      out.push(`${el.tagName.toLowerCase()}.${[...el.classList].join('.')} ` +
               `right=${Math.round(r.right)}`);
      if (out.length > 4) break;
    }
  }
  // cut: content of the article wider than a box that hides the rest (a box that
  // scrolls shows it)
  const cut = [];
  for (const box of document.querySelectorAll('article.bd-article *')) {
    const s = getComputedStyle(box);
    if (!['hidden', 'clip'].includes(s.overflowX) || !box.clientWidth) continue;
    // inline boxes, and MathJax's copy for screen readers (hidden on purpose)
    if (s.display.startsWith('inline') || box.closest('mjx-assistive-mml')) continue;
    if (box.scrollWidth > box.clientWidth + 2) {
      cut.push(`${box.tagName.toLowerCase()}.${[...box.classList].join('.')}: ` +
               `${box.scrollWidth} px of content in ${box.clientWidth} px, ` +
               `"${box.textContent.trim().slice(0, 40)}"`);
      if (cut.length > 4) break;
    }
  }
  // a display equation wider than its column (it scrolls in its box: fine on a phone,
  // not on a desktop)
  const math = [...document.querySelectorAll('mjx-container[display="true"]')]
    .filter(m => m.scrollWidth > m.clientWidth + 2)
    .map(m => `${m.scrollWidth} px in ${m.clientWidth} px: ` +
              `"${m.textContent.slice(0, 40)}"`);
  return {scrollWidth: document.documentElement.scrollWidth, vw, out, cut, math};
}"""

#: Each drawn figure: the widths of its plotting areas, texts outside the figure's box,
#: and pairs of texts that overlap (by more than a sliver).
FIGURES = """() => {
  const boxes = el => el.getBoundingClientRect();
  const report = [];
  document.querySelectorAll('.plotly-graph-div').forEach((gd, k) => {
    const name = gd.id || `figure ${k}`;
    if (!gd._fullLayout) { report.push(`${name}: not drawn`); return; }
    for (const [id, plot] of Object.entries(gd._fullLayout._plots || {})) {
      const w = plot.xaxis._length;
      if (w < %(min)d) {
        report.push(`${name}: subplot ${id} is ${Math.round(w)} px wide`);
      }
    }
    const fig = boxes(gd.querySelector('.main-svg'));
    const texts = [...gd.querySelectorAll('svg text')].filter(t => {
      if (!t.textContent.trim() || t.closest('.hoverlayer')) return false;
      const s = getComputedStyle(t);
      if (s.display === 'none' || s.visibility === 'hidden' || s.opacity === '0') {
        return false;
      }
      for (let p = t.parentElement; p && p !== gd; p = p.parentElement) {
        const ps = getComputedStyle(p);
        if (ps.display === 'none' || ps.opacity === '0') return false;
      }
      const r = boxes(t);
      return r.width > 0 && r.height > 0;
    }).map(t => ({text: t.textContent.trim().slice(0, 40), r: boxes(t)}));
    for (const t of texts) {
      if (t.r.left < fig.left - 2 || t.r.right > fig.right + 2 ||
          t.r.top < fig.top - 2 || t.r.bottom > fig.bottom + 2) {
        report.push(`${name}: "${t.text}" is outside the figure`);
      }
    }
    for (let i = 0; i < texts.length; i++) {
      for (let j = i + 1; j < texts.length; j++) {
        const a = texts[i].r, b = texts[j].r;
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 3 && h > 3 && w * h > 0.15 * Math.min(a.width * a.height,
                                                     b.width * b.height)) {
          report.push(`${name}: "${texts[i].text}" overlaps "${texts[j].text}"`);
        }
      }
    }
  });
  document.querySelectorAll('article img').forEach(img => {
    if (!img.complete || !img.naturalWidth) report.push(`image ${img.src} not loaded`);
  });
  return report;
}""" % {"min": MIN_PLOT_WIDTH}

#: TeX a reader would see as source: MathJax's delimiters left in the text.
RAW_TEX = """() => {
  const art = document.querySelector('article.bd-article');
  if (!art) return [];
  const walker = document.createTreeWalker(art, NodeFilter.SHOW_TEXT);
  const out = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const skip = 'pre, code, script, mjx-container, .highlight';
    if (n.parentElement.closest(skip)) continue;
    const m = n.textContent.match(/(\\$\\$|\\\\\\(|\\\\\\[|\\\\frac|\\\\mathrm)/);
    if (m) out.push(n.textContent.trim().slice(0, 80));
  }
  return out;
}"""


#: Chinese characters a reader would see as boxes: every Han character of the page's
#: text must be covered by a loaded face of the site's own CJK font (a machine with no
#: CJK font, such as this one, shows boxes otherwise).
CJK_GLYPHS = """async () => {
  await document.fonts.ready;
  const han = [...new Set(document.body.innerText.match(/[\\u3400-\\u9fff]/g) || [])];
  if (!han.length) return [];
  // the text asks for it: a font whose load has not started yet is waited for too
  await document.fonts.load('16px "Noto Sans SC"', han.join(''));
  const faces = [...document.fonts].filter(
    f => f.family.replace(/["']/g, '') === 'Noto Sans SC');
  const ranges = faces.flatMap(f => f.unicodeRange.split(',')).map(r => {
    const [a, b] = r.trim().replace(/^U\\+/i, '').split('-');
    return [parseInt(a, 16), parseInt(b || a, 16)];
  });
  const uncovered = han.filter(c => !ranges.some(
    ([a, b]) => a <= c.codePointAt(0) && c.codePointAt(0) <= b));
  const out = [];
  if (uncovered.length) out.push(`no served glyph for ${uncovered.join('')}`);
  if (!faces.some(f => f.status === 'loaded')) out.push('the CJK font did not load');
  // drawn in it: a Han character is about as wide as the font size, a box about half
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let measured = 0;
  for (let n = walker.nextNode(); n && measured < 40; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el || !el.getClientRects().length) continue;
    if (el.closest('svg, mjx-container')) continue;
    const m = /[\\u4e00-\\u9fff]{2,}/.exec(n.data);
    if (!m) continue;
    const range = document.createRange();
    range.setStart(n, m.index);
    range.setEnd(n, m.index + m[0].length);
    // summed over the line boxes: a run may wrap
    const width = [...range.getClientRects()].reduce((w, r) => w + r.width, 0);
    const size = parseFloat(getComputedStyle(el).fontSize);
    measured += 1;
    if (width && width < 0.8 * size * m[0].length) {
      out.push(`"${m[0].slice(0, 12)}" is drawn ${Math.round(width)} px wide at ` +
               `${size} px: boxes, not the CJK font`);
      break;
    }
  }
  return out;
}"""


class Tab:
    """One browser tab at a viewport size, its console errors and failed requests
    recorded, every host but the local server blocked."""

    def __init__(self, browser, site, size):
        width, height = size
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.page = self.context.new_page()
        self.errors, self.blocked = [], []
        self.page.on(
            "console",
            lambda m: (
                self.errors.append(f"{m.text} ({m.location.get('url', '')})")
                if m.type == "error"
                else None
            ),
        )
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        self.page.on(
            "response",
            lambda r: (
                self.errors.append(f"HTTP {r.status}: {r.url}")
                if r.status >= 400
                else None
            ),
        )
        self.page.route("**/*", local_only_route(site, self.blocked))
        self.site = site

    def open(self, path):
        self.errors.clear()
        self.page.goto(f"{self.site}/{path}", wait_until="load", timeout=120_000)
        self.page.evaluate(SETTLE)
        return self.page


def _navigation_problems(page, phone: bool) -> list[str]:
    problems = []
    toggle = page.locator(".bd-header-article .primary-toggle")
    if not toggle.is_visible():
        return ["the sidebar button is not visible"]
    toggle.click()
    page.wait_for_timeout(350)
    if phone:
        dialog = page.locator("#pst-primary-sidebar-modal")
        links = page.locator("#pst-primary-sidebar-modal nav a.reference")
        if not dialog.evaluate("d => d.open"):
            problems.append("the hamburger did not open the chapter list")
        elif not links.count() or not links.first.is_visible():
            problems.append("the chapter list opened without visible links")
        else:
            box = links.first.bounding_box()
            if box["x"] < 0 or box["x"] > 390:
                problems.append(f"the chapter list is off screen (x = {box['x']})")
        page.keyboard.press("Escape")
        page.wait_for_timeout(200)
        if dialog.evaluate("d => d.open"):
            problems.append("Escape did not close the chapter list")
        contents = page.locator(".bd-header-article .secondary-toggle")
        if contents.count() and contents.is_visible():
            contents.click()
            page.wait_for_timeout(350)
            modal = page.locator("#pst-secondary-sidebar-modal")
            if not modal.evaluate("d => d.open"):
                problems.append("the contents button did not open the page's contents")
            page.keyboard.press("Escape")
            page.wait_for_timeout(200)
    else:
        sidebar = page.locator(".bd-sidebar-primary")
        if sidebar.is_visible():
            problems.append("the hamburger did not collapse the sidebar")
        toggle.click()
        page.wait_for_timeout(350)
        if not sidebar.is_visible():
            problems.append("a second click did not bring the sidebar back")
    return problems


@pytest.mark.parametrize("viewport", sorted(VIEWPORTS))
@pytest.mark.parametrize("edition", sorted(EDITIONS))
def test_every_page_reads_at_this_size(browser, site, edition, viewport):
    tab = Tab(browser, site, VIEWPORTS[viewport])
    phone = viewport == "phone"
    failures = {}
    for stem in STEMS:
        path = f"{EDITIONS[edition]}book/{stem}.html"
        page = tab.open(path)
        problems = []
        wide = page.evaluate(OVERFLOW)
        if wide["scrollWidth"] > wide["vw"]:
            problems.append(
                f"the page is {wide['scrollWidth']} px wide on a {wide['vw']} px "
                f"screen: {wide['out']}"
            )
        problems += [f"cut off: {c}" for c in wide["cut"]]
        if not phone:
            problems += [f"equation wider than the column: {m}" for m in wide["math"]]
        problems += page.evaluate(FIGURES)
        problems += [f"raw TeX: {t}" for t in page.evaluate(RAW_TEX)]
        problems += [f"Chinese as boxes: {t}" for t in page.evaluate(CJK_GLYPHS)]
        if os.environ.get("DPO_GRPO_SCREENSHOTS") and stem in SHOT_STEMS:
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(
                path=str(SHOTS / f"{edition}-{viewport}-{stem}.png"), full_page=True
            )
        problems += _navigation_problems(page, phone)
        problems += [f"console: {e}" for e in tab.errors]
        if problems:
            failures[path] = problems
    tab.context.close()
    assert tab.blocked == [], f"requests left the machine: {tab.blocked[:5]}"
    assert failures == {}, "\n".join(
        f"{path}:\n  " + "\n  ".join(p[:8]) for path, p in failures.items()
    )


@pytest.mark.parametrize("edition", sorted(EDITIONS))
def test_the_language_switch_keeps_the_tab_and_the_section(browser, site, edition):
    tab = Tab(browser, site, VIEWPORTS["desktop"])
    page = tab.open(f"{EDITIONS[edition]}book/04_code.html")
    sections = page.locator("article.bd-article section[id]")
    index = min(3, sections.count() - 1)
    page.evaluate(
        "i => document.querySelectorAll('article.bd-article section[id]')[i]"
        ".scrollIntoView()",
        index,
    )
    pages_before = len(tab.context.pages)
    # a tap where the button is (Playwright's own click scrolls the page first)
    box = page.locator("a.btn-language-switch").bounding_box()
    with page.expect_navigation():
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.evaluate(SETTLE)
    other = "zh/" if edition == "en" else ""
    assert len(tab.context.pages) == pages_before, "the switch opened a new tab"
    assert page.url.split("#")[0].endswith(f"/{other}book/04_code.html"), page.url
    target = page.evaluate(
        "() => [...document.querySelectorAll('article.bd-article section[id]')]"
        ".map(s => s.id)"
    )
    assert page.url.endswith("#" + target[index]), (page.url, target[index])
    top = page.evaluate(
        f"() => document.querySelectorAll('article.bd-article section[id]')"
        f"[{index}].getBoundingClientRect().top"
    )
    assert abs(top) < 120, f"the section is not at the top of the screen ({top} px)"
    tab.context.close()
