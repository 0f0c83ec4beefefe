"""Browser redraw time of the live explorables: from the kernel's reply to the redrawn
figure, in real frontends.

Run from the repository root:
``.venv/bin/python bench/bench_frontend_draw.py [--repeats 3]``  (about 5 minutes a
repeat; needs Chromium at /usr/bin/chromium, as the browser test does). Writes
``frontend-draw-<host>.json`` in the working directory (or ``--out FILE``) and prints a
table; bench/README.md says how to refresh the copy the package ships
(``code/dpo_grpo/data/bench_results/``, rendered in the benchmark appendix).

What is timed: ``tests/browser/test_live_widgets.py`` drags the first slider of each
live explorable in JupyterLab 4 and Notebook 7 (this environment's kernel: ipywidgets 8,
plotly 7, anywidget: a FigureWidget updated in place), JupyterLab 4 with the figure
re-displayed in an Output (``lab4-output``, the same run: the ratio to ``lab4`` is the
gain of the in-place update) and JupyterLab 3.6 with Colab's kernel packages (ipywidgets
7.7.1, plotly 5.24, the Output), and records, in the page, the time from the websocket
frame that carries the kernel's new figure (or the FigureWidget's update) to the moment
the figure's data in the page changes (``performance.now()`` on both ends). The kernel's
own recompute is not included (``bench/bench_widgets.py`` times it). This script runs
that test ``--repeats`` times (each a fresh server and browser) and keeps every sample.
Target: 200 ms per redraw.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST = "tests/browser/test_live_widgets.py"
TARGET_MS = 200.0


def _one_run(out: Path) -> dict:
    env = dict(os.environ, DRAW_MS_OUT=str(out))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", TEST, "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if run.returncode != 0:
        raise SystemExit(f"{TEST} failed; no timings kept:\n{run.stdout[-3000:]}")
    return json.loads(out.read_text())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--repeats", type=int, default=3, help="runs of the browser test (default 3)"
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="result file (default: frontend-draw-<host>.json in the working "
        "directory)",
    )
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    host = socket.gethostname()
    load_before = os.getloadavg()
    samples: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.repeats):
            for frontend, rec in _one_run(Path(tmp) / f"run{k}.json").items():
                for name, ms in rec["draw_ms"].items():
                    samples.setdefault(frontend, {}).setdefault(name, []).append(
                        round(ms, 1)
                    )
    frontends = {}
    for frontend, per_widget in samples.items():
        every = [ms for values in per_widget.values() for ms in values]
        frontends[frontend] = {
            "samples_ms": per_widget,
            "median_ms": statistics.median(every),
            "max_ms": max(every),
            "share_under_target": sum(ms < TARGET_MS for ms in every) / len(every),
        }
    report = {
        "benchmark": "frontend_draw",
        "target_ms": TARGET_MS,
        "repeats": args.repeats,
        "host": host,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "loadavg_before": list(load_before),
        "loadavg_after": list(os.getloadavg()),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "frontends": frontends,
    }
    out = args.out or Path(f"frontend-draw-{host}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(
        f"host {host}, {os.cpu_count()} CPUs, load {load_before[0]:.1f} -> "
        f"{report['loadavg_after'][0]:.1f}"
    )
    for frontend, r in frontends.items():
        print(
            f"{frontend:<20} median {r['median_ms']:6.1f} ms   max {r['max_ms']:6.1f} "
            f"ms   under {TARGET_MS:g} ms: {r['share_under_target']:.0%}"
        )
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
