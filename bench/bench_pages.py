"""Page weight of the built site: what a first visit to each page of both editions
transfers, compressed as a static host serves it, and how soon its first content
appears with the CPU slowed 4x, measured in headless Chromium.

Run from the repository root after a build of the site (``make book``):
``.venv/bin/python bench/bench_pages.py [SITE] [--pages 01_why,04_code]
[--editions en,zh] [--repeats 3]`` (SITE defaults to ``_build/html``; 5-20 s a visit
on 2 cores, 20-40 minutes for every page at 3 visits). Needs Chromium at
/usr/bin/chromium and Playwright, as the browser tests do. Prints a line per page and a
table at the end.

Output: ``./page-weight.json`` in the *current working directory* unless ``--out``
says otherwise. Rerunning never overwrites the book's shipped result: the benchmark
appendix renders ``code/dpo_grpo/data/bench_results/page-weight.json``, and that file
is written only when given explicitly as ``--out``.

Pages: every ``book/*.html`` of the English site and ``zh/book/*.html`` of the Chinese
one (keys ``en/<stem>``, ``zh/<stem>``), served from 127.0.0.1; every request to another
host is blocked (and recorded). Each visit is a first visit: a new browser context
(empty cache), a fixed viewport, no scrolling (a reader's first screen: lazy content
below it is not loaded), the CPU slowed through CDP (``Emulation.setCPUThrottlingRate``,
rate 4). The script waits for ``load``, then for the network to be idle (Playwright's
``networkidle``: no request for 500 ms), then ``--settle-ms`` more, and then reads
(``--scroll`` then also scrolls to the end and records what the whole page transfers
as ``transfer_scrolled``; the targets judge the first screen):

- transfer: every response the page loaded, its body compressed as GitHub Pages serves
  it: gzip (Python's ``gzip``, level 6) for text types (html, js, css, json, svg, txt,
  xml, map; by extension, else by content type) and the raw size for everything else
  (woff2, woff, png, jpg, gif, ico are compressed already). The raw total, totals per
  kind of resource and the 10 largest resources are recorded too;
- timing: ``first-contentful-paint`` (``performance.getEntriesByName``), and the
  navigation entry's ``domContentLoadedEventEnd`` and ``loadEventEnd``, in seconds from
  the start of the navigation; ``--repeats`` visits, the median and every sample.

The local server has no latency and sends uncompressed bodies: network time is not
modelled unless ``--network`` names a CDP throttling profile (``fast4g``, ``slow4g``);
even then the bytes on the wire are the raw ones, so such times are upper bounds.
Playwright's request routing (which blocks other hosts) adds a little time per request.

Targets (issue #38, :data:`dpo_grpo.chapters.benchmarks.PAGE_WEIGHT_TARGETS`): at most
1,500,000 compressed bytes and a median FCP of at most 2.5 s at 4x, for every page.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import platform
import socket
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "code"))

from dpo_grpo.chapters.benchmarks import (
    PAGE_WEIGHT_FILE,
    PAGE_WEIGHT_TARGETS,
    page_targets_met,
    page_weight_summary,
)

#: the default result file, relative to the current working directory (never the
#: package's data folder)
DEFAULT_OUT = Path(PAGE_WEIGHT_FILE)
EDITIONS = {"en": "book", "zh": "zh/book"}
GZIP_LEVEL = 6
CPU_THROTTLING_RATE = PAGE_WEIGHT_TARGETS["cpu_throttling_rate"]
TEXT_EXTENSIONS = (
    "html",
    "htm",
    "js",
    "mjs",
    "css",
    "json",
    "svg",
    "txt",
    "xml",
    "map",
)
RAW_EXTENSIONS = ("woff2", "woff", "png", "jpg", "jpeg", "gif", "ico", "webp", "avif")
TEXT_CONTENT_TYPES = ("text/", "javascript", "json", "xml", "svg")
KINDS = {
    "html": ("html", "htm"),
    "js": ("js", "mjs"),
    "css": ("css",),
    "data": ("json", "txt", "xml", "map"),
    "font": ("woff2", "woff", "ttf", "otf", "eot"),
    "image": ("svg", "png", "jpg", "jpeg", "gif", "ico", "webp", "avif"),
}
#: CDP ``Network.emulateNetworkConditions`` profiles: Chrome DevTools' presets
#: ("Fast 4G", "Slow 4G"), latency in ms, throughput in bytes per second
NETWORK_PROFILES = {
    "none": None,
    "fast4g": {
        "latency": 165.0,
        "downloadThroughput": 9e6 * 0.9 / 8,
        "uploadThroughput": 1.5e6 * 0.9 / 8,
    },
    "slow4g": {
        "latency": 562.5,
        "downloadThroughput": 1.6e6 * 0.9 / 8,
        "uploadThroughput": 750e3 * 0.9 / 8,
    },
}
#: scroll to the end a screen at a time (``--scroll``), so lazy content loads
SCROLL_JS = """async () => {
  for (let y = 0; y < document.documentElement.scrollHeight; y += innerHeight) {
    window.scrollTo(0, y);
    await new Promise((resolve) => setTimeout(resolve, 150));
  }
  window.scrollTo(0, document.documentElement.scrollHeight);
}"""
TIMING_JS = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  const s = (ms) => (ms ? ms / 1000 : null);
  return {fcp_s: fcp ? fcp.startTime / 1000 : null,
          dom_content_loaded_s: nav ? s(nav.domContentLoadedEventEnd) : null,
          load_s: nav ? s(nav.loadEventEnd) : null};
}"""


