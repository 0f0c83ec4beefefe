"""The tables of the torch benchmark results (appendix "Benchmarks"): the per-shape
``grpo_loss`` sections (torch loss vs TRL's ``_compute_loss``) and the per-dtype
``logprobs`` sections (``selective_log_softmax`` memory) written by ``bench/`` into
``dpo_grpo/data/bench_results/*.json``, found through
:func:`dpo_grpo.data.bench_results.load_results`; and the page weight of the built site
(``bench/bench_pages.py``: compressed bytes and first contentful paint per page of both
editions, ``page-weight.json``), read by :func:`load_page_weight` and tabulated by
:func:`page_weight_table`."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .. import tables
from ..data.bench_results import call_label, call_options, load_results
from ..i18n import N_, tr

# Layout of dpo_grpo/data/bench_results/<host-kind>.json (bench/bench_grpo_loss.py):
# {"host": {...}, "run_info": {section: ...}, <section>: {"shapes": {"<config>/<B>x<T>":
# {"timing": {variant: {"median_s", "q1_s", "q3_s", ...}}, "speedup_vs_trl": {variant:
# x}, "agreement_vs_torch_eager": {variant: {"loss_abs_diff", "grad_max_abs_diff"}},
# "peak_extra_bytes": {variant: bytes}, ...}}, ...}}. Files without such a section
# (other benchmarks) are ignored.


def _benchmark_sections(data) -> list:
    if not isinstance(data, dict):
        return []
    return [
        k
        for k, v in data.items()
        if isinstance(v, dict)
        and (isinstance(v.get("shapes"), dict) or isinstance(v.get("dtypes"), dict))
    ]


def _section_entries(data, section, key, kind) -> dict:
    """``data[section][key]`` (``key``: "shapes" or "dtypes"), or ValueError naming the
    sections the file has."""
    if section not in _benchmark_sections(data) or not isinstance(
        data[section].get(key), dict
    ):
        raise ValueError(
            f"no {kind} section {section!r}; the file has {_benchmark_sections(data)}"
        )
    return data[section][key]


def load_benchmarks(directory=None) -> list:
    """Every ``dpo_grpo/data/bench_results/*.json`` holding a per-shape (``grpo_loss``)
    or per-dtype (``logprobs``) section, as ``(path, data)`` pairs sorted by file name;
    ``[]`` when no result exists yet (the chapters then say so)."""
    return load_results(lambda data: bool(_benchmark_sections(data)), directory)


def benchmark_sections(data) -> list:
    """The names of the result sections of one file (e.g.
    ``["grpo_loss", "logprobs"]``)."""
    return _benchmark_sections(data)


def _numel(shape):
    try:
        b, t = shape.lower().split("x")
        return int(b) * int(t)
    except ValueError:
        return 0


def benchmark_rows(data, section="grpo_loss") -> list:
    """One row per (shape, variant) of a per-shape section: ``config``, ``shape``,
    ``variant``, ``options`` (the ``torch_ops.grpo_loss`` options it ran with, None
    for TRL and NumPy: :func:`dpo_grpo.data.bench_results.call_options`),
    ``validate`` (its ``validate``, None when not a torch call), ``call`` (the call as
    written, e.g. ``grpo_loss(validate=False)``), ``median_ms``, ``iqr_ms``,
    ``speedup_vs_trl``, ``x_probe`` (time over the fused bandwidth probe's),
    ``loss_diff``/``grad_diff`` (vs the torch eager variant), ``peak_extra_mb``.

    Rows are ordered by config, then by B x T; missing fields are None; a skipped shape
    gives one row with ``variant="(skipped)"``. Probe variants (bandwidth references,
    not losses) are left out.
    """
    shapes = _section_entries(data, section, "shapes", "per-shape")
    rows = []
    keys = sorted(
        shapes,
        key=lambda k: (k.rpartition("/")[0], _numel(k.rpartition("/")[2])),
    )
    for key in keys:
        entry = shapes[key]
        config, _, shape = key.rpartition("/")
        if not isinstance(entry, dict) or "skipped" in entry:
            rows.append(
                {
                    "config": config,
                    "shape": shape,
                    "variant": "(skipped)",
                    "median_ms": None,
                }
            )
            continue
        timing = entry.get("timing", {})
        variants = [v for v in timing if not v.startswith("probe")] or list(
            entry.get("peak_extra_bytes", {})
        )
        for var in variants:
            t = timing.get(var, {})
            agree = entry.get("agreement_vs_torch_eager", {}).get(var, {})
            peak = entry.get("peak_extra_bytes", {}).get(var)
            options = call_options(var, entry)
            rows.append(
                {
                    "config": config,
                    "shape": shape,
                    "variant": var,
                    "options": options,
                    "validate": None if options is None else options["validate"],
                    "call": var if options is None else call_label(options),
                    "median_ms": None if "median_s" not in t else 1e3 * t["median_s"],
                    "iqr_ms": None
                    if "q1_s" not in t or "q3_s" not in t
                    else 1e3 * (t["q3_s"] - t["q1_s"]),
                    "speedup_vs_trl": entry.get("speedup_vs_trl", {}).get(var),
                    "x_probe": entry.get("multiple_of_probe_compiled", {}).get(var),
                    "loss_diff": agree.get("loss_abs_diff"),
                    "grad_diff": agree.get("grad_max_abs_diff"),
                    "peak_extra_mb": None if peak is None else peak / 1e6,
                }
            )
    return rows


def benchmark_pivot(
    rows, variants=("trl", "torch_eager", "torch_compile", "numpy")
) -> list:
    """One row per (config, shape) from :func:`benchmark_rows`: ``<variant> ms`` and
    ``<variant> x TRL`` for the given variants (those present), ``peak MB <variant>``,
    and the largest loss/gradient difference of any variant against torch eager."""
    out = {}
    for r in rows:
        if r.get("median_ms") is None:
            continue
        row = out.setdefault(
            (r["config"], r["shape"]),
            {
                "config": r["config"],
                "shape": r["shape"],
                "max loss diff": 0.0,
                "max grad diff": 0.0,
            },
        )
        if r["variant"] in variants:
            row[f"{r['variant']} ms"] = r["median_ms"]
            if r["variant"] != "trl" and r.get("speedup_vs_trl") is not None:
                row[f"{r['variant']} x TRL"] = r["speedup_vs_trl"]
            if r.get("peak_extra_mb") is not None:
                row[f"peak MB {r['variant']}"] = r["peak_extra_mb"]
        for src, dst in (
            ("loss_diff", "max loss diff"),
            ("grad_diff", "max grad diff"),
        ):
            if r.get(src) is not None:
                row[dst] = max(row[dst], r[src])
    return list(out.values())


#: The headers of the tables :mod:`dpo_grpo.data.bench_results` builds (widget latency,
#: browser redraws), marked here for the Chinese catalog because the data layer speaks
#: no language; :mod:`dpo_grpo.tables` shows them translated. The target columns name
#: the shipped targets (50 ms, 200 ms); a new target is a recorded miss.
BENCH_RESULTS_HEADERS = (
    N_("explorable"),
    N_("moves"),
    N_("median ms"),
    N_("max ms"),
    N_("p95 + serialise ms"),
    N_("slowest move"),
    N_("frontend"),
    N_("redraws"),
    N_("meets < 50 ms"),
    N_("meets < 200 ms"),
)

#: The torch calls the appendix tabulates, by their names in the results without the
#: ``_validate`` suffix: the call as written and ``compile=True`` (the ``_autograd``
#: names: the same calls in files measured while a fused kernel existed); each is
#: timed with ``validate=True`` (the name with ``_validate``) and ``validate=False``.
TORCH_VARIANTS = (
    "torch_eager",
    "torch_compile",
    "torch_eager_autograd",
    "torch_compile_autograd",
)


def benchmark_matrix(rows, value="speedup_vs_trl", variants=TORCH_VARIANTS) -> list:
    """One row per (config, shape) from :func:`benchmark_rows` with one column per
    variant (those present) holding ``value`` (a key of the rows: ``speedup_vs_trl``,
    ``x_probe``, ``median_ms``, ...)."""
    out = {}
    for r in rows:
        if r.get("median_ms") is None:
            continue
        row = out.setdefault(
            (r["config"], r["shape"]), {"config": r["config"], "shape": r["shape"]}
        )
        if r["variant"] in variants and r.get(value) is not None:
            row[r["variant"]] = r[value]
    return list(out.values())


def _call_column(options) -> str:
    """A torch call's column: the options it changes besides ``validate``, without
    spaces (a code name in every language), ``grpo_loss()`` for the call as written."""
    label = call_label(options, validate=False)
    return label if label == "grpo_loss()" else label[10:-1].replace(", ", ",")


def call_matrix(rows, value="median_ms", spec=".3g", others=("trl", "numpy")) -> list:
    """One row per (config, shape) from :func:`benchmark_rows`: ``value`` of each of
    ``others`` (TRL's loss and NumPy's, when present) and, per torch call, the text
    ``"<validate=True> / <validate=False>"``: the call as a reader writes it, then the
    same call without its value checks (``—`` where one is missing). The torch columns
    are named by the options the call changes (``grpo_loss()``, ``compile=True``), in
    :data:`TORCH_VARIANTS`' order."""
    order = _column_order()
    out = {}
    for r in rows:
        if r.get("median_ms") is None:
            continue
        row = out.setdefault((r["config"], r["shape"]), {})
        x = r.get(value)
        text = "—" if x is None else format(x, spec)
        if r.get("options") is None:
            if r["variant"] in others and x is not None:
                row[r["variant"]] = text
            continue
        pair = row.setdefault(_call_column(r["options"]), ["—", "—"])
        pair[0 if r["options"]["validate"] else 1] = text
    return [
        {
            "config": config,
            "shape": shape,
            **{k: row[k] for k in others[:1] if k in row},
            **{
                k: " / ".join(row[k])
                for k in sorted(
                    (k for k in row if k not in others), key=lambda k: order.get(k, 99)
                )
            },
            **{k: row[k] for k in others[1:] if k in row},
        }
        for (config, shape), row in out.items()
    ]


def _column_order() -> dict:
    return {
        _call_column(call_options(name)): i for i, name in enumerate(TORCH_VARIANTS)
    }


def _extremes(rows, variants):
    """``(call, its rows)`` per torch call: the calls as written (``validate=True``)
    first, each group in :data:`TORCH_VARIANTS`' order."""
    calls = {}
    for r in rows:
        if r.get("median_ms") is None or r.get("options") is None:
            continue
        if variants is not None and r["variant"] not in variants:
            continue
        calls.setdefault(r["call"], []).append(r)
    order = _column_order()

    def key(item):
        options = item[1][0]["options"]
        return not options["validate"], order.get(_call_column(options), 99)

    return sorted(calls.items(), key=key)


def target_summary(rows, variants=None, min_speedup=2.0, max_probe=4.0) -> list:
    """Per torch call of ``rows`` (of ``variants`` if given; the calls as written,
    ``validate=True``, first): the shapes timed, the smallest speed-up over TRL and
    the largest multiple of the probe over all shapes and configs, and whether each
    target is met (``>= min_speedup``, ``<= max_probe``). Only a call with
    ``validate=True``, the API's default, is judged: the same call with
    ``validate=False`` is listed with its numbers and no verdict (None), as is a call
    without data for a target."""
    out = []
    for call, mine in _extremes(rows, variants):
        speed = [
            r["speedup_vs_trl"] for r in mine if r.get("speedup_vs_trl") is not None
        ]
        probe = [r["x_probe"] for r in mine if r.get("x_probe") is not None]
        judged = mine[0]["validate"] is True
        out.append(
            {
                N_("variant"): call,
                N_("shapes"): len(mine),
                N_("min x TRL"): min(speed) if speed else None,
                N_("max x probe"): max(probe) if probe else None,
                # the targets' headers hold a number, so they are translated here
                tr("meets x TRL >= {target}", target=f"{min_speedup:g}"): None
                if not (speed and judged)
                else min(speed) >= min_speedup,
                tr("meets x probe <= {target}", target=f"{max_probe:g}"): None
                if not (probe and judged)
                else max(probe) <= max_probe,
            }
        )
    return out


def missed_targets(rows, min_speedup=2.0, max_probe=4.0) -> dict:
    """The calls as written (``validate=True``) that miss a target at one shape or
    more: ``{"x_trl": [...], "x_probe": [...]}``, each item ``{"call", "value",
    "where"}`` with the worst value over all shapes and configs and where it was
    measured (``"<config>/<B>x<T>"``). A call without data for a target is in
    neither list."""
    out = {"x_trl": [], "x_probe": []}
    for call, mine in _extremes(rows, None):
        if mine[0]["validate"] is not True:
            continue
        for key, field, worst, ok in (
            ("x_trl", "speedup_vs_trl", min, lambda x: x >= min_speedup),
            ("x_probe", "x_probe", max, lambda x: x <= max_probe),
        ):
            have = [r for r in mine if r.get(field) is not None]
            if not have:
                continue
            r = worst(have, key=lambda r, f=field: r[f])
            if not ok(r[field]):
                where = f"{r['config']}/{r['shape']}"
                out[key].append({"call": call, "value": r[field], "where": where})
    return out


def missed_text(items, spec=".2f") -> str:
    """One line naming each missed target of :func:`missed_targets` (a list):
    ``grpo_loss() 1.61x (trl_defaults/64x512), ...``; ``—`` when the list is empty.
    Code, numbers and shapes only, so it reads the same in both editions."""
    return (
        ", ".join(f"{m['call']} {m['value']:{spec}}x ({m['where']})" for m in items)
        or "—"
    )


def logprob_rows(data, section="logprobs") -> list:
    """One row per (dtype, variant) of a per-dtype section
    (``bench/bench_logprobs.py``): ``dtype``, ``variant``, ``median_ms``, ``x_naive``
    (time over the naive method's), ``peak_extra_mb``, ``saved_mb`` (saved for
    backward), ``full_logits`` (whether a (B, T, V) tensor was built; None in files
    from logits, which hold them before the call), ``beyond_grad_mb`` (files from
    logits: peak minus the logits' gradient every method must allocate) and
    ``max_abs_err`` (vs float64)."""
    rows = []
    for dtype, entry in _section_entries(data, section, "dtypes", "per-dtype").items():
        timing, memory = entry.get("timing", {}), entry.get("memory", {})
        err = entry.get("max_abs_err_vs_float64", {})
        ratio = entry.get("time_ratio_over_naive", {})
        full = entry.get("builds_full_logits", {})
        for var in dict.fromkeys([*memory, *timing]):
            t, m = timing.get(var, {}), memory.get(var, {})

            def mb(k, m=m):
                return None if m.get(k) is None else m[k] / 1e6

            rows.append(
                {
                    "dtype": dtype,
                    "variant": var,
                    "median_ms": None if "median_s" not in t else 1e3 * t["median_s"],
                    "x_naive": 1.0 if var == "naive" and ratio else ratio.get(var),
                    "peak_extra_mb": mb("peak_extra_bytes"),
                    "saved_mb": mb("saved_for_backward_bytes"),
                    "full_logits": full.get(var),
                    "beyond_grad_mb": mb("peak_extra_beyond_grad_bytes"),
                    "max_abs_err": err.get(var),
                }
            )
    return rows


def run_command(data, section="grpo_loss") -> str:
    """The command that wrote ``section`` of a results file, from the repository root:
    the one its latest run recorded (``run_info.<section>.command``), or, for a file
    written before commands were recorded, the script with the recorded arguments;
    ``""`` when the file records neither."""
    runs = (data.get("run_info") or {}).get(section) if isinstance(data, dict) else None
    run = runs[-1] if isinstance(runs, list) and runs else runs
    if not isinstance(run, dict):
        return ""
    if run.get("command"):
        return run["command"]
    script = f"bench/bench_{section}.py"
    return " ".join(["python", script, *map(str, run.get("argv", []))])


def benchmark_hardware(data) -> str:
    """One line naming the machine a results file was measured on (its ``host``
    block)."""
    host = data.get("host") if isinstance(data, dict) else None
    if not isinstance(host, dict) or not host:
        return tr("unknown hardware")
    parts = []
    if host.get("gpu_name"):
        mem = host.get("gpu_memory_bytes")
        parts.append(host["gpu_name"] + (f" ({mem / 2**30:.0f} GiB)" if mem else ""))
    if host.get("cpu_model"):
        n = host.get("cpu_count")
        parts.append(host["cpu_model"] + (tr(", {n} CPU cores", n=n) if n else ""))
    for key, label in (
        ("torch_version", "torch"),
        ("cuda_version", "CUDA"),
        ("device", tr("device")),
    ):
        if host.get(key):
            parts.append(f"{label} {host[key]}")
    return "; ".join(parts) or tr("unknown hardware")


# --- page weight (bench/bench_pages.py) -----------------------------------------------
#
# Layout of dpo_grpo/data/bench_results/page-weight.json: {"benchmark": "page_weight",
# "host": {...}, "run_info": {...}, "method": {...}, "targets":
# {"transfer_compressed_bytes_max": bytes, "fcp_s_max": s, "cpu_throttling_rate": x},
# "pages": {"<edition>/<stem>": {"edition", "page", "path", "transfer":
# {"compressed_bytes", "raw_bytes", "resources", "largest": [...]}, "timing": {"fcp_s":
# {"median", "samples"}, "dom_content_loaded_s": {...}, "load_s": {...}}, "meets":
# {"transfer": bool, "fcp": bool}}}, "summary": {"<edition>": {...}}}

#: The name of the shipped page-weight result in ``dpo_grpo/data/bench_results/``.
PAGE_WEIGHT_FILE = "page-weight.json"

#: The page-weight targets of issue #38: what a first visit to one page of the book may
#: transfer (compressed, as a static host serves it) and how soon its first content may
#: appear with the CPU slowed 4x (network time not included).
PAGE_WEIGHT_TARGETS = {
    "transfer_compressed_bytes_max": 1_500_000,
    "fcp_s_max": 2.5,
    "cpu_throttling_rate": 4,
}

#: The headers of the page-weight tables without a number in them (those with one are
#: translated where they are built).
PAGE_WEIGHT_HEADERS = (
    N_("edition"),
    N_("page"),
    N_("compressed KB"),
    N_("pages"),
    N_("meet the transfer target"),
    N_("meet the FCP target"),
    N_("heaviest page"),
    N_("slowest page"),
)
#: the summary's row of both editions together (a key of :func:`page_weight_summary`),
#: a word the tables show in the reader's language (:func:`dpo_grpo.tables.label_text`)
ALL_EDITIONS = N_("all")


def is_page_weight(data) -> bool:
    """True for a file written by ``bench/bench_pages.py`` (per-page transfer and first
    contentful paint)."""
    return (
        isinstance(data, dict)
        and data.get("benchmark") == "page_weight"
        and isinstance(data.get("pages"), dict)
        and isinstance(data.get("targets"), dict)
    )


def _require_page_weight(data):
    if not is_page_weight(data):
        raise ValueError(
            "data must be the JSON written by bench/bench_pages.py (benchmark "
            "'page_weight', with 'pages' and 'targets')"
        )


def load_page_weight(path=None) -> dict:
    """The page-weight result: ``path`` if given, else the copy shipped in the package
    (``dpo_grpo/data/bench_results/page-weight.json``). A missing file raises
    FileNotFoundError saying how to produce it; a file that is not a page-weight result
    raises ValueError."""
    if path is None:
        from ..data import BENCH_RESULTS

        path = BENCH_RESULTS / PAGE_WEIGHT_FILE
    elif not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"path must be a path (str or os.PathLike) or None, got "
            f"{type(path).__name__}"
        )
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no page-weight result at {path}: build the site (make book), then run "
            "`.venv/bin/python bench/bench_pages.py --out "
            f"code/dpo_grpo/data/bench_results/{PAGE_WEIGHT_FILE}` to ship one"
        )
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    try:
        _require_page_weight(data)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return data


def page_targets_met(entry, targets=None) -> dict:
    """Whether one page's measurements meet the targets: ``{"transfer": bool, "fcp":
    bool}``, each None when the page has no such measurement. ``entry`` is one value of
    the result's ``pages``; ``targets`` defaults to :data:`PAGE_WEIGHT_TARGETS`. The
    first contentful paint is judged by its median over the repeated visits; a limit
    is met when the value is at most the limit."""
    targets = PAGE_WEIGHT_TARGETS if targets is None else targets
    if not isinstance(entry, dict):
        raise TypeError(
            f"entry must be one page of the result's 'pages' (a dict), got "
            f"{type(entry).__name__}"
        )
    size = (entry.get("transfer") or {}).get("compressed_bytes")
    fcp = ((entry.get("timing") or {}).get("fcp_s") or {}).get("median")
    return {
        "transfer": None
        if size is None
        else size <= targets["transfer_compressed_bytes_max"],
        "fcp": None if fcp is None else fcp <= targets["fcp_s_max"],
    }


def page_weight_summary(pages, targets=None) -> dict:
    """Per edition (and ``"all"``): ``pages`` measured, how many meet the transfer
    target, the FCP target and both, the heaviest page (largest compressed transfer)
    and the slowest (largest median FCP). ``pages`` is the result's ``pages`` block."""
    if not isinstance(pages, dict):
        raise TypeError(
            f"pages must be the result's 'pages' (a dict), got {type(pages).__name__}"
        )
    groups: dict = {}
    for key, entry in pages.items():
        if not isinstance(entry, dict):
            raise TypeError(
                f"pages[{key!r}] must be one page's measurements (a dict), got "
                f"{type(entry).__name__}"
            )
        edition = entry.get("edition") or key.partition("/")[0]
        groups.setdefault(edition, []).append((key, entry))
    groups[ALL_EDITIONS] = list(pages.items())
    out = {}
    for edition, items in groups.items():
        met = [page_targets_met(e, targets) for _, e in items]
        sizes = [
            (e["transfer"]["compressed_bytes"], k)
            for k, e in items
            if (e.get("transfer") or {}).get("compressed_bytes") is not None
        ]
        fcps = [
            (e["timing"]["fcp_s"]["median"], k)
            for k, e in items
            if ((e.get("timing") or {}).get("fcp_s") or {}).get("median") is not None
        ]
        heavy, slow = max(sizes, default=None), max(fcps, default=None)
        out[edition] = {
            "pages": len(items),
            "meet_transfer": sum(m["transfer"] is True for m in met),
            "meet_fcp": sum(m["fcp"] is True for m in met),
            "meet_both": sum(m["transfer"] is True and m["fcp"] is True for m in met),
            "heaviest": None
            if heavy is None
            else {"page": heavy[1], "compressed_bytes": heavy[0]},
            "slowest": None if slow is None else {"page": slow[1], "fcp_s": slow[0]},
        }
    return out


def _target_headers(targets) -> tuple:
    return (
        tr(
            "meets <= {target} MB",
            target=f"{targets['transfer_compressed_bytes_max'] / 1e6:g}",
        ),
        tr(
            "meets FCP <= {target} s at {rate}x CPU",
            target=f"{targets['fcp_s_max']:g}",
            rate=f"{targets.get('cpu_throttling_rate', 4):g}",
        ),
    )


def page_weight_rows(data, edition=None) -> list:
    """One row per page of the result (of one ``edition`` if given, ``"en"`` or
    ``"zh"``), in the file's order: edition, page, compressed KB (1 KB = 1000 bytes),
    median FCP in seconds, and whether each target is met (judged again from the
    numbers and the file's ``targets``)."""
    _require_page_weight(data)
    targets = {**PAGE_WEIGHT_TARGETS, **data["targets"]}
    size_head, fcp_head = _target_headers(targets)
    rows = []
    for key, entry in data["pages"].items():
        ed, _, stem = key.partition("/")
        ed, stem = entry.get("edition", ed), entry.get("page", stem)
        if edition is not None and ed != edition:
            continue
        size = (entry.get("transfer") or {}).get("compressed_bytes")
        met = page_targets_met(entry, targets)
        rows.append(
            {
                "edition": ed,
                "page": stem,
                "compressed KB": None if size is None else size / 1e3,
                "FCP s": ((entry.get("timing") or {}).get("fcp_s") or {}).get("median"),
                size_head: met["transfer"],
                fcp_head: met["fcp"],
            }
        )
    return rows


def page_weight_table(data=None, edition=None) -> str:
    """The page-weight table as Markdown (for ``IPython.display.Markdown``): page,
    compressed KB, median FCP at the throttled CPU, targets met; ``data`` defaults to
    the shipped result (:func:`load_page_weight`)."""
    data = load_page_weight() if data is None else data
    rows = page_weight_rows(data, edition)
    if not rows:
        raise ValueError(f"the result has no page of edition {edition!r}")
    return tables.markdown_table(
        rows, list(rows[0]), {"compressed KB": ",.0f", "FCP s": ".2f"}
    )


def page_weight_summary_rows(data) -> list:
    """One row per edition: pages measured, how many meet each target, the heaviest
    page (compressed KB) and the slowest (median FCP), judged from the numbers."""
    _require_page_weight(data)
    targets = {**PAGE_WEIGHT_TARGETS, **data["targets"]}
    rows = []
    for ed, s in page_weight_summary(data["pages"], targets).items():
        heavy, slow = s["heaviest"], s["slowest"]
        rows.append(
            {
                "edition": ed,
                "pages": s["pages"],
                "meet the transfer target": s["meet_transfer"],
                "meet the FCP target": s["meet_fcp"],
                "heaviest page": None
                if heavy is None
                else f"{heavy['page']} ({heavy['compressed_bytes'] / 1e3:,.0f} KB)",
                "slowest page": None
                if slow is None
                else f"{slow['page']} ({slow['fcp_s']:.2f} s)",
            }
        )
    return rows
