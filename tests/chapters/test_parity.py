"""dpo_grpo.chapters.parity: the appendix's evidence tables, the TRL defaults, and the
benchmark-results reader."""

import copy
import json
from pathlib import Path

import pytest

from dpo_grpo import tables
from dpo_grpo.chapters import parity as pa

FX = pa.load_fixtures()


def test_every_fixture_case_is_reproduced():
    rep = pa.parity_report(FX)
    assert [len(rep[k]) for k in ("grpo", "advantages", "dpo")] == [89, 40, 12]
    assert all(r["ok"] for rows in rep.values() for r in rows)
    g = pa.summarize(
        rep["grpo"], ["loss_diff", "grad_diff", "kl_diff", "clip_metric_diff"]
    )
    assert (
        g["loss_diff"] < 1e-12
        and g["grad_diff"] < 1e-12
        and g["clip_metric_diff"] < 1e-7
    )
    a = pa.summarize(rep["advantages"], ["adv_diff", "metric_diff"])
    assert a["all_ok"] and a["adv_diff"] < 1e-5
    d = pa.summarize(rep["dpo"], ["loss_diff", "grad_diff"])
    assert d["loss_diff"] < 1e-12
    # sigmoid and hinge at label_smoothing 0.2
    assert sum(r["ls_ignored_by_trl"] == "yes" for r in rep["dpo"]) == 4


def test_new_loss_types_are_in_the_report():
    rep = pa.parity_report(FX)
    assert [len(rep[k]) for k in ("grpo_loss_types", "dpo_loss_family")] == [52, 43]
    assert {r["loss_type"] for r in rep["grpo_loss_types"]} == {
        "cispo",
        "sapo",
        "luspo",
        "vespo",
    }
    family = {t for r in rep["dpo_loss_family"] for t in r["loss_type"].split("+")}
    assert len(family) == 15 and "exo_pair" in family
    g = pa.summarize(
        rep["grpo_loss_types"],
        ["loss_diff", "grad_diff", "kl_diff", "clip_metric_diff"],
    )
    assert g["all_ok"] and g["loss_diff"] < 1e-12 and g["grad_diff"] < 1e-12
    exo = [r for r in rep["dpo_loss_family"] if "exo_pair" in r["loss_type"]]
    assert exo and all(r["ok"] for r in exo)
    fx = copy.deepcopy(FX)
    fx["dpo_loss_family"]["cases"][0]["loss"] += (
        1e-8  # flagged at the float64 tolerance (not an exo_pair case)
    )
    assert not pa.dpo_case_row(fx["dpo_loss_family"]["cases"][0])["ok"]


def test_a_tampered_fixture_is_flagged():
    fx = copy.deepcopy(FX)
    fx["grpo"]["cases"][0]["loss"] += 1e-6
    fx["advantages"]["cases"][0]["advantages"][0] += 1e-3
    fx["dpo"]["cases"][0]["grad_policy_chosen"][0] += 1e-6
    rep = pa.parity_report(fx)
    assert not rep["grpo"][0]["ok"] and rep["grpo"][0]["loss_diff"] == pytest.approx(
        1e-6, rel=1e-3
    )
    assert not rep["advantages"][0]["ok"]
    assert not rep["dpo"][0]["ok"]
    assert all(r["ok"] for r in rep["grpo"][1:])


def test_group_rows_and_markdown():
    rows = pa.group_rows(pa.parity_report(FX)["grpo"], ("loss_type",), ["loss_diff"])
    assert {r["loss_type"] for r in rows} == {"grpo", "bnpo", "dr_grpo", "dapo"}
    assert sum(r["cases"] for r in rows) == 89
    md = tables.markdown_table(
        rows,
        ["loss_type", "cases", "loss_diff", "all_ok"],
        {"loss_diff": ".1e"},
        headers={"loss_diff": "max |Δ loss|"},
    )
    lines = md.splitlines()
    # pipes inside a cell are escaped
    assert lines[0] == "| loss_type | cases | max \\|Δ loss\\| | all_ok |"
    assert len(lines) == 2 + len(rows) and "yes" in md
    with pytest.raises(ValueError):
        tables.markdown_table([], ["a"])


def test_find_fixtures_errors(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="missing trl_"):
        pa.find_fixtures(tmp_path)
    assert pa.find_fixtures() == pa.find_fixtures(None)
    # shipped in the package
    assert pa.find_fixtures().is_relative_to(Path(pa.__file__).resolve().parents[1])
    bad = tmp_path / "fx"
    bad.mkdir()
    for key, name in pa.FIXTURE_FILES.items():
        data = dict(FX[key], trl_version="0.0")
        (bad / name).write_text(json.dumps(data))
    with pytest.raises(ValueError, match="TRL"):
        pa.load_fixtures(bad)
    assert pa.load_fixtures(bad, expected_version=None)["grpo"]["trl_version"] == "0.0"