def _csv(text: str) -> list:
    return [t.strip() for t in text.split(",") if t.strip()]


def _viewport(text: str) -> dict:
    try:
        width, height = (int(n) for n in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected WIDTHxHEIGHT, got {text!r}"
        ) from None
    return {"width": width, "height": height}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        epilog="Default output: ./page-weight.json in the working directory; the "
        "book's shipped result is written only with an explicit --out "
        "code/dpo_grpo/data/bench_results/page-weight.json.",
    )
    ap.add_argument(
        "site",
        nargs="?",
        type=Path,
        default=Path("_build/html"),
        help="root of the built site, holding book/ and zh/book/ (default _build/html)",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="result file (default: ./page-weight.json in the working directory)",
    )
    ap.add_argument(
        "--pages",
        type=_csv,
        default=None,
        help="comma-separated page stems (01_why,explorables); default: every page",
    )
    ap.add_argument(
        "--editions",
        type=_csv,
        default=list(EDITIONS),
        help="comma-separated editions among en,zh (default both)",
    )
    ap.add_argument(
        "--repeats", type=int, default=3, help="visits per page (default 3)"
    )
    ap.add_argument(
        "--scroll",
        action="store_true",
        help="after the first screen is measured, scroll to the end and record what "
        "the whole page transfers too (transfer_scrolled; the targets judge the "
        "first screen)",
    )
    ap.add_argument(
        "--network",
        choices=list(NETWORK_PROFILES),
        default="none",
        help="CDP network throttling profile (default none: network time not modelled)",
    )
    ap.add_argument(
        "--settle-ms",
        type=int,
        default=500,
        help="wait after the network is idle (default 500)",
    )
    ap.add_argument(
        "--timeout-s",
        type=float,
        default=120.0,
        help="limit for load and network idle per visit (default 120)",
    )
    ap.add_argument(
        "--viewport",
        type=_viewport,
        default=_viewport("1280x800"),
        help="WIDTHxHEIGHT of the first screen (default 1280x800)",
    )
    return ap


def parse_args(argv=None) -> argparse.Namespace:
    """The parsed arguments; ``out`` is resolved against the working directory
    (default ``./page-weight.json``)."""
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    unknown = [e for e in args.editions if e not in EDITIONS]
    if unknown or not args.editions:
        ap.error(f"--editions: choose among {', '.join(EDITIONS)}, got {unknown}")
    if args.pages is not None:
        args.pages = [p.removesuffix(".html") for p in args.pages]
    args.out = (DEFAULT_OUT if args.out is None else args.out).resolve()
    return args


def page_list(site: Path, editions, stems=None) -> list:
    """``[(key, path relative to site)]`` of the pages to visit, edition by edition,
    stems sorted; a requested stem that no edition has, or an edition without pages,
    raises SystemExit."""
    found = []
    for edition in editions:
        folder = site / EDITIONS[edition]
        have = sorted(p.stem for p in folder.glob("*.html"))
        if not have:
            raise SystemExit(
                f"no {EDITIONS[edition]}/*.html under {site}: build the site first, "
                "or choose --editions"
            )
        for stem in have if stems is None else [s for s in stems if s in have]:
            found.append((f"{edition}/{stem}", f"{EDITIONS[edition]}/{stem}.html"))
    missing = sorted(set(stems or ()) - {k.partition("/")[2] for k, _ in found})
    if missing:
        raise SystemExit(f"no such page in {', '.join(editions)}: {missing}")
    return found


