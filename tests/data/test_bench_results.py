"""dpo_grpo.data.bench_results: finding the shipped result files, the widget latency and
browser redraw tables."""

import json
import re
from pathlib import Path

import pytest
from dpo_grpo import tables
from dpo_grpo.chapters import benchmarks
from dpo_grpo.data import bench_results as br

HAN = re.compile(r"[\u4e00-\u9fff]")


def _widget_result(times_ms, target=50.0):
    rows = [
        {
            "control": "steps",
            "value": v,
            "recompute_ms": t,
            "repeat_ms": 0.1,
            "serialize_ms": 1.0,
            "figure_json_bytes": 10,
        }
        for v, t in zip(range(len(times_ms)), times_ms)
    ]
    slow = max(rows, key=lambda r: r["recompute_ms"])
    return {
        "host": "box",
        "cpus": 2,
        "python": "3.11",
        "numpy": "2",
        "plotly": "7",
        "loadavg_before": [0.5, 0, 0],
        "target_ms": target,
        "widgets": {
            "bandit": {
                "moves": len(rows),
                "recompute_ms": {
                    "median": sorted(times_ms)[len(times_ms) // 2],
                    "p95": max(times_ms),
                    "max": max(times_ms),
                },
                "recompute_plus_serialize_ms": {"p95": max(times_ms) + 1.0},
                "slowest": slow,
                "rows": rows,
            }
        },
    }


def test_load_results_filters_by_content_and_skips_bad_json(tmp_path):
    assert br.load_results(br.is_widget_benchmark, tmp_path) == []
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "cpu.json").write_text(json.dumps({"grpo_loss": {"shapes": {}}}))
    (tmp_path / "widgets-b.json").write_text(json.dumps(_widget_result([3.0])))
    (tmp_path / "widgets-a.json").write_text(json.dumps(_widget_result([4.0])))
    found = br.load_results(br.is_widget_benchmark, tmp_path)
    assert [p.name for p, _ in found] == ["widgets-a.json", "widgets-b.json"]
    # the torch tables use the same finder
    assert [p.name for p, _ in benchmarks.load_benchmarks(tmp_path)] == ["cpu.json"]


def test_the_repository_ships_a_widget_result_that_meets_the_target():
    found = br.load_results(br.is_widget_benchmark)
    assert found, (
        "code/dpo_grpo/data/bench_results/widgets-*.json is shipped and rendered "
        "by the benchmark appendix"
    )
    for _, data in found:
        rows = br.widget_latency_rows(data)
        assert {r["explorable"] for r in rows} >= {
            "bandit",
            "clip_platform",
            "memory_ledger",
        }
        assert all(r["meets < 50 ms"] for r in rows), rows


def test_widget_latency_rows_flag_a_missed_target():
    (row,) = br.widget_latency_rows(_widget_result([10.0, 61.0, 20.0]))
    assert row["max ms"] == 61.0 and row["slowest move"] == "steps = 1"
    assert row["meets < 50 ms"] is False
    (row,) = br.widget_latency_rows(_widget_result([10.0, 49.0]))
    assert row["meets < 50 ms"] is True
    assert "**no**" in tables.markdown_table(
        br.widget_latency_rows(_widget_result([70.0])), ["explorable", "meets < 50 ms"]
    )
    assert "host box, 2 CPUs" in br.widget_benchmark_host(_widget_result([1.0]))
    assert "figure shown as" not in br.widget_benchmark_host(_widget_result([1.0]))
    assert "figure shown as figurewidget" in br.widget_benchmark_host(
        _widget_result([1.0]) | {"live_figure_mode": "figurewidget"}
    )


@pytest.mark.parametrize("bad", [None, {}, {"widgets": {}}, {"target_ms": 50}, [1, 2]])
def test_non_widget_data_is_rejected(bad):
    assert not br.is_widget_benchmark(bad)
    with pytest.raises(ValueError, match="bench_widgets"):
        br.widget_latency_rows(bad)
    with pytest.raises(ValueError, match="bench_widgets"):
        br.widget_benchmark_host(bad)


