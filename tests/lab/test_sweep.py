"""Tests of the lab's multi-seed comparison (dpo_grpo.lab.sweep) and of the results file shipped with the package."""

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dpo_grpo import lab  # noqa: E402
from dpo_grpo.lab import LabConfig, run_lab, sweep  # noqa: E402


def _fake(finals: dict, start=0.2) -> dict:
    """A results dict with the given final greedy pass rates per method (one entry per seed)."""
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
            }
            for s, x in enumerate(values)
        ]
    return {
        "format": sweep.RESULTS_FORMAT,
        "seeds": list(range(len(next(iter(finals.values()))))),
        "methods": list(finals),
        "runs": runs,
        "environment": sweep.environment(),
    }


def test_summary_interval_and_paired_differences_on_known_numbers():
    res = _fake(
        {
            "grpo": [0.5, 0.6, 0.7, 0.5, 0.6],
            "rft": [0.4, 0.5, 0.6, 0.4, 0.5],
            "dpo": [0.7, 0.4, 0.5, 0.6, 0.5],
        }
    )
    s = sweep.summarise(res)
    assert s["grpo"]["final_greedy"]["mean"] == pytest.approx(0.58)
    assert (s["grpo"]["final_greedy"]["min"], s["grpo"]["final_greedy"]["max"]) == (
        0.5,
        0.7,
    )
    lo, hi = s["grpo"]["final_greedy"]["ci_low"], s["grpo"]["final_greedy"]["ci_high"]
    assert 0.5 <= lo < 0.58 < hi <= 0.7
    assert s["start"]["start_greedy"]["mean"] == pytest.approx(0.2)
    p = sweep.paired(res, "grpo", "rft")
    assert (
        p["differences"] == pytest.approx([0.1] * 5)
        and p["ahead"] == 5
        and p["behind"] == 0
    )
    assert (
        p["ci_low"] == pytest.approx(0.1)
        and p["ci_high"] == pytest.approx(0.1)
        and p["direction"] == "ahead"
    )
    q = sweep.paired(res, "grpo", "dpo")
    assert (
        q["ahead"] == 3
        and q["behind"] == 2
        and q["ci_low"] < 0 < q["ci_high"]
        and q["direction"] == "unresolved"
    )
    lines = sweep.verdict(res)
    assert any(line.startswith("GRPO is ahead of RFT") for line in lines)
    assert any(
        line.startswith(
            "GRPO versus DPO on the final greedy pass rate: not resolved by 5 seeds"
        )
        for line in lines
    )
    flipped = _fake({"grpo": [0.4] * 5, "rft": [0.5] * 5})
    assert sweep.verdict(flipped)[0].startswith("GRPO is behind RFT")


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


def test_shipped_results_file_is_the_current_cpu_preset_with_five_seeds():
    res = sweep.load("cpu")
    assert res is not None, "run: python -m dpo_grpo.lab.sweep --preset cpu --seeds 5"
    cfg = LabConfig.preset("cpu").to_dict()
    cfg.pop("device")
    # the file's methods do not read the PPO-only fields (added after it was written)
    assert set(cfg) - set(res["config"]) <= set(lab.config.PPO_FIELDS)

    def without_ppo(d):
        return {k: x for k, x in d.items() if k not in lab.config.PPO_FIELDS}

    assert without_ppo(res["config"]) == without_ppo(cfg), (
        "the CPU preset changed: regenerate with python -m dpo_grpo.lab.sweep"
    )
    assert res["seeds"] == [0, 1, 2, 3, 4] and set(res["methods"]) == set(sweep.METHODS)
    # matched budgets
    assert len({tuple(b.values()) for b in res["budget"].values()}) == 1
    for m in sweep.METHODS:
        rows = res["runs"][m]
        assert [r["seed"] for r in rows] == res["seeds"]
        for r in rows:
            assert r["optimizer_steps"] == res["budget"][m]["optimizer_steps"]
            assert r["completions_sampled"] == res["budget"][m]["completions_sampled"]
            assert (
                r["best_greedy"] == max(r["heldout_pass_rate"])
                and r["final_greedy"] == r["heldout_pass_rate"][-1]
            )
    starts = {m: [r["start_greedy"] for r in res["runs"][m]] for m in sweep.METHODS}
    # every method of a seed starts from the same SFT weights
    assert len({tuple(x) for x in starts.values()}) == 1
    assert np.all(
        np.isfinite([r["final_sampled"] for m in sweep.METHODS for r in res["runs"][m]])
    )