def test_defaults_tables():
    assert (
        pa.TRL_GRPO_DEFAULTS["beta"] == 0.0
        and pa.TRL_GRPO_DEFAULTS["loss_type"] == "dapo"
    )
    assert pa.TRL_GRPO_DEFAULTS["use_bias_correction_kl"] is True
    assert pa.PAPER_GRPO["loss_type"] == "grpo" and pa.PAPER_GRPO["beta"] == 0.04
    # every option of the paper's column, plus the length that dr_grpo divides by
    assert set(pa.TRL_GRPO_DEFAULTS) - set(pa.PAPER_GRPO) == {"max_completion_length"}
    assert set(pa.PAPER_GRPO) <= set(pa.TRL_GRPO_DEFAULTS)


def test_defaults_match_trl_when_installed(tmp_path):
    trl = pytest.importorskip("trl")
    import dataclasses

    fields = {f.name: f.default for f in dataclasses.fields(trl.GRPOConfig)}
    # a built config (after __post_init__), as a trainer would read it
    config = trl.GRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to=[]
    )
    for key, value in pa.TRL_GRPO_DEFAULTS.items():
        if key != "std_ddof":  # not an option: TRL's torch.std divides by G - 1
            assert fields[key] == value, key
            assert getattr(config, key) == value, key


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
    assert pa.load_benchmarks(tmp_path) == []
    # another benchmark
    (tmp_path / "widgets.json").write_text(json.dumps({"host": "vm", "widgets": {}}))
    assert pa.load_benchmarks(tmp_path) == []
    (tmp_path / "cpu-2core.json").write_text(json.dumps(_bench_file()))
    (tmp_path / "broken.json").write_text("{not json")
    found = pa.load_benchmarks(tmp_path)
    assert [p.name for p, _ in found] == ["cpu-2core.json"]
    data = found[0][1]
    assert pa.benchmark_sections(data) == ["grpo_loss"]
    rows = pa.benchmark_rows(data)
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
        pa.benchmark_hardware(data) == "Toy CPU, 2 CPU cores; torch 2.13.0; device cpu"
    )
    gpu = {
        "host": {
            "gpu_name": "NVIDIA H200",
            "gpu_memory_bytes": 150 * 2**30,
            "cuda_version": "12.8",
        }
    }
    assert pa.benchmark_hardware(gpu) == "NVIDIA H200 (150 GiB); CUDA 12.8"
    assert pa.benchmark_hardware([]) == "unknown hardware"
    with pytest.raises(ValueError, match="section"):
        pa.benchmark_rows(data, "selective_log_softmax")
    piv = pa.benchmark_pivot(rows)
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
    assert pa.benchmark_matrix(rows) == [
        {"config": "article", "shape": "16x128", "torch_eager": 1.0}
    ]
    assert pa.benchmark_matrix(rows, "x_probe", ("numpy", "torch_eager")) == [
        {"config": "article", "shape": "16x128", "numpy": 8.0, "torch_eager": 4.0}
    ]
    summary = pa.target_summary(rows)
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
    summary = pa.target_summary(pa.benchmark_rows(data))
    head = tables.markdown_table(summary, list(summary[0])).splitlines()[0]
    assert head == (
        "| 变体 | 形状数 | 最小 x TRL | 最大 x 探针 | 达到 x TRL >= 2 | 达到 x "
        "探针 <= 4 |"
    )
    assert summary[0]["min x TRL"] == 1.0
    assert pa.benchmark_hardware(data) == "Toy CPU，2 个 CPU 核; torch 2.13.0; 设备 cpu"
    assert pa.benchmark_hardware([]) == "未知硬件"
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
    assert [r["shape"] for r in pa.benchmark_rows(data)] == [
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
    assert pa.benchmark_sections(data) == ["grpo_loss", "logprobs"]
    rows = pa.logprob_rows(data)
    assert [(r["variant"], r["median_ms"], r["peak_extra_mb"]) for r in rows] == [
        ("naive", 200.0, 400.0),
        ("ours", 100.0, 100.0),
    ]
    assert rows[1]["beyond_grad_mb"] == pytest.approx(0.004096)
    with pytest.raises(ValueError, match="per-dtype"):
        pa.logprob_rows(data, "grpo_loss")
    (tmp_path / "only-logprobs.json").write_text(
        json.dumps({"host": {}, "logprobs": data["logprobs"]})
    )
    assert len(pa.load_benchmarks(tmp_path)) == 1