def test_predicate_must_be_callable(tmp_path):
    with pytest.raises(TypeError, match="predicate"):
        br.load_results("widgets", tmp_path)


def _frontend_result(samples_ms):
    return {
        "benchmark": "frontend_draw",
        "target_ms": 200.0,
        "frontends": {"lab4": {"samples_ms": {"bandit": samples_ms}}},
    }


def test_frontend_draw_rows_flag_a_missed_target():
    (row,) = br.frontend_draw_rows(_frontend_result([120.0, 250.0, 130.0]))
    assert (row["frontend"], row["explorable"], row["redraws"]) == ("lab4", "bandit", 3)
    assert (
        row["median ms"] == 130.0
        and row["max ms"] == 250.0
        and row["meets < 200 ms"] is False
    )
    (row,) = br.frontend_draw_rows(_frontend_result([120.0, 199.0]))
    assert row["meets < 200 ms"] is True
    for bad in (None, {}, _widget_result([1.0]), {"benchmark": "frontend_draw"}):
        assert not br.is_frontend_draw_benchmark(bad)
        with pytest.raises(ValueError, match="bench_frontend_draw"):
            br.frontend_draw_rows(bad)


def test_the_repository_ships_a_browser_redraw_result_for_every_frontend():
    found = br.load_results(br.is_frontend_draw_benchmark)
    assert found, (
        "bench/bench_frontend_draw.py --out "
        "code/dpo_grpo/data/bench_results/frontend-draw-<host>.json writes it; the "
        "explorables page renders it"
    )
    for _, data in found:
        rows = br.frontend_draw_rows(data)
        assert {r["frontend"] for r in rows} == {
            "lab4",
            "lab4-output",
            "notebook7",
            "lab3-colab-kernel",
        }
        assert all(r["redraws"] == data["repeats"] for r in rows)


def test_widget_benchmark_host_in_english_and_chinese(monkeypatch):
    """The benchmark appendix prints this line: English as before, Chinese under
    DPO_GRPO_LANG=zh."""
    data = _widget_result([1.0]) | {
        "live_figure_mode": "figurewidget",
        "loadavg_before": [0.5, 0.5, 0.5],
    }
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    line = br.widget_benchmark_host(data)
    assert line.startswith("host box, 2 CPUs, Python ")
    assert line.endswith(
        ", figure shown as figurewidget, load average 0.5 before the run"
    )
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    zh = br.widget_benchmark_host(data)
    assert "box" in zh and "figurewidget" in zh and "Python" in zh
    assert not re.search(r"\bhost\b|CPUs|figure shown|load average", zh), zh


def test_trl_comparison_in_english_and_chinese(monkeypatch):
    """The scale-out lab prints these lines and glues the host into a sentence: English
    as the page printed them, Chinese under DPO_GRPO_LANG=zh, the same numbers."""
    [(path, data)] = br.load_results(br.is_trl_comparison)
    r = data["trl_vs_lab"]
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    en = br.trl_comparison_text(path.name, data).splitlines()
    assert en == [
        (
            f"{path.name}: {data['device']}, {data['cpu_count']} CPUs, "
            f"torch {data['torch']}, TRL {r['trl']}, {r.get('date', data['date'])}"
        ),
        f"{r['model']}; batch {r['batch']}; {r['steps']} steps each",
        (
            f"median seconds per GRPO step: this book's loop "
            f"{r['lab_step_seconds_median']:.3f}, TRL's GRPOTrainer "
            f"{r['trl_step_seconds_median']:.3f}"
        ),
    ]
    host = f"{data['device']} with {data['cpu_count']} CPUs"
    assert br.trl_comparison_host(data) == host
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    zh = br.trl_comparison_text(path.name, data)
    assert all(HAN.search(line) for line in zh.splitlines())
    assert not re.search(r"tiny random|parameters|steps each|CPUs|median", zh), zh
    number = re.compile(r"\d+(?:\.\d+)?")
    assert number.findall(zh) == number.findall("\n".join(en))
    assert HAN.search(br.trl_comparison_host(data))
    with pytest.raises(ValueError, match="trl_vs_lab"):
        br.trl_comparison_text("x.json", {"device": "cpu"})


