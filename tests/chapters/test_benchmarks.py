"""dpo_grpo.chapters.benchmarks: the benchmark-results reader and its tables."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from dpo_grpo import tables
from dpo_grpo.chapters import benchmarks as bm
from dpo_grpo.chapters import parity


def test_the_appendix_reaches_the_tables_through_parity():
    """book/appendix_benchmarks.ipynb calls parity.<name>."""
    for name in (
        "TORCH_VARIANTS",
        "benchmark_hardware",
        "benchmark_matrix",
        "benchmark_pivot",
        "benchmark_rows",
        "benchmark_sections",
        "load_benchmarks",
        "logprob_rows",
        "target_summary",
    ):
        assert getattr(parity, name) is getattr(bm, name), name


def _bench_file():
    return {
        "host": {
            "cpu_model": "Toy CPU",
            "cpu_count": 2,
            "torch_version": "2.13.0",
            "device": "cpu",
        },
        "run_info": {"grpo_loss": {"wall_s": 1.0}},
        "grpo_loss": {
            "shapes": {
                "article/16x128": {
                    "timing": {
                        "numpy": {"median_s": 0.002, "q1_s": 0.0015, "q3_s": 0.0025},
                        "torch_eager": {
                            "median_s": 0.001,
                            "q1_s": 0.001,
                            "q3_s": 0.001,
                        },
                        "probe_eager": {"median_s": 0.0005},
                    },
                    "speedup_vs_trl": {"numpy": 0.5, "torch_eager": 1.0},
                    "multiple_of_probe_compiled": {"numpy": 8.0, "torch_eager": 4.0},
                    "agreement_vs_torch_eager": {
                        "numpy": {"loss_abs_diff": 1e-9, "grad_max_abs_diff": 2e-9}
                    },
                    "peak_extra_bytes": {"numpy": 3_000_000, "torch_eager": 1_000_000},
                },
                "article/512x4096": {"skipped": "too slow"},
            }
        },
    }


def test_benchmark_reader(tmp_path):
    assert bm.load_benchmarks(tmp_path) == []
    # another benchmark
    (tmp_path / "widgets.json").write_text(json.dumps({"host": "vm", "widgets": {}}))
    assert bm.load_benchmarks(tmp_path) == []
    (tmp_path / "cpu-2core.json").write_text(json.dumps(_bench_file()))
    (tmp_path / "broken.json").write_text("{not json")
    found = bm.load_benchmarks(tmp_path)
    assert [p.name for p, _ in found] == ["cpu-2core.json"]
    data = found[0][1]
    assert bm.benchmark_sections(data) == ["grpo_loss"]
    rows = bm.benchmark_rows(data)
    assert [r["variant"] for r in rows] == ["numpy", "torch_eager", "(skipped)"]
    assert rows[0]["median_ms"] == pytest.approx(2.0) and rows[0][
        "iqr_ms"
    ] == pytest.approx(1.0)
    assert (
        rows[0]["peak_extra_mb"] == pytest.approx(3.0) and rows[0]["loss_diff"] == 1e-9
    )
    assert (
        rows[1]["loss_diff"] is None
        and rows[0]["config"] == "article"
        and rows[0]["shape"] == "16x128"
    )
    assert (
        bm.benchmark_hardware(data) == "Toy CPU, 2 CPU cores; torch 2.13.0; device cpu"
    )
    gpu = {
        "host": {
            "gpu_name": "NVIDIA H200",
            "gpu_memory_bytes": 150 * 2**30,
            "cuda_version": "12.8",
        }
    }
    assert bm.benchmark_hardware(gpu) == "NVIDIA H200 (150 GiB); CUDA 12.8"
    assert bm.benchmark_hardware([]) == "unknown hardware"
    with pytest.raises(ValueError, match="section"):
        bm.benchmark_rows(data, "selective_log_softmax")
    piv = bm.benchmark_pivot(rows)
    assert piv == [
        {
            "config": "article",
            "shape": "16x128",
            "max loss diff": 1e-9,
            "max grad diff": 2e-9,
            "torch_eager ms": 1.0,
            "torch_eager x TRL": 1.0,
            "peak MB torch_eager": 1.0,
            "numpy ms": 2.0,
            "numpy x TRL": 0.5,
            "peak MB numpy": 3.0,
        }
    ]
    assert rows[1]["x_probe"] == 4.0
    assert bm.benchmark_matrix(rows) == [
        {"config": "article", "shape": "16x128", "torch_eager": 1.0}
    ]
    assert bm.benchmark_matrix(rows, "x_probe", ("numpy", "torch_eager")) == [
        {"config": "article", "shape": "16x128", "numpy": 8.0, "torch_eager": 4.0}
    ]
    # a file without calls records: torch_eager is the call with validate=False,
    # listed with its numbers and no verdict
    assert rows[1]["call"] == "grpo_loss(validate=False)"
    assert rows[1]["validate"] is False and rows[0]["validate"] is None
    summary = bm.target_summary(rows)
    assert summary == [
        {
            "variant": "grpo_loss(validate=False)",
            "shapes": 1,
            "min x TRL": 1.0,
            "max x probe": 4.0,
            "meets x TRL >= 2": None,
            "meets x probe <= 4": None,
        }
    ]
    md = tables.markdown_table(summary, list(summary[0]))
    assert "| grpo_loss(validate=False) | 1 | 1.0 | 4.0 | — | — |" in md
    md = tables.markdown_table(
        rows, ["shape", "variant", "median_ms"], {"median_ms": ".3f"}
    )
    assert "| 16x128 | numpy | 2.000 |" in md and "—" in md


def test_benchmark_tables_in_chinese(monkeypatch):
    """The appendix's benchmark headers and host line: English as above, Chinese under
    DPO_GRPO_LANG=zh; the row keys the notebook indexes stay English."""
    from dpo_grpo.data import bench_results as br

    data = _bench_file()
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    summary = bm.target_summary(bm.benchmark_rows(data))
    head = tables.markdown_table(summary, list(summary[0])).splitlines()[0]
    assert head == (
        "| 变体 | 形状数 | 最小 x TRL | 最大 x 探针 | 达到 x TRL >= 2 | 达到 x "
        "探针 <= 4 |"
    )
    assert summary[0]["min x TRL"] == 1.0
    assert bm.benchmark_hardware(data) == "Toy CPU，2 个 CPU 核; torch 2.13.0; 设备 cpu"
    assert bm.benchmark_hardware([]) == "未知硬件"
    widget = {
        "target_ms": 50.0,
        "widgets": {
            "bandit": {
                "moves": 2,
                "recompute_ms": {"median": 1.0, "p95": 2.0, "max": 3.0},
                "recompute_plus_serialize_ms": {"p95": 4.0},
                "slowest": {"control": "steps", "value": 1},
                "rows": [{"recompute_ms": 3.0}],
            }
        },
    }
    rows = br.widget_latency_rows(widget)
    assert rows[0]["explorable"] == "bandit"
    head = tables.markdown_table(rows, list(rows[0])).splitlines()[0]
    assert head == (
        "| 交互图 | 拖动次数 | 中位数 ms | p95 ms | 最大 ms | p95 + 序列化 ms | "
        "最慢的一次拖动 | 低于 50 ms |"
    )
    draw = {
        "benchmark": "frontend_draw",
        "target_ms": 200.0,
        "frontends": {"lab4": {"samples_ms": {"bandit": [1.0]}}},
    }
    rows = br.frontend_draw_rows(draw)
    head = tables.markdown_table(rows, list(rows[0])).splitlines()[0]
    assert head == "| 前端 | 交互图 | 重绘次数 | 中位数 ms | 最大 ms | 低于 200 ms |"


def _calls_file():
    """Two shapes in the layout bench/bench_grpo_loss.py writes, calls recorded: TRL,
    the call as written, the same without checks, and compiled as written."""

    def call(validate, **options):
        return {
            "function": "dpo_grpo.torch_ops.grpo_loss",
            "validate": validate,
            "compile": False,
            **options,
        }

    calls = {
        "trl": {"function": "trl.GRPOTrainer._compute_loss", "validate": None},
        "torch_eager_validate": call(True),
        "torch_eager": call(False),
        "torch_compile_validate": call(True, compile=True),
    }
    shapes = {}
    for shape, x_trl, x_probe in (
        ("64x512", (1.8, 2.6, 2.2), (3.0, 2.5, 2.0)),
        ("512x4096", (3.4, 5.4, 11.0), (6.0, 3.5, 1.5)),
    ):
        names = list(calls)[1:]
        shapes[f"article/{shape}"] = {
            "timing": {v: {"median_s": 1e-3} for v in calls},
            "calls": calls,
            "speedup_vs_trl": {"trl": 1.0, **dict(zip(names, x_trl))},
            "multiple_of_probe_compiled": {"trl": 9.0, **dict(zip(names, x_probe))},
        }
    return {
        "host": {},
        "grpo_loss": {"shapes": shapes},
        "run_info": {
            "grpo_loss": [
                {"argv": ["--threads", "1"], "command": "python bench/x.py --threads 1"}
            ]
        },
    }


def test_the_call_as_written_is_judged_and_its_twin_shown_beside_it():
    rows = bm.benchmark_rows(_calls_file())
    assert {r["call"] for r in rows} == {
        "trl",
        "grpo_loss()",
        "grpo_loss(validate=False)",
        "grpo_loss(compile=True)",
    }
    matrix = bm.call_matrix(rows, "speedup_vs_trl", ".2f")
    assert matrix[0] == {
        "config": "article",
        "shape": "64x512",
        "trl": "1.00",
        "grpo_loss()": "1.80 / 2.60",
        "compile=True": "2.20 / —",
    }
    summary = bm.target_summary(rows)
    assert [
        (r["variant"], r["meets x TRL >= 2"], r["meets x probe <= 4"]) for r in summary
    ] == [
        ("grpo_loss()", False, False),
        ("grpo_loss(compile=True)", True, True),
        ("grpo_loss(validate=False)", None, None),
    ]
    assert summary[0]["min x TRL"] == 1.8 and summary[0]["max x probe"] == 6.0
    missed = bm.missed_targets(rows)
    assert missed == {
        "x_trl": [{"call": "grpo_loss()", "value": 1.8, "where": "article/64x512"}],
        "x_probe": [{"call": "grpo_loss()", "value": 6.0, "where": "article/512x4096"}],
    }
    assert bm.missed_text(missed["x_trl"]) == "grpo_loss() 1.80x (article/64x512)"
    assert bm.missed_text([]) == "—"
    # no TRL: no speed-up to judge, and nothing missed for it
    for r in rows:
        r["speedup_vs_trl"] = None
    assert bm.target_summary(rows)[0]["meets x TRL >= 2"] is None
    assert bm.missed_targets(rows)["x_trl"] == []


def test_run_command_as_recorded_or_rebuilt():
    assert bm.run_command(_calls_file()) == "python bench/x.py --threads 1"
    legacy = {"run_info": {"logprobs": {"argv": ["--no-trl", "--max-wall", "30"]}}}
    assert (
        bm.run_command(legacy, "logprobs")
        == "python bench/bench_logprobs.py --no-trl --max-wall 30"
    )
    assert bm.run_command({}, "grpo_loss") == "" and bm.run_command([]) == ""


def test_logprob_rows_and_shape_order(tmp_path):
    data = _bench_file()
    data["grpo_loss"]["shapes"]["article/64x512"] = data["grpo_loss"]["shapes"][
        "article/16x128"
    ]
    assert [r["shape"] for r in bm.benchmark_rows(data)] == [
        "16x128",
        "16x128",
        "64x512",
        "64x512",
        "512x4096",
    ]
    data["logprobs"] = {
        "dtypes": {
            "float32": {
                "timing": {"naive": {"median_s": 0.2}, "ours": {"median_s": 0.1}},
                "memory": {
                    "naive": {
                        "peak_extra_bytes": 4e8,
                        "peak_extra_beyond_grad_bytes": 3e8,
                        "saved_for_backward_bytes": 2e8,
                    },
                    "ours": {
                        "peak_extra_bytes": 1e8,
                        "peak_extra_beyond_grad_bytes": 4096,
                        "saved_for_backward_bytes": 8192,
                    },
                },
                "max_abs_err_vs_float64": {"naive": 1e-6, "ours": 1e-6},
            }
        }
    }
    assert bm.benchmark_sections(data) == ["grpo_loss", "logprobs"]
    rows = bm.logprob_rows(data)
    assert [(r["variant"], r["median_ms"], r["peak_extra_mb"]) for r in rows] == [
        ("naive", 200.0, 400.0),
        ("ours", 100.0, 100.0),
    ]
    assert rows[1]["beyond_grad_mb"] == pytest.approx(0.004096)
    with pytest.raises(ValueError, match="per-dtype"):
        bm.logprob_rows(data, "grpo_loss")
    (tmp_path / "only-logprobs.json").write_text(
        json.dumps({"host": {}, "logprobs": data["logprobs"]})
    )
    assert len(bm.load_benchmarks(tmp_path)) == 1


def test_logprob_rows_from_hidden_states():
    """The layout bench/bench_logprobs.py writes from hidden states: time over naive's,
    and whether each method built the (B, T, V) logits."""
    entry = {
        "timing": {v: {"median_s": t} for v, t in [("naive", 0.2), ("fused", 0.6)]},
        "time_ratio_over_naive": {"fused": 3.0},
        "builds_full_logits": {"naive": True, "fused": False},
        "memory": {
            v: {"peak_extra_bytes": b, "saved_for_backward_bytes": 4096}
            for v, b in [("naive", 3e8), ("fused", 6e8)]
        },
        "max_abs_err_vs_float64": {"naive": 1e-5, "fused": 5e-6},
    }
    rows = bm.logprob_rows({"logprobs": {"dtypes": {"float32": entry}}})
    assert [
        (r["variant"], r["x_naive"], r["full_logits"], r["beyond_grad_mb"])
        for r in rows
    ] == [("naive", 1.0, True, None), ("fused", 3.0, False, None)]
    md = tables.markdown_table(rows, ["variant", "full_logits"])
    assert "| naive | yes |" in md and "| fused | **no** |" in md


# --- page weight (bench/bench_pages.py) -----------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def _page(edition, stem, compressed, fcp_samples):
    return {
        "edition": edition,
        "page": stem,
        "path": f"{'zh/' if edition == 'zh' else ''}book/{stem}.html",
        "transfer": {
            "compressed_bytes": compressed,
            "raw_bytes": 3 * compressed,
            "resources": 30,
            "largest": [],
        },
        "timing": {
            "fcp_s": {
                "median": None
                if not fcp_samples
                else sorted(fcp_samples)[len(fcp_samples) // 2],
                "samples": fcp_samples,
            }
        },
    }


def _page_weight_file():
    pages = {
        "en/01_why": _page("en", "01_why", 830_388, [1.0, 1.2, 1.1]),
        "en/explorables": _page("en", "explorables", 1_500_000, [2.6, 2.4, 2.5]),
        "zh/01_why": _page("zh", "01_why", 1_703_545, [2.0, 1.9, 2.1]),
        "zh/explorables": _page("zh", "explorables", 2_246_000, [2.6, 2.7, 2.8]),
    }
    for entry in pages.values():
        entry["meets"] = bm.page_targets_met(entry)
    return {
        "benchmark": "page_weight",
        "host": {"cpu_model": "Toy CPU", "cpu_count": 2},
        "run_info": {"date": "2026-12-05T01:00:00+0000", "chromium_version": "156"},
        "targets": dict(bm.PAGE_WEIGHT_TARGETS),
        "pages": pages,
        "summary": bm.page_weight_summary(pages),
    }


def test_page_targets_met_at_and_over_the_limits():
    limit = bm.PAGE_WEIGHT_TARGETS["transfer_compressed_bytes_max"]
    assert limit == 1_500_000 and bm.PAGE_WEIGHT_TARGETS["fcp_s_max"] == 2.5
    assert bm.page_targets_met(_page("en", "a", limit, [2.5])) == {
        "transfer": True,
        "fcp": True,
    }
    assert bm.page_targets_met(_page("en", "a", limit + 1, [2.51])) == {
        "transfer": False,
        "fcp": False,
    }
    # the median over the visits is judged, not the slowest visit
    assert bm.page_targets_met(_page("en", "a", 1, [1.0, 9.0, 2.0]))["fcp"] is True
    # no measurement: no verdict
    assert bm.page_targets_met({"edition": "en"}) == {"transfer": None, "fcp": None}
    assert bm.page_targets_met(_page("en", "a", 1, []))["fcp"] is None
    strict = {"transfer_compressed_bytes_max": 100, "fcp_s_max": 0.5}
    assert bm.page_targets_met(_page("en", "a", 101, [0.5]), strict) == {
        "transfer": False,
        "fcp": True,
    }
    with pytest.raises(TypeError, match="entry"):
        bm.page_targets_met(None)


def test_page_weight_summary_per_edition():
    summary = bm.page_weight_summary(_page_weight_file()["pages"])
    assert list(summary) == ["en", "zh", "all"]
    assert summary["en"] == {
        "pages": 2,
        "meet_transfer": 2,
        "meet_fcp": 2,
        "meet_both": 2,
        "heaviest": {"page": "en/explorables", "compressed_bytes": 1_500_000},
        "slowest": {"page": "en/explorables", "fcp_s": 2.5},
    }
    assert summary["zh"]["meet_transfer"] == 0 and summary["zh"]["meet_fcp"] == 1
    assert summary["all"]["pages"] == 4 and summary["all"]["meet_both"] == 2
    assert summary["all"]["heaviest"]["page"] == "zh/explorables"
    assert bm.page_weight_summary({}) == {
        "all": {
            "pages": 0,
            "meet_transfer": 0,
            "meet_fcp": 0,
            "meet_both": 0,
            "heaviest": None,
            "slowest": None,
        }
    }
    with pytest.raises(TypeError, match="pages"):
        bm.page_weight_summary([])


def test_page_weight_table_from_a_result_file(tmp_path):
    path = tmp_path / "page-weight.json"
    path.write_text(json.dumps(_page_weight_file()))
    data = bm.load_page_weight(path)
    rows = bm.page_weight_rows(data)
    assert [(r["edition"], r["page"]) for r in rows] == [
        ("en", "01_why"),
        ("en", "explorables"),
        ("zh", "01_why"),
        ("zh", "explorables"),
    ]
    assert rows[0] == {
        "edition": "en",
        "page": "01_why",
        "compressed KB": pytest.approx(830.388),
        "FCP s": 1.1,
        "meets <= 1.5 MB": True,
        "meets FCP <= 2.5 s at 4x CPU": True,
    }
    assert [r["page"] for r in bm.page_weight_rows(data, "zh")] == [
        "01_why",
        "explorables",
    ]
    md = bm.page_weight_table(data).splitlines()
    assert md[0] == (
        "| edition | page | compressed KB | FCP s | meets <= 1.5 MB | "
        "meets FCP <= 2.5 s at 4x CPU |"
    )
    assert "| en | 01_why | 830 | 1.10 | yes | yes |" in md
    assert "| zh | explorables | 2,246 | 2.70 | **no** | **no** |" in md
    # the verdicts are judged again from the numbers and the file's targets
    data["targets"]["fcp_s_max"] = 1.0
    assert not bm.page_weight_rows(data)[0]["meets FCP <= 1 s at 4x CPU"]
    summary = bm.page_weight_summary_rows(_page_weight_file())
    assert summary[0] == {
        "edition": "en",
        "pages": 2,
        "meet the transfer target": 2,
        "meet the FCP target": 2,
        "heaviest page": "en/explorables (1,500 KB)",
        "slowest page": "en/explorables (2.50 s)",
    }
    assert [r["edition"] for r in summary] == ["en", "zh", "all"]
    with pytest.raises(ValueError, match="edition 'fr'"):
        bm.page_weight_table(data, "fr")


def test_page_weight_tables_in_chinese(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    data = _page_weight_file()
    head = bm.page_weight_table(data).splitlines()[0]
    assert head == (
        "| 版本 | 页面 | 压缩后 KB | FCP s | 达到 <= 1.5 MB | 达到 FCP <= 2.5 s（CPU "
        "减速 4x） |"
    )
    rows = bm.page_weight_summary_rows(data)
    head = tables.markdown_table(rows, list(rows[0])).splitlines()[0]
    assert head == (
        "| 版本 | 页数 | 达到传输量目标的页数 | 达到 FCP 目标的页数 | 最重的页面 | "
        "最慢的页面 |"
    )


def test_the_page_weight_loader_fails_clearly(tmp_path):
    missing = tmp_path / "page-weight.json"
    with pytest.raises(FileNotFoundError, match=r"bench/bench_pages\.py --out"):
        bm.load_page_weight(missing)
    missing.write_text(json.dumps({"benchmark": "frontend_draw", "frontends": {}}))
    with pytest.raises(ValueError, match="bench_pages"):
        bm.load_page_weight(missing)
    with pytest.raises(ValueError, match="bench_pages"):
        bm.page_weight_rows({"pages": {}})
    with pytest.raises(TypeError, match="path"):
        bm.load_page_weight(3)
    # the other readers of bench_results/ leave a page-weight file alone
    missing.write_text(json.dumps(_page_weight_file()))
    assert bm.load_benchmarks(tmp_path) == []
    assert bm.is_page_weight(_page_weight_file())


def _bench_pages(monkeypatch):
    """bench/bench_pages.py as a module (it puts code/ on sys.path: undone after the
    test)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    spec = importlib.util.spec_from_file_location(
        "bench_pages", ROOT / "bench" / "bench_pages.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_pages_writes_to_the_working_directory_by_default(monkeypatch, tmp_path):
    """Rerunning the benchmark never overwrites the book's shipped result: the default
    output is ./page-weight.json; the package's copy only with an explicit --out."""
    script = _bench_pages(monkeypatch)
    data_dir = (ROOT / "code" / "dpo_grpo" / "data").resolve()
    monkeypatch.chdir(tmp_path)
    args = script.parse_args([])
    assert args.out == tmp_path.resolve() / "page-weight.json"
    monkeypatch.chdir(ROOT)
    args = script.parse_args([])
    assert args.out == ROOT.resolve() / "page-weight.json"
    assert not args.out.is_relative_to(data_dir)
    assert args.site == Path("_build/html") and args.repeats == 3
    assert args.editions == ["en", "zh"] and args.pages is None
    shipped = "code/dpo_grpo/data/bench_results/page-weight.json"
    args = script.parse_args(
        ["site", "--out", shipped, "--pages", "01_why,04_code.html", "--editions", "zh"]
    )
    assert args.out == ROOT.resolve() / shipped
    assert args.pages == ["01_why", "04_code"] and args.editions == ["zh"]
    for bad in (["--repeats", "0"], ["--editions", "fr"], ["--viewport", "wide"]):
        with pytest.raises(SystemExit):
            script.parse_args(bad)


def test_bench_pages_helpers(monkeypatch, tmp_path):
    script = _bench_pages(monkeypatch)
    assert script.compression_of("/_static/x.min.js") == "gzip"
    assert script.compression_of("/_static/f.woff2") == "raw"
    assert script.compression_of("/_images/a.png", "image/png") == "raw"
    assert script.compression_of("/book/", "text/html; charset=utf-8") == "gzip"
    assert script.compression_of("/blob.bin", "application/octet-stream") == "raw"
    assert script.kind_of("/a/b.css") == "css" and script.kind_of("/x.svg") == "image"
    squeeze = script.Compressor()
    text = b"page weight " * 1000
    assert squeeze.size(text, "gzip") < len(text) // 10
    assert squeeze.size(text, "raw") == len(text)
    resources = [
        {
            "path": f"/{n}.js",
            "kind": "js",
            "encoding": "gzip-6",
            "raw_bytes": 3 * n,
            "compressed_bytes": n,
        }
        for n in range(1, 13)
    ]
    summary = script.transfer_summary(resources)
    assert summary["compressed_bytes"] == 78 and summary["raw_bytes"] == 234
    assert summary["resources"] == 12 and len(summary["largest"]) == 10
    assert summary["largest"][0]["path"] == "/12.js"
    assert summary["by_kind"] == {
        "js": {"resources": 12, "compressed_bytes": 78, "raw_bytes": 234}
    }
    for folder in ("book", "zh/book"):
        (tmp_path / folder).mkdir(parents=True)
        for stem in ("01_why", "intro"):
            (tmp_path / folder / f"{stem}.html").write_text("<p>x</p>")
    (tmp_path / "book" / "only_en.html").write_text("<p>x</p>")
    assert script.page_list(tmp_path, ["en", "zh"], ["intro", "only_en"]) == [
        ("en/intro", "book/intro.html"),
        ("en/only_en", "book/only_en.html"),
        ("zh/intro", "zh/book/intro.html"),
    ]
    assert len(script.page_list(tmp_path, ["en"])) == 3
    with pytest.raises(SystemExit, match="no such page"):
        script.page_list(tmp_path, ["en", "zh"], ["nope"])
    with pytest.raises(SystemExit, match="zh/book"):
        script.page_list(tmp_path / "book", ["zh"])
