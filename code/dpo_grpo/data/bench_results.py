"""Reading what ``bench/`` measured: the JSON files in ``dpo_grpo/data/bench_results/``
(:data:`dpo_grpo.data.BENCH_RESULTS`, shipped in the package) that the chapters render.

The benchmarks are scripts (``bench/*.py``), never timed tests; each writes one JSON
file per kind of machine. :func:`load_results` finds the files a chapter needs (by a
predicate on their content); the torch-loss tables are built by
:mod:`dpo_grpo.chapters.benchmarks`, the live-widget latency table
(``bench/bench_widgets.py``) here, by :func:`widget_latency_rows`, and the browser
redraw table (``bench/bench_frontend_draw.py``) by :func:`frontend_draw_rows`.
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

from ..i18n import tr


def results_directories(directory=None) -> list:
    """Where results are: ``directory`` if given, else the copy shipped inside the
    package (:data:`dpo_grpo.data.BENCH_RESULTS`; ``bench/*.py`` write there)."""
    if directory is not None:
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(
                "directory must be a path (str or os.PathLike) or None, got "
                f"{type(directory).__name__}"
            )
        return [Path(directory)]
    from . import BENCH_RESULTS

    return [BENCH_RESULTS]


def load_results(predicate, directory=None) -> list:
    """``(path, data)`` for every ``*.json`` in the first results directory that holds a
    file for which ``predicate(data)`` is true, sorted by file name; ``[]`` when there
    is none (the chapters then say so). Files that are not valid JSON are skipped."""
    if not callable(predicate):
        raise TypeError(
            "predicate must be a function of the loaded JSON, got "
            f"{type(predicate).__name__}"
        )
    for folder in results_directories(directory):
        if not folder.is_dir():
            continue
        found = []
        for path in sorted(folder.glob("*.json")):
            try:
                with open(path, encoding="utf-8") as fh:
                    data = json.load(fh)
            except (OSError, ValueError):
                continue
            if predicate(data):
                found.append((path, data))
        if found:
            return found
    return []


def is_widget_benchmark(data) -> bool:
    """True for a file written by ``bench/bench_widgets.py`` (a ``widgets`` block of
    per-UI timings)."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("widgets"), dict)
        and "target_ms" in data
    )


def _require_widget_benchmark(data):
    if not is_widget_benchmark(data):
        raise ValueError(
            "data must be the JSON written by bench/bench_widgets.py (with 'widgets' "
            "and 'target_ms')"
        )


def widget_latency_rows(data) -> list:
    """One row per live explorable: slider moves timed, the cold recompute's median /
    p95 / max in ms, p95 with the figure's JSON serialisation added, the slowest move
    (control = value) and whether every move met the target."""
    _require_widget_benchmark(data)
    target = float(data["target_ms"])
    rows = []
    for name, r in data["widgets"].items():
        rec, slow = r["recompute_ms"], r["slowest"]
        rows.append(
            {
                "explorable": name,
                "moves": r["moves"],
                "median ms": rec["median"],
                "p95 ms": rec["p95"],
                "max ms": rec["max"],
                "p95 + serialise ms": r["recompute_plus_serialize_ms"]["p95"],
                "slowest move": f"{slow['control']} = {slow['value']}",
                f"meets < {target:g} ms": all(
                    row["recompute_ms"] < target for row in r["rows"]
                ),
            }
        )
    return rows


def widget_benchmark_host(data) -> str:
    """One line saying where and how the widget latencies were measured, in the reader's
    language."""
    _require_widget_benchmark(data)
    load = data.get("loadavg_before") or [None]
    parts = [
        tr("host {host}", host=data.get("host", "unknown")),
        tr("{cpus} CPUs", cpus=data.get("cpus", "?")),
        f"Python {data.get('python', '?')}",
        f"NumPy {data.get('numpy', '?')}",
        f"plotly {data.get('plotly', '?')}",
    ]
    if data.get("live_figure_mode"):
        parts.append(tr("figure shown as {mode}", mode=data["live_figure_mode"]))
    if load[0] is not None:
        parts.append(tr("load average {load:.1f} before the run", load=load[0]))
    return ", ".join(parts)


def is_frontend_draw_benchmark(data) -> bool:
    """True for a file written by ``bench/bench_frontend_draw.py`` (browser redraw times
    per frontend)."""
    return (
        isinstance(data, dict)
        and data.get("benchmark") == "frontend_draw"
        and isinstance(data.get("frontends"), dict)
    )


def frontend_draw_rows(data) -> list:
    """One row per frontend and explorable: redraws timed, median and max ms from the
    kernel's reply to the redrawn figure, and whether every redraw met the target
    (``data["target_ms"]``)."""
    if not is_frontend_draw_benchmark(data):
        raise ValueError(
            "data must be the JSON written by bench/bench_frontend_draw.py (benchmark "
            "'frontend_draw')"
        )
    target = float(data["target_ms"])
    return [
        {
            "frontend": frontend,
            "explorable": name,
            "redraws": len(ms),
            "median ms": statistics.median(ms),
            "max ms": max(ms),
            f"meets < {target:g} ms": all(m < target for m in ms),
        }
        for frontend, r in data["frontends"].items()
        for name, ms in r["samples_ms"].items()
    ]