def test_a_shipped_page_weight_result_covers_every_page_of_both_editions():
    """bench/bench_pages.py writes code/dpo_grpo/data/bench_results/page-weight.json
    only when asked (--out); once shipped, it measures every page of the book in both
    editions and its recorded verdicts and summary agree with its numbers."""
    from dpo_grpo.data import BENCH_RESULTS

    path = BENCH_RESULTS / benchmarks.PAGE_WEIGHT_FILE
    if not path.exists():
        pytest.skip(f"no {path.name} shipped yet (bench/bench_pages.py --out ...)")
    data = benchmarks.load_page_weight(path)
    book = Path(__file__).resolve().parents[2] / "book"
    stems = {p.stem for p in book.iterdir() if p.suffix in (".ipynb", ".md")}
    for edition in ("en", "zh"):
        measured = {k.partition("/")[2] for k in data["pages"] if k.startswith(edition)}
        assert measured == stems, (edition, sorted(measured ^ stems))
    targets = data["targets"]
    for key, entry in data["pages"].items():
        assert entry["transfer"]["compressed_bytes"] > 0, key
        assert entry["timing"]["fcp_s"]["median"] is not None, key
        assert entry["meets"] == benchmarks.page_targets_met(entry, targets), key
    assert data["summary"] == benchmarks.page_weight_summary(data["pages"], targets)
    assert data["method"]["scrolled"] is False


def test_call_options_by_record_or_by_name():
    """A recorded call wins; a file without records is read by the variant's name
    (``_validate``: the value checks on); TRL, NumPy, the probes and the calls of the
    removed fused kernel are no calls."""
    assert br.call_options("torch_compile_validate") == {
        "validate": True,
        "compile": True,
    }
    # the autograd path of files measured while the fused kernel existed: today's call
    assert br.call_options("torch_eager_autograd") == {
        "validate": False,
        "compile": False,
    }
    assert br.call_options("torch_eager")["validate"] is False
    kernel = {"function": "dpo_grpo.torch_ops.grpo_loss", "validate": True}
    for removed in ({"fused": None}, {"fused": True}, {"per_token": False}):
        entry = {"calls": {"torch_eager": {**kernel, **removed}}}
        assert br.call_options("torch_eager", entry) is None, removed
    autograd = {"calls": {"torch_eager": {**kernel, "fused": False}}}
    assert br.call_options("torch_eager", autograd) == br.CALL_DEFAULTS
    for other in ("trl", "numpy", "probe_compiled", "torch_unknown"):
        assert br.call_options(other) is None
    record = {"function": "dpo_grpo.torch_ops.grpo_loss", "validate": True}
    entry = {"calls": {"torch_eager": record, "numpy": {"function": "x"}}}
    assert br.call_options("torch_eager", entry) == br.CALL_DEFAULTS
    assert br.call_options("numpy", entry) is None
    with pytest.raises(TypeError, match="variant"):
        br.call_options(3)
    with pytest.raises(TypeError, match="entry"):
        br.call_options("torch_eager", [])


def test_call_label_names_what_differs_from_the_defaults():
    assert br.call_label(br.CALL_DEFAULTS) == "grpo_loss()"
    options = {**br.CALL_DEFAULTS, "compile": True}
    assert br.call_label({**options, "validate": False}) == (
        "grpo_loss(compile=True, validate=False)"
    )
    assert br.call_label({**options, "validate": False}, validate=False) == (
        "grpo_loss(compile=True)"
    )
    with pytest.raises(ValueError, match="options"):
        br.call_label({"inplace": True})
