"""Latency of a slider move in the live explorables (``dpo_grpo.interactive.widgets``),
and size/build time of the static figures.

Run from the repository root:  ``.venv/bin/python bench/bench_widgets.py``  (about a
minute; ``--repeats N``). Writes ``widgets-<host>.json`` in the working directory (or
``--out FILE``) and prints a table; bench/README.md says how to refresh the copy the
package ships (``code/dpo_grpo/data/bench_results/``, rendered in the benchmark
appendix).

What is timed, per UI: setting a control's ``value`` programmatically, which runs the
callback synchronously, exactly what a slider release triggers in a kernel: the data
function, the figure dict and, where the UI shows a FigureWidget (``live_figure_mode``,
recorded), the in-place update of it (``recompute_ms``, the target is < 50 ms); and
separately the JSON serialisation of that figure (``serialize_ms``), which a kernel adds
when it sends the figure to the front end. Browser-side drawing is not included. Values
visited: the static figure's slider grid for parameters it has (the "default grid"),
else five points across the control's range; the default is restored before moving the
next control. ``recompute_ms`` is the first (cold) move to a value: the data functions
memoise their seeded pieces (e.g. a G move in the zero-std UI recomputes the Monte Carlo
for the new G only), so ``repeat_ms`` (median of the ``--repeats`` - 1 later moves to
the same value) is the cached case.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "code"))

import numpy as np  # noqa: E402
import plotly  # noqa: E402
import plotly.io as pio  # noqa: E402

from dpo_grpo.interactive import registry  # noqa: E402
from dpo_grpo.interactive import widgets as Wd  # noqa: E402
from dpo_grpo.interactive.explorable import figure_html_size  # noqa: E402
from dpo_grpo.interactive.kl_variance import kl_variance_widget  # noqa: E402

#: every live explorable: the original seven, the four of chapters 6-10, and chapter 3's
#: KL-variance one
ALL_WIDGETS = {**registry.WIDGETS, "kl_variance": kl_variance_widget}

TARGET_MS = 50.0


def _values(key, control, spec):
    import ipywidgets as W

    if key in spec.grid:  # the controls are named after the explorable's parameters
        vals = [v for v in spec.grid[key] if v is not None]
        lo, hi = getattr(control, "min", None), getattr(control, "max", None)
        if isinstance(control, W.FloatLogSlider):
            lo, hi = control.base**control.min, control.base**control.max
        return [v for v in vals if lo is None or lo <= v <= hi]
    if isinstance(control, W.FloatLogSlider):
        return list(control.base ** np.linspace(control.min, control.max, 5))
    if isinstance(control, (W.FloatSlider, W.IntSlider)):
        vals = np.linspace(control.min, control.max, 5)
        return (
            [int(round(v)) for v in vals]
            if isinstance(control, W.IntSlider)
            else list(vals)
        )
    if isinstance(control, W.Checkbox):
        return [not control.value]
    if isinstance(control, (W.Dropdown, W.ToggleButtons)):
        return [o for o in control.options if o != control.value]
    return []  # text boxes are not sliders


def bench_widget(name, factory, repeats):
    ui = factory()
    rows = []
    for key, control in ui.controls.items():
        default = control.value
        for value in _values(key, control, ui.spec):
            if value == default or (
                isinstance(value, float) and abs(value - default) < 1e-12
            ):
                continue  # not a move: ipywidgets fires no callback
            rec, ser = [], []
            for _ in range(repeats):
                control.value = default
                start = time.perf_counter()
                control.value = value
                rec.append((time.perf_counter() - start) * 1e3)
                start = time.perf_counter()
                payload = pio.to_json(ui.figure, validate=False)
                ser.append((time.perf_counter() - start) * 1e3)
            assert ui.error is None, (name, key, value, ui.error)
            rows.append(
                {
                    "control": key,
                    "value": value
                    if not isinstance(value, float)
                    else float(f"{value:.6g}"),
                    "recompute_ms": rec[0],
                    "repeat_ms": statistics.median(rec[1:] or rec),
                    "serialize_ms": statistics.median(ser),
                    "figure_json_bytes": len(payload),
                }
            )
        control.value = default
    rep = [r["repeat_ms"] for r in rows]
    rec = [r["recompute_ms"] for r in rows]
    tot = [r["recompute_ms"] + r["serialize_ms"] for r in rows]
    return {
        "moves": len(rows),
        "recompute_ms": {
            "median": statistics.median(rec),
            "p95": float(np.percentile(rec, 95)),
            "max": max(rec),
        },
        "repeat_ms": {"median": statistics.median(rep), "max": max(rep)},
        "recompute_plus_serialize_ms": {
            "median": statistics.median(tot),
            "p95": float(np.percentile(tot, 95)),
            "max": max(tot),
        },
        "under_target": all(r < TARGET_MS for r in rec),
        "slowest": max(rows, key=lambda r: r["recompute_ms"]),
        "rows": rows,
    }


def bench_figures():
    out = {}
    for name, fn in registry.FIGURES.items():
        start = time.perf_counter()
        fig = fn()
        build = time.perf_counter() - start
        out[name] = {
            "build_s": round(build, 3),
            "html_bytes": figure_html_size(fig),
            "slider_steps": [len(s.steps) for s in fig.layout.sliders],
        }
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="result file (default: widgets-<host>.json in the working directory)",
    )
    args = parser.parse_args(argv)
    host = socket.gethostname()
    load_before = os.getloadavg()
    # warm-up: imports, cached layouts
    for factory in ALL_WIDGETS.values():
        factory()
    results = {
        name: bench_widget(name, factory, args.repeats)
        for name, factory in ALL_WIDGETS.items()
    }
    figs = bench_figures()
    report = {
        "host": host,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "plotly": plotly.__version__,
        "cpus": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "target_ms": TARGET_MS,
        "repeats": args.repeats,
        "live_figure_mode": Wd.live_figure_mode(),
        "widgets": results,
        "static_figures": figs,
        "gallery_html_bytes_all_figures": sum(f["html_bytes"] for f in figs.values()),
    }
    out = args.out or Path(f"widgets-{host}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(
        f"host {host}, {os.cpu_count()} CPUs, load {load_before[0]:.1f} -> "
        f"{report['loadavg_after'][0]:.1f}"
    )
    print(
        f"{'widget':16s} {'moves':>5s} {'recompute ms (median/p95/max)':>30s} "
        f"{'+serialize p95':>15s}  <50 ms"
    )
    for name, r in results.items():
        rc, tt = r["recompute_ms"], r["recompute_plus_serialize_ms"]
        slowest = r["slowest"]
        verdict = (
            "yes"
            if r["under_target"]
            else "NO (slowest: %s=%s)" % (slowest["control"], slowest["value"])
        )
        print(
            f"{name:16s} {r['moves']:5d} {rc['median']:10.1f} {rc['p95']:9.1f} "
            f"{rc['max']:9.1f} {tt['p95']:15.1f}  {verdict}"
        )
    print(f"{'figure':16s} {'build s':>8s} {'HTML kB':>8s}  slider steps")
    for name, f in figs.items():
        print(
            f"{name:16s} {f['build_s']:8.2f} {f['html_bytes'] / 1e3:8.1f}  "
            f"{f['slider_steps']}"
        )
    print(
        f"all {len(figs)} figures: "
        f"{report['gallery_html_bytes_all_figures'] / 1e3:.1f} kB; wrote {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