def compression_of(path: str, content_type: str = "") -> str:
    """``"gzip"`` for a text resource (by extension, else by content type), ``"raw"``
    for one that is sent as it is (already compressed, or unknown)."""
    ext = path.rsplit("/", 1)[-1].rpartition(".")[2].lower()
    if ext in TEXT_EXTENSIONS:
        return "gzip"
    if ext in RAW_EXTENSIONS:
        return "raw"
    ctype = content_type.split(";")[0].strip().lower()
    return "gzip" if any(t in ctype for t in TEXT_CONTENT_TYPES) else "raw"


def kind_of(path: str, content_type: str = "") -> str:
    ext = path.rsplit("/", 1)[-1].rpartition(".")[2].lower()
    for kind, exts in KINDS.items():
        if ext in exts:
            return kind
    ctype = content_type.split(";")[0].strip().lower()
    for kind, needle in (("html", "html"), ("js", "javascript"), ("css", "css")):
        if needle in ctype:
            return kind
    return "font" if "font" in ctype else "image" if "image" in ctype else "other"


class Compressor:
    """Compressed sizes, memoised by body (the shared scripts and styles recur on
    every page)."""

    def __init__(self, level: int = GZIP_LEVEL):
        self.level = level
        self._sizes: dict = {}

    def size(self, body: bytes, how: str) -> int:
        if how == "raw":
            return len(body)
        key = hashlib.sha1(body).digest()
        if key not in self._sizes:
            self._sizes[key] = len(gzip.compress(body, self.level, mtime=0))
        return self._sizes[key]


def transfer_summary(resources) -> dict:
    """Totals of one visit's resources (dicts with ``path``, ``kind``, ``encoding``,
    ``raw_bytes``, ``compressed_bytes``): overall, per kind, and the 10 largest
    compressed."""
    by_kind: dict = {}
    for r in resources:
        k = by_kind.setdefault(
            r["kind"], {"resources": 0, "compressed_bytes": 0, "raw_bytes": 0}
        )
        k["resources"] += 1
        k["compressed_bytes"] += r["compressed_bytes"]
        k["raw_bytes"] += r["raw_bytes"]
    return {
        "compressed_bytes": sum(r["compressed_bytes"] for r in resources),
        "raw_bytes": sum(r["raw_bytes"] for r in resources),
        "resources": len(resources),
        "by_kind": dict(
            sorted(by_kind.items(), key=lambda kv: -kv[1]["compressed_bytes"])
        ),
        "largest": sorted(resources, key=lambda r: -r["compressed_bytes"])[:10],
    }


def _visit(browser, base: str, rel: str, args, compressor) -> dict:
    from playwright.sync_api import Error as PlaywrightError
    from testing_support import local_only_route

    context = browser.new_context(viewport=args.viewport, service_workers="block")
    try:
        page = context.new_page()
        blocked, failed, responses = [], [], []
        page.route("**/*", local_only_route(base, blocked))
        page.on("response", lambda r: responses.append(r))
        page.on(
            "requestfailed",
            lambda r: failed.append(r.url) if r.url not in blocked else None,
        )
        cdp = context.new_cdp_session(page)
        cdp.send("Emulation.setCPUThrottlingRate", {"rate": CPU_THROTTLING_RATE})
        profile = NETWORK_PROFILES[args.network]
        if profile:
            cdp.send("Network.enable")
            cdp.send("Network.emulateNetworkConditions", {"offline": False, **profile})
        timeout_ms = args.timeout_s * 1e3
        page.goto(f"{base}/{rel}", wait_until="load", timeout=timeout_ms)
        try:
            page.wait_for_load_state("networkidle", timeout=timeout_ms)
            idle = True
        except PlaywrightError:
            idle = False
        page.wait_for_timeout(args.settle_ms)
        timing = page.evaluate(TIMING_JS)
        first_screen = len(responses)
        if args.scroll:  # after the timings: they stay those of the first screen
            page.evaluate(SCROLL_JS)
            try:
                page.wait_for_load_state("networkidle", timeout=timeout_ms)
            except PlaywrightError:
                idle = False
            page.wait_for_timeout(args.settle_ms)
        resources, errors = [], []
        for r in responses:
            url = urlparse(r.url)
            if url.scheme in ("data", "blob"):
                resources.append(None)
                continue
            if r.status >= 300:
                errors.append({"path": url.path, "status": r.status})
            ctype = r.headers.get("content-type", "")
            try:
                body = r.body()
            except PlaywrightError:  # a redirect has no body
                body = b""
            how = compression_of(url.path, ctype)
            resources.append(
                {
                    "path": url.path,
                    "kind": kind_of(url.path, ctype),
                    "encoding": f"gzip-{compressor.level}" if how == "gzip" else "raw",
                    "raw_bytes": len(body),
                    "compressed_bytes": compressor.size(body, how),
                }
            )
        visit = {
            **timing,
            "networkidle": idle,
            "transfer": transfer_summary(
                [r for r in resources[:first_screen] if r is not None]
            ),
            "blocked": blocked,
            "failed": failed,
            "error_responses": errors,
        }
        if args.scroll:
            visit["transfer_scrolled"] = transfer_summary(
                [r for r in resources if r is not None]
            )
        return visit
    finally:
        context.close()


