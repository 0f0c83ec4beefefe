"""Tests of the lab's multi-seed comparison (dpo_grpo.lab.sweep) and of the results file
shipped with the package."""

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dpo_grpo import lab  # noqa: E402
from dpo_grpo.lab import LabConfig, run_lab, sweep  # noqa: E402


def _fake(finals: dict, start=0.2) -> dict:
    """A results dict with the given final greedy pass rates per method (one entry per
    seed)."""
    runs = {}
    for m, values in finals.items():
        runs[m] = [
            {
                "seed": s,
                "start_greedy": start,
                "start_sampled": start / 2,
                "final_greedy": x,
                "final_sampled": x / 2,
                "best_greedy": x + 0.01,
                "best_sampled": x / 2 + 0.01,
                "gain_greedy": x - start,
                "gain_sampled": x / 2 - start / 2,
                "sft_steps": 10,
                "heldout_pass_rate": [start, x],
                "heldout_pass_rate_sampled": [start / 2, x / 2],
            }
            for s, x in enumerate(values)
        ]
    return {
        "format": sweep.RESULTS_FORMAT,
        "seeds": list(range(len(next(iter(finals.values()))))),
        "methods": list(finals),
        "runs": runs,
        "environment": sweep.environment(),
        "config": {"eval_samples": 4},
        "n_heldout_prompts": 100,
    }


T_975_4 = 2.7764451051977987  # Student t, 97.5% quantile, 4 degrees of freedom


def test_summary_interval_and_paired_differences_on_known_numbers():
    res = _fake(
        {
            "grpo": [0.5, 0.6, 0.7, 0.5, 0.6],
            "rft": [0.4, 0.5, 0.6, 0.4, 0.5],
            "dpo": [0.7, 0.4, 0.5, 0.6, 0.5],
        }
    )
    s = sweep.summarise(res)
    g = s["grpo"]["final_greedy"]
    assert g["mean"] == pytest.approx(0.58)
    assert (g["min"], g["max"]) == (0.5, 0.7)
    # t-interval: sd (ddof 1) = sqrt(0.028 / 4), half-width t_{0.975,4} sd / sqrt(5)
    half = T_975_4 * np.sqrt(0.028 / 4) / np.sqrt(5)
    assert (g["ci_low"], g["ci_high"]) == pytest.approx((0.58 - half, 0.58 + half))
    assert s["start"]["start_greedy"]["mean"] == pytest.approx(0.2)
    p = sweep.paired(res, "grpo", "rft")
    assert p["differences"] == pytest.approx([0.1] * 5)
    assert (p["ahead"], p["behind"], p["ties"]) == (5, 0, 0)
    assert p["sign_p"] == pytest.approx(2 / 32)  # exact: 2 * 0.5**5
    assert (p["ci_low"], p["ci_high"]) == pytest.approx((0.1, 0.1))
    assert p["direction"] == "ahead"
    q = sweep.paired(res, "grpo", "dpo")
    assert (q["ahead"], q["behind"], q["sign_p"]) == (3, 2, pytest.approx(1.0))
    assert q["ci_low"] < 0 < q["ci_high"] and q["direction"] == "not separated"
    lines = sweep.verdict(res)
    assert any(line.startswith("GRPO is ahead of RFT") for line in lines)
    assert any(
        line.startswith(
            "GRPO versus DPO on the final greedy pass rate: not separated (mean "
            "difference +0.040, 95% t-interval"
        )
        and "exact two-sided sign test p = 1.000" in line
        for line in lines
    )
    flipped = _fake({"grpo": [0.4] * 5, "rft": [0.5] * 5})
    assert sweep.verdict(flipped)[0].startswith("GRPO is behind RFT")


