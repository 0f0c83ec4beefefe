"""dpo_grpo.chapters.benchmarks: the benchmark-results reader and its tables."""

import json

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
    summary = bm.target_summary(rows)
    assert summary == [
        {
            "variant": "torch_eager",
            "shapes": 1,
            "min x TRL": 1.0,
            "max x probe": 4.0,
            "meets x TRL >= 2": False,
            "meets x probe <= 4": True,
        }
    ]
    md = tables.markdown_table(summary, list(summary[0]))
    assert "| torch_eager | 1 | 1.0 | 4.0 | **no** | yes |" in md
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