def _stats(samples) -> dict:
    values = [s for s in samples if s is not None]
    return {
        "median": round(statistics.median(values), 4) if values else None,
        "samples": [None if s is None else round(s, 4) for s in samples],
    }


def measure_page(browser, base: str, key: str, rel: str, args, compressor) -> dict:
    """Every visit of one page, reduced: the first visit's transfer (and whether every
    visit transferred the same), the timing medians and samples, the verdicts."""
    from playwright.sync_api import Error as PlaywrightError

    visits, visit_errors = [], []
    for _ in range(args.repeats):
        try:
            visits.append(_visit(browser, base, rel, args, compressor))
        except PlaywrightError as exc:
            visit_errors.append(str(exc).splitlines()[0])
    edition, _, stem = key.partition("/")
    entry = {"edition": edition, "page": stem, "path": rel}
    if visits:
        first = visits[0]
        entry["transfer"] = {
            **first["transfer"],
            "same_in_every_visit": all(
                v["transfer"]["compressed_bytes"]
                == first["transfer"]["compressed_bytes"]
                for v in visits
            ),
        }
        if "transfer_scrolled" in first:
            entry["transfer_scrolled"] = first["transfer_scrolled"]
        entry["timing"] = {
            name: _stats([v[name] for v in visits])
            for name in ("fcp_s", "dom_content_loaded_s", "load_s")
        }
        entry["timing"]["networkidle_reached"] = [v["networkidle"] for v in visits]
        for name in ("blocked", "failed", "error_responses"):
            seen = []
            for v in visits:
                seen += [x for x in v[name] if x not in seen]
            entry[name] = seen
    if visit_errors:
        entry["visit_errors"] = visit_errors
    entry["meets"] = page_targets_met(entry)
    return entry


def host_info() -> dict:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu_model": model,
        "cpu_count": os.cpu_count(),
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
    }


def _yes(flag) -> str:
    return "-" if flag is None else "yes" if flag else "NO"


def _line(entry) -> str:
    t, tm = entry.get("transfer"), entry.get("timing")
    if t is None:
        return f"failed: {entry.get('visit_errors')}"
    med = {k: tm[k]["median"] for k in ("fcp_s", "dom_content_loaded_s", "load_s")}

    def fmt(s):
        return "  -  " if s is None else f"{s:5.2f}"

    return (
        f"{t['compressed_bytes'] / 1e3:8,.0f} KB gz ({t['raw_bytes'] / 1e3:7,.0f} KB "
        f"raw, {t['resources']:3d} files)  FCP {fmt(med['fcp_s'])} s  DCL "
        f"{fmt(med['dom_content_loaded_s'])} s  load {fmt(med['load_s'])} s  "
        f"size {_yes(entry['meets']['transfer'])}, FCP {_yes(entry['meets']['fcp'])}"
        + (
            f"  (scrolled to the end: "
            f"{entry['transfer_scrolled']['compressed_bytes'] / 1e3:,.0f} KB gz)"
            if "transfer_scrolled" in entry
            else ""
        )
    )


