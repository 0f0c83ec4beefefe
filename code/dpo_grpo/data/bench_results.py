"""Reading what ``bench/`` measured: the JSON files in ``dpo_grpo/data/bench_results/``
(:data:`dpo_grpo.data.BENCH_RESULTS`, shipped in the package) that the chapters render.

The benchmarks are scripts (``bench/*.py``), never timed tests; each writes one JSON
file per kind of machine. :func:`load_results` finds the files a chapter needs (by a
predicate on their content); :func:`call_options` and :func:`call_label` say which
``torch_ops.grpo_loss`` call a timed variant is; the torch-loss tables are built by
:mod:`dpo_grpo.chapters.benchmarks`, the live-widget latency table
(``bench/bench_widgets.py``) here, by :func:`widget_latency_rows`, the browser
redraw table (``bench/bench_frontend_draw.py``) by :func:`frontend_draw_rows`, and
the lab's step beside TRL's (``bench/bench_lab.py``) by :func:`trl_comparison_text`.
"""

from __future__ import annotations

import json
import os
import re
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


#: The options of ``dpo_grpo.torch_ops.grpo_loss`` that ``bench/bench_grpo_loss.py``
#: varies, with the API's defaults: a reader's call changes none of them.
CALL_DEFAULTS = {"validate": True, "compile": False}
#: The options behind each torch variant name, less ``validate``: a name ending in
#: ``_validate`` keeps ``validate=True``, the same name without it has
#: ``validate=False``. The ``_autograd`` names come from files measured while the loss
#: also had a fused kernel: ``fused=False`` ran the autograd path, the one
#: ``grpo_loss`` runs since the kernel was removed (the kernel's rows were dropped).
_NAMED_OPTIONS = {
    "torch_eager": {},
    "torch_compile": {"compile": True},
    "torch_eager_autograd": {},
    "torch_compile_autograd": {"compile": True},
}
_SUFFIX = "_validate"


def call_options(variant, entry=None):
    """The ``torch_ops.grpo_loss`` options a timed variant ran with (every key of
    :data:`CALL_DEFAULTS`), or None when the variant is no such call (TRL, NumPy, a
    probe). ``entry`` is the variant's shape entry: its ``calls`` record wins; a file
    written before calls were recorded is read by the name (``_validate``: the value
    checks on, else off)."""
    if not isinstance(variant, str):
        raise TypeError(f"variant must be a str, got {type(variant).__name__}")
    if entry is not None and not isinstance(entry, dict):
        raise TypeError(
            f"entry must be one shape's results (a dict) or None, got "
            f"{type(entry).__name__}"
        )
    record = ((entry or {}).get("calls") or {}).get(variant)
    if isinstance(record, dict):
        removed_kernel = record.get("fused", False) is not False or (
            record.get("per_token", True) is not True
        )  # the fused kernel's calls, which no longer exist: no grpo_loss call
        if record.get("function") != "dpo_grpo.torch_ops.grpo_loss" or removed_kernel:
            return None
        return {k: record.get(k, d) for k, d in CALL_DEFAULTS.items()}
    checked = variant.endswith(_SUFFIX)
    stem = variant[: -len(_SUFFIX)] if checked else variant
    if stem not in _NAMED_OPTIONS:
        return None
    return {**CALL_DEFAULTS, **_NAMED_OPTIONS[stem], "validate": checked}


def call_label(options, *, validate=True) -> str:
    """The call as a reader writes it: ``grpo_loss(compile=True, validate=False)`` for
    ``options`` (a dict of :data:`CALL_DEFAULTS` keys), naming only what differs from
    the defaults; ``validate=False`` leaves ``validate`` out (the column's name)."""
    if not isinstance(options, dict) or not set(options) <= set(CALL_DEFAULTS):
        raise ValueError(
            f"options must be a dict with keys among {list(CALL_DEFAULTS)}, got "
            f"{options!r}"
        )
    changed = [
        f"{k}={options[k]}"
        for k in ("compile", "validate")
        if k in options
        and options[k] != CALL_DEFAULTS[k]
        and (validate or k != "validate")
    ]
    return f"grpo_loss({', '.join(changed)})"


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


#: how ``bench/bench_lab.py`` names the model of its TRL comparison
_TINY_MODEL = re.compile(r"tiny random (\S+) \((\d+) parameters\)")


def is_trl_comparison(data) -> bool:
    """True for a file written by ``bench/bench_lab.py`` with trl installed (a
    ``trl_vs_lab`` block: the lab's GRPO step beside TRL's)."""
    return isinstance(data, dict) and isinstance(data.get("trl_vs_lab"), dict)


def _trl_vs_lab(data) -> dict:
    if not is_trl_comparison(data):
        raise ValueError(
            "data must be the JSON written by bench/bench_lab.py with trl installed "
            "(with 'trl_vs_lab')"
        )
    return data["trl_vs_lab"]


def trl_comparison_host(data) -> str:
    """Where ``bench/bench_lab.py`` timed the lab against TRL's ``GRPOTrainer``: the
    device and the machine's CPU count, in the reader's language."""
    _trl_vs_lab(data)
    return tr(
        "{device} with {cpus} CPUs", device=data["device"], cpus=data["cpu_count"]
    )


def trl_comparison_text(name: str, data) -> str:
    """The lab's GRPO step beside TRL's ``GRPOTrainer`` step (the ``trl_vs_lab`` block
    of a ``bench/bench_lab.py`` file named ``name``), three lines in the reader's
    language: where and with which versions it ran, the model, batch and steps, and
    the median seconds per step of each."""
    r = _trl_vs_lab(data)
    tiny = _TINY_MODEL.fullmatch(r["model"])
    model = (
        tr("tiny random {model} ({n} parameters)", model=tiny[1], n=tiny[2])
        if tiny
        else r["model"]
    )
    return "\n".join(
        [
            tr(
                "{name}: {device}, {cpus} CPUs, torch {torch}, TRL {trl}, {date}",
                name=name,
                device=data["device"],
                cpus=data["cpu_count"],
                torch=data["torch"],
                trl=r["trl"],
                date=r.get("date", data.get("date")),
            ),
            tr(
                "{model}; batch {batch}; {steps} steps each",
                model=model,
                batch=r["batch"],
                steps=r["steps"],
            ),
            tr(
                "median seconds per GRPO step: this book's loop {lab:.3f}, TRL's "
                "GRPOTrainer {trl:.3f}",
                lab=r["lab_step_seconds_median"],
                trl=r["trl_step_seconds_median"],
            ),
        ]
    )


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
