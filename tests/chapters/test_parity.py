"""dpo_grpo.chapters.parity: the appendix's evidence tables and the TRL defaults."""

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


def test_fixture_summary_in_english_and_chinese(monkeypatch):
    """The appendix's first lines: each fixture's versions, cases and provenance,
    English as written in the file, Chinese under DPO_GRPO_LANG=zh."""
    fixtures = pa.load_fixtures()
    assert {d["produced_by"] for d in fixtures.values()} <= set(pa.PRODUCED_BY)
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    for key, data in fixtures.items():
        assert pa.fixture_summary(key, data).splitlines() == [
            (
                f"{pa.FIXTURE_FILES[key]:22s} TRL {data['trl_version']}, "
                f"torch {data['torch_version']}, transformers "
                f"{data['transformers_version']}: {len(data['cases'])} cases"
            ),
            f"{'':22s} produced by {data['produced_by']}",
        ]
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    zh = pa.fixture_summary("dpo", fixtures["dpo"])
    assert "个用例" in zh and "生成方式：DPOTrainer._compute_loss（" in zh
    assert "produced by" not in zh and "real trainer" not in zh
    with pytest.raises(ValueError, match="key"):
        pa.fixture_summary("rloo", fixtures["dpo"])


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
