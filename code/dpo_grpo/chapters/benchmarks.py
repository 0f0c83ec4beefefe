"""The tables of the torch benchmark results (appendix "Benchmarks"): the per-shape
``grpo_loss`` sections (torch loss vs TRL's ``_compute_loss``) and the per-dtype
``logprobs`` sections (``selective_log_softmax`` memory) written by ``bench/`` into
``dpo_grpo/data/bench_results/*.json``, found through
:func:`dpo_grpo.data.bench_results.load_results`."""

from __future__ import annotations

from ..data.bench_results import load_results
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
    ``variant``, ``median_ms``, ``iqr_ms``, ``speedup_vs_trl``, ``x_probe`` (time over
    the fused bandwidth probe's), ``loss_diff``/``grad_diff`` (vs the torch eager
    variant), ``peak_extra_mb``.

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
            rows.append(
                {
                    "config": config,
                    "shape": shape,
                    "variant": var,
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

#: The torch variants the chapters tabulate: eager and compiled, with and without the
#: per-token outputs.
TORCH_VARIANTS = (
    "torch_eager",
    "torch_eager_lean",
    "torch_compile",
    "torch_compile_lean",
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


def target_summary(
    rows, variants=TORCH_VARIANTS, min_speedup=2.0, max_probe=4.0
) -> list:
    """Per variant: the smallest speed-up over TRL and the largest multiple of the probe
    over all shapes and configs, and whether each meets its target (``>= min_speedup``,
    ``<= max_probe``; None without data)."""
    out = []
    for var in variants:
        mine = [
            r for r in rows if r["variant"] == var and r.get("median_ms") is not None
        ]
        if not mine:
            continue
        speed = [
            r["speedup_vs_trl"] for r in mine if r.get("speedup_vs_trl") is not None
        ]
        probe = [r["x_probe"] for r in mine if r.get("x_probe") is not None]
        out.append(
            {
                N_("variant"): var,
                N_("shapes"): len(mine),
                N_("min x TRL"): min(speed) if speed else None,
                N_("max x probe"): max(probe) if probe else None,
                # the targets' headers hold a number, so they are translated here
                tr("meets x TRL >= {target}", target=f"{min_speedup:g}"): None
                if not speed
                else min(speed) >= min_speedup,
                tr("meets x probe <= {target}", target=f"{max_probe:g}"): None
                if not probe
                else max(probe) <= max_probe,
            }
        )
    return out


def logprob_rows(data, section="logprobs") -> list:
    """One row per (dtype, variant) of a per-dtype section
    (``bench/bench_logprobs.py``): ``dtype``, ``variant``, ``median_ms``,
    ``peak_extra_mb``, ``beyond_grad_mb`` (peak minus the logits' gradient every method
    must allocate), ``saved_mb`` (saved for backward) and ``max_abs_err`` (vs
    float64)."""
    rows = []
    for dtype, entry in _section_entries(data, section, "dtypes", "per-dtype").items():
        timing, memory = entry.get("timing", {}), entry.get("memory", {})
        err = entry.get("max_abs_err_vs_float64", {})
        for var in dict.fromkeys([*memory, *timing]):
            t, m = timing.get(var, {}), memory.get(var, {})
            mb = lambda k: None if m.get(k) is None else m[k] / 1e6  # noqa: E731
            rows.append(
                {
                    "dtype": dtype,
                    "variant": var,
                    "median_ms": None if "median_s" not in t else 1e3 * t["median_s"],
                    "peak_extra_mb": mb("peak_extra_bytes"),
                    "beyond_grad_mb": mb("peak_extra_beyond_grad_bytes"),
                    "saved_mb": mb("saved_for_backward_bytes"),
                    "max_abs_err": err.get(var),
                }
            )
    return rows


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