def test_four_of_five_seeds_ahead_is_not_separated_by_the_t_interval():
    # the seeded percentile bootstrap the sweep used before (10,000 resamples of the
    # seeds) gives [+0.002, +0.066] for these five differences and called GRPO ahead;
    # the t-interval, about 1.6 times as wide, includes zero: "not separated"
    d = [0.01, 0.02, 0.03, 0.10, -0.01]
    res = _fake({"grpo": [0.5 + x for x in d], "rft": [0.5] * 5})
    p = sweep.paired(res, "grpo", "rft")
    assert p["ci_low"] < 0 < p["ci_high"]
    half = T_975_4 * np.std(d, ddof=1) / np.sqrt(5)
    assert p["ci_low"] == pytest.approx(np.mean(d) - half)
    assert (p["ahead"], p["sign_p"]) == (4, pytest.approx(0.375))  # 2 * 6 / 32
    assert sweep.verdict(res)[0].startswith(
        "GRPO versus RFT on the final greedy pass rate: not separated"
    )


def test_t_interval_of_one_seed_is_undefined():
    assert np.isnan(sweep.t_interval([0.3])["ci_low"])


def test_gain_verdict_says_when_a_method_did_not_help():
    res = _fake(
        {"grpo": [0.3, 0.25, 0.35, 0.3, 0.3], "dpo": [0.1, 0.3, 0.2, 0.25, 0.15]}
    )
    lines = sweep.gain_verdict(res)
    assert lines[0].startswith("GRPO ends above its SFT start")
    assert lines[1].startswith("DPO is not separated from its SFT start")
    assert sweep.gain(res, "dpo")["mean"] == pytest.approx(0.0)


def test_robustness_rows_use_the_main_runs_of_a_method_not_rerun():
    res = _fake({"grpo": [0.3] * 4, "rft": [0.4] * 4})
    res["robustness"] = {
        "beta_0": {
            "label": "no KL",
            "overrides": {"beta": 0.0},
            "methods": ["grpo"],
            "runs": _fake({"grpo": [0.5] * 4})["runs"],
        }
    }
    rows = sweep.robustness_table(res)
    assert [r["setting"] for r in rows] == [None, "beta_0"]
    assert rows[0]["mean"] == pytest.approx(-0.1) and rows[0]["direction"] == "behind"
    assert rows[1]["rft"] == pytest.approx(0.4) and rows[1]["grpo"] == pytest.approx(
        0.5
    )
    assert rows[1]["direction"] == "ahead"
    with pytest.raises(ValueError, match="setting"):
        sweep.paired(res, "grpo", "rft", setting="lr")


def test_compare_holds_the_greedy_curve_strictly_and_the_sampled_to_one_sample():
    res = _fake({"rft": [0.5]})
    one = sweep.sample_size(res)
    assert one == pytest.approx(1 / (100 * 4))
    ref = res["runs"]["rft"][0]
    live = dict(ref)
    assert sweep.compare(live, res, "rft")["exact"]
    live["heldout_pass_rate_sampled"] = [0.1, 0.25 + one]
    out = sweep.compare(live, res, "rft")
    assert not out["exact"] and out["greedy_exact"] and out["within_tolerance"]
    live["heldout_pass_rate_sampled"] = [0.1, 0.25 + 2 * one]
    assert not sweep.compare(live, res, "rft")["within_tolerance"]
    live = dict(ref, heldout_pass_rate=[0.2, 0.5 + one])
    out = sweep.compare(live, res, "rft")
    assert not out["greedy_exact"] and not out["within_tolerance"]


def test_sweep_functions_reject_bad_input():
    res = _fake({"grpo": [0.5], "rft": [0.4]})
    with pytest.raises(ValueError, match="results"):
        sweep.summarise({"runs": {}})
    with pytest.raises(ValueError, match="b must be one of"):
        sweep.paired(res, "grpo", "dpo")
    with pytest.raises(ValueError, match="metric"):
        sweep.paired(res, "grpo", "rft", metric="loss")
    with pytest.raises(ValueError, match="methods"):
        sweep.run_sweep("cpu", seeds=[0], methods=["a2c"])
    with pytest.raises(ValueError, match="seeds"):
        sweep.run_sweep("cpu", seeds=[0, 0])
    with pytest.raises(ValueError, match="preset"):
        sweep.results_path("tpu")


