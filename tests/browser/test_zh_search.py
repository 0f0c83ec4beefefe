"""The Chinese site's search finds Chinese terms (issue #38), in headless Chromium,
served from 127.0.0.1 with every other host blocked: the site's own search page
(``zh/search.html?q=…``) is given a glossary term and must list the glossary and the
chapters that define it.

Sphinx indexes Chinese words only when ``jieba`` is installed (``sphinx.search.zh``);
without it the index holds no Chinese word and every such search finds nothing. The
browser does not split a query into words as jieba does: a term of
``i18n/zh/glossary.yml`` is found as typed because the Chinese build gives jieba those
terms as a dictionary (``scripts/zh_edition.py``).

Reads the one book build of the test run (the ``built_book`` fixture of conftest.py).
Skipped when ``/usr/bin/chromium`` is missing (``.ci/run`` installs it).
"""

from __future__ import annotations

from urllib.parse import quote

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("zh_search")]

from testing_support import (
    local_only_route,
    serve_directory,
    skip_without_chromium,
)

skip_without_chromium()  # skips the module where Chromium or Playwright is missing

#: a term (its English) -> pages of the Chinese site that define it, all of which its
#: search must list: the glossary and the chapters with a section named after it
EXPECTED = {
    # critic: 1.2 为什么价值网络是最难自圆其说的成本
    "价值网络": ["book/glossary", "book/01_why"],
    # advantage: 3.4 GRPO 的组内相对优势
    "优势": ["book/glossary", "book/03b_grpo_derivations"],
    # group-relative advantage, a longer term of the glossary: 3.4 again
    "组内相对优势": ["book/glossary", "book/03b_grpo_derivations"],
    # reference model: 2.4 参考模型不是价值网络; 3.2, the KL-regularised objective
    "参考模型": [
        "book/glossary",
        "book/02_minimal_understanding",
        "book/03_derivations",
    ],
    # clip: 2.3 GRPO 保留 PPO 的概率比和裁剪; 3.5, the clipped PPO objective of GRPO
    "裁剪": [
        "book/glossary",
        "book/02_minimal_understanding",
        "book/03b_grpo_derivations",
    ],
}

#: Sphinx's search page writes its summary once the query has run
DONE = """() => {
  const summary = document.querySelector('#search-results .search-summary');
  return summary !== null && summary.textContent.trim() !== '';
}"""
#: the pages listed, as paths without the site's address and ``.html``
FOUND = """(site) => [...document.querySelectorAll('#search-results ul.search li a')]
  .map((a) => new URL(a.href).pathname.slice(new URL(site).pathname.length)
    .replace(/^\\//, '').replace(/\\.html$/, ''))"""


def search(browser, site: str, query: str) -> tuple[list[str], str, list[str]]:
    """Search the Chinese site at ``site`` (its address, ending in ``zh``) for
    ``query`` through its own search page: the pages listed (``book/glossary``, ...),
    the summary line and the blocked requests."""
    blocked: list[str] = []
    page = browser.new_page()
    try:
        page.route("**/*", local_only_route(site, blocked))
        page.goto(f"{site}/search.html?q={quote(query)}", wait_until="load")
        page.wait_for_function(DONE, timeout=60_000)
        summary = page.inner_text("#search-results .search-summary")
        return sorted(set(page.evaluate(FOUND, site))), summary, blocked
    finally:
        page.close()


@pytest.fixture(scope="module")
def site(built_book):
    html = built_book / "html"
    assert (html / "zh" / "search.html").is_file(), "no Chinese site: run make book"
    with serve_directory(html) as url:
        yield f"{url}/zh"


@pytest.mark.parametrize("term", sorted(EXPECTED))
def test_search_finds_the_pages_that_define_a_chinese_term(site, browser, term):
    found, summary, blocked = search(browser, site, term)
    missing = [p for p in EXPECTED[term] if p not in found]
    assert not missing, (
        f"searching {term!r} did not list {missing} ({summary!r}; listed: {found[:8]})"
    )
    assert not blocked, f"requests to other hosts: {blocked[:5]}"