def main(argv=None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))
    from playwright.sync_api import sync_playwright
    from testing_support import CHROMIUM, CHROMIUM_FLAGS, serve_directory

    if not CHROMIUM.exists():
        raise SystemExit(f"Chromium is not installed at {CHROMIUM}")
    site = args.site.resolve()
    pages = page_list(site, args.editions, args.pages)
    targets = dict(PAGE_WEIGHT_TARGETS)
    print(
        f"{len(pages)} pages of {site}, {args.repeats} visit(s) each, CPU "
        f"{CPU_THROTTLING_RATE}x slower, network {args.network}",
        flush=True,
    )
    load_before, start = os.getloadavg(), time.time()
    results, compressor = {}, Compressor()
    with serve_directory(site) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        version = browser.version
        try:
            for n, (key, rel) in enumerate(pages, 1):
                results[key] = measure_page(browser, base, key, rel, args, compressor)
                print(
                    f"[{n:2d}/{len(pages)}] {key:<32} {_line(results[key])}",
                    flush=True,
                )
        finally:
            browser.close()
    report = {
        "benchmark": "page_weight",
        "host": host_info(),
        "run_info": {
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "argv": sys.argv[1:] if argv is None else list(argv),
            "arguments": {
                "site": str(args.site),
                "site_resolved": str(site),
                "editions": args.editions,
                "pages": args.pages,
                "repeats": args.repeats,
                "network": args.network,
                "scroll": args.scroll,
                "settle_ms": args.settle_ms,
                "timeout_s": args.timeout_s,
                "viewport": args.viewport,
            },
            "chromium_version": version,
            "chromium": str(CHROMIUM),
            "playwright_route": "every request to a host other than the local "
            "server is aborted (tests/testing_support.local_only_route)",
            "loadavg_before": list(load_before),
            "loadavg_after": list(os.getloadavg()),
            "wall_s": round(time.time() - start, 1),
        },
        "method": {
            "visit": "first visit: a new browser context (empty cache) per visit, "
            "service workers blocked",
            "scrolled": False,
            "scrolling_note": "transfer and timings are those of the first screen, "
            "without scrolling: lazy content below it (figures drawn when they come "
            "into view, their plotly.js) is not counted"
            + (
                "; with --scroll, transfer_scrolled adds what scrolling to the end "
                "loads afterwards"
                if args.scroll
                else ""
            ),
            "viewport": args.viewport,
            "wait": "load, then Playwright networkidle (no request for 500 ms), then "
            f"{args.settle_ms} ms",
            "compression": {
                "text": f"gzip level {GZIP_LEVEL} (Python gzip, mtime 0), as a static "
                "host such as GitHub Pages serves text",
                "text_types": list(TEXT_EXTENSIONS),
                "raw_types": list(RAW_EXTENSIONS),
                "other": "by content type: text/*, javascript, json, xml, svg gzip; "
                "anything else raw",
            },
            "cpu_throttling_rate": CPU_THROTTLING_RATE,
            "network": {
                "profile": args.network,
                "conditions": NETWORK_PROFILES[args.network],
                "modelled": args.network != "none",
                "note": "local server on 127.0.0.1: no latency and uncompressed "
                "bodies; without a profile network time is not modelled, with one "
                "the raw bytes go through it, so times are upper bounds",
            },
            "timing": "performance.getEntriesByName('first-contentful-paint'), the "
            "navigation entry's domContentLoadedEventEnd and loadEventEnd, seconds "
            "from navigation start; median over the visits",
            "repeats": args.repeats,
        },
        "targets": {
            **targets,
            "applies_to": "every page of book/ in both editions",
            "fcp_statistic": "median over the visits",
        },
        "pages": results,
        "summary": page_weight_summary(results, targets),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(
        f"\n{'page':<32} {'KB gz':>8} {'FCP s':>6}  size  FCP   "
        f"(targets: {targets['transfer_compressed_bytes_max'] / 1e6:g} MB, "
        f"{targets['fcp_s_max']:g} s at {CPU_THROTTLING_RATE}x)"
    )
    for key, entry in results.items():
        size = (entry.get("transfer") or {}).get("compressed_bytes")
        fcp = ((entry.get("timing") or {}).get("fcp_s") or {}).get("median")
        print(
            f"{key:<32} {'-' if size is None else f'{size / 1e3:,.0f}':>8} "
            f"{'-' if fcp is None else f'{fcp:.2f}':>6}  "
            f"{_yes(entry['meets']['transfer']):<5} {_yes(entry['meets']['fcp'])}"
        )
    for edition, s in report["summary"].items():
        heavy, slow = s["heaviest"] or {}, s["slowest"] or {}
        print(
            f"{edition}: {s['pages']} pages, {s['meet_transfer']} meet the size "
            f"target, {s['meet_fcp']} the FCP target, {s['meet_both']} both; heaviest "
            f"{heavy.get('page')} ({heavy.get('compressed_bytes', 0) / 1e3:,.0f} KB), "
            f"slowest {slow.get('page')} ({slow.get('fcp_s') or 0:.2f} s)"
        )
    print(
        f"load {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f}, "
        f"{report['run_info']['wall_s']} s; wrote {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