def test_a_sweep_record_matches_a_live_rerun_bit_for_bit():
    tiny = dict(
        sft_steps=30,
        sft_batch_size=64,
        grpo_steps=3,
        prompts_per_step=4,
        num_generations=4,
        dpo_steps=3,
        dpo_prompts=48,
        dpo_samples_per_prompt=4,
        dpo_batch_size=8,
        eval_every=3,
        offline_eval_every=3,
        eval_samples=1,
    )
    res = sweep.run_sweep(
        "cpu", seeds=[1], methods=["grpo", "rft"], device="cpu", **tiny
    )
    assert res["budget"]["grpo"] == {"optimizer_steps": 6, "completions_sampled": 48}
    lab.clear_sft_cache()
    live = run_lab(
        LabConfig.preset("cpu", device="cpu", **tiny), algorithm="rft", seed=1
    )
    out = sweep.compare(live, res, "rft")
    assert out["exact"] and out["max_abs_diff"] == 0.0 and out["same_environment"]
    other = run_lab(
        LabConfig.preset("cpu", device="cpu", **dict(tiny, dpo_lr=3e-3)),
        algorithm="rft",
        seed=1,
    )
    assert not sweep.compare(other, res, "rft")["exact"]
    with pytest.raises(ValueError, match="seed 2"):
        sweep.compare(dataclasses.replace(live, seed=2), res, "rft")


def test_shipped_results_file_is_the_current_cpu_preset_with_ten_seeds():
    res = sweep.load("cpu")
    assert res is not None, "run: python -m dpo_grpo.lab.sweep --preset cpu --seeds 10"
    assert res["format"] == sweep.RESULTS_FORMAT
    cfg = LabConfig.preset("cpu").to_dict()
    cfg.pop("device")
    assert res["config"] == cfg, (
        "the CPU preset changed: regenerate with python -m dpo_grpo.lab.sweep"
    )
    assert res["seeds"] == list(range(len(res["seeds"]))) and len(res["seeds"]) >= 10
    assert res["methods"] == list(sweep.METHODS)
    assert res["n_heldout_prompts"] == len(
        lab.make_task(LabConfig(**cfg)).heldout_prompts()
    )
    # matched budgets
    assert len({tuple(b.values()) for b in res["budget"].values()}) == 1
    for m in res["methods"]:
        rows = res["runs"][m]
        assert [r["seed"] for r in rows] == res["seeds"]
        for r in rows:
            assert r["optimizer_steps"] == res["budget"][m]["optimizer_steps"]
            assert r["completions_sampled"] == res["budget"][m]["completions_sampled"]
            assert (
                r["best_greedy"] == max(r["heldout_pass_rate"])
                and r["final_greedy"] == r["heldout_pass_rate"][-1]
            )
    starts = {m: [r["start_greedy"] for r in res["runs"][m]] for m in res["methods"]}
    # every method of a seed starts from the same SFT weights
    assert len({tuple(x) for x in starts.values()}) == 1
    assert np.all(
        np.isfinite(
            [r["final_sampled"] for m in res["methods"] for r in res["runs"][m]]
        )
    )
    # the critic's learning curve, one value per PPO step
    for r in res["runs"]["ppo"]:
        assert len(r["explained_variance"]) == cfg["grpo_steps"]
    # the robustness settings: every one, over the same seeds, with the overrides
    # ROBUSTNESS gives today
    assert list(res["robustness"]) == list(sweep.ROBUSTNESS)
    for name, (label, change, rerun) in sweep.ROBUSTNESS.items():
        st = res["robustness"][name]
        assert st["label"] == label and st["methods"] == list(rerun)
        assert st["overrides"] == change(LabConfig.preset("cpu"))
        for m in rerun:
            assert [r["seed"] for r in st["runs"][m]] == res["seeds"]
