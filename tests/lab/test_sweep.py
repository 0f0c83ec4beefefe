"""Tests of the lab's multi-seed comparison (dpo_grpo.lab.sweep), of the results file
shipped with the package and of the command that writes one
(dpo_grpo.lab.sweep_command)."""

import dataclasses
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dpo_grpo import lab  # noqa: E402
from dpo_grpo.lab import LabConfig, robustness, run_lab, sweep, sweep_command  # noqa: E402


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
        and "ahead in 3, behind in 2, tied in 0" in line
        and "sign test on the untied seeds p = 1.000" in line
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
    assert res is not None, f"run: {sweep.refresh_command('cpu')}"
    assert res["format"] == sweep.RESULTS_FORMAT
    cfg = LabConfig.preset("cpu").to_dict()
    cfg.pop("device")
    assert res["config"] == cfg, (
        f"the CPU preset changed: regenerate with {sweep.refresh_command('cpu')}"
    )
    assert res["seeds"] == list(range(len(res["seeds"]))) and len(res["seeds"]) >= 10
    assert res["methods"] == list(sweep.METHODS)
    assert res["n_heldout_prompts"] == len(
        lab.make_task(LabConfig(**cfg)).heldout_prompts()
    )
    # matched samples; the tuned passes over them may take fewer optimiser steps
    preset = lab.budget(LabConfig(**cfg), "grpo")
    for b in res["budget"].values():
        assert b["completions_sampled"] == preset["completions_sampled"]
        assert b["optimizer_steps"] <= preset["optimizer_steps"]
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
    # the chain is in it, with both budget axes and the per-class curves per evaluation
    assert set(res["methods"]) >= {"rft", "online_rft", "rloo", "grpo", "ppo"}
    # each method at the learning rate the shipped tuning file chose on a validation
    # split, and the file's command says so
    tuning = json.loads(
        sweep.results_path("cpu").with_name("lab-cpu-tuning.json").read_text()
    )
    assert res["tuned"] == tuning["best"] and set(res["tuned"]) == set(res["methods"])
    assert "--tuned " in res["command"]
    for m in res["methods"]:
        for r in res["runs"][m]:
            n_eval = len(r["heldout_pass_rate"])
            for k in (
                *sweep.CLASS_CURVES,
                "eval_forward_tokens",
                "eval_backward_tokens",
            ):
                assert len(r[k]) == n_eval, (m, k)
            assert r["eval_backward_tokens"][-1] > 0
    # each seed has its own held-out split
    assert len({r["n_heldout_prompts"] for r in res["runs"]["rft"]}) > 1
    # the robustness settings, over the same seeds, each applied to every rerun
    # method's own (tuned) config, as ROBUSTNESS gives them today
    assert "--no-robustness" not in res["command"]
    preset_cfg = LabConfig(**cfg)
    own = {
        m: dataclasses.replace(preset_cfg, **res["tuned"][m]) for m in res["methods"]
    }
    expected = robustness.robustness_settings(own, preset_cfg, res["methods"])
    assert list(res["robustness"]) == list(expected)
    for name, st in res["robustness"].items():
        assert st["label"] == expected[name]["label"]
        assert st["methods"] == expected[name]["methods"]
        assert st["overrides"] == json.loads(json.dumps(expected[name]["overrides"]))
        for m in st["methods"]:
            assert [r["seed"] for r in st["runs"][m]] == res["seeds"]


# --- the command: python -m dpo_grpo.lab.sweep (dpo_grpo.lab.sweep_command) ---------


def _fake_sweep(calls: list):
    """In place of :func:`sweep.run_sweep`: record the call, return a results dict of
    the seeds and methods asked for (the format of a real one, no robustness runs)."""

    def run_sweep(preset="cpu", seeds=range(10), methods=sweep.METHODS, **kw):
        seeds, methods = list(seeds), list(methods)
        calls.append({"preset": preset, "seeds": seeds, "methods": methods, **kw})
        res = _fake(
            {
                m: [0.3 + 0.01 * k * (s % 3) for s in seeds]
                for k, m in enumerate(methods)
            }
        )
        for m in methods:
            for r, s in zip(res["runs"][m], seeds):
                r["seed"] = s
        res.update(preset=preset, seeds=seeds, robustness={}, total_seconds=0.0)
        return res

    return run_sweep


@pytest.fixture
def sweep_calls(monkeypatch, tmp_path):
    """The sweep's command in an empty working directory, its runs patched out; the
    shipped data is checked unchanged after the test (and put back in any case)."""
    from testing_support import files_kept

    calls = []
    monkeypatch.setattr(sweep, "run_sweep", _fake_sweep(calls))
    monkeypatch.chdir(tmp_path)
    with files_kept() as changed:
        yield calls
        assert changed() == [], "the command wrote into the package's data"


def test_the_command_writes_to_the_working_directory_unless_told(
    sweep_calls, tmp_path, capsys
):
    """A rerun (``--seeds 0-2`` for a quick check included) never replaces the file
    the package ships; naming that file with ``--out`` is the maintainer's refresh."""
    from testing_support import files_kept

    shipped = sweep.results_path("cpu")
    with files_kept() as changed:
        assert sweep_command.main([]) == 0
        assert sweep_command.main(["--preset", "gpu", "--seeds", "0-2"]) == 0
        assert changed() == []
        assert sweep_command.main(["--seeds", "0-2", "--out", str(shipped)]) == 0
        assert changed() == [str(shipped)]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "lab-cpu.json",
        "lab-gpu.json",
    ]
    first = sweep_calls[0]
    assert first["preset"] == "cpu" and first["robustness"] is True
    assert first["seeds"] == list(range(10)) == list(sweep.DEFAULT_SEEDS)
    assert first["methods"] == list(sweep.METHODS)
    assert sweep.load(path=tmp_path / "lab-gpu.json")["seeds"] == [0, 1, 2]
    assert "wrote lab-cpu.json" in capsys.readouterr().out
    out = tmp_path / "sub" / "quick.json"
    assert sweep_command.main(["--out", str(out), "--no-robustness"]) == 0
    assert out.is_file() and sweep_calls[-1]["robustness"] is False
    # the command that refreshes the shipped file is the one that made it
    made = sweep.load("cpu")["command"]
    assert sweep.refresh_command("cpu") == (
        made + " --out code/dpo_grpo/data/lab_results/lab-cpu.json"
    )


@pytest.mark.parametrize(
    "given, seeds",
    [
        ([], list(range(10))),
        (["0-9"], list(range(10))),
        (["0", "1", "2"], [0, 1, 2]),
        (["3"], [3]),
        (["0-2", "7"], [0, 1, 2, 7]),
        (["4-4", "12"], [4, 12]),
    ],
)
def test_seeds_are_listed_or_given_as_ranges(sweep_calls, given, seeds):
    assert sweep_command.main(["--seeds", *given] if given else []) == 0
    assert sweep_calls[-1]["seeds"] == seeds


@pytest.mark.parametrize(
    "given", [["x"], ["-1"], ["5-3"], ["1.5"], ["1", "1"], ["0-2", "2"], ["2-"]]
)
def test_bad_seeds_are_refused_naming_the_argument(sweep_calls, capsys, given):
    with pytest.raises(SystemExit) as exc:
        sweep_command.main(["--seeds", *given])
    assert exc.value.code == 2 and not sweep_calls
    assert "error: argument --seeds: " in capsys.readouterr().err


def test_methods_are_chosen_among_the_sweeps(sweep_calls, capsys):
    assert sweep_command.main(["--methods", "grpo", "rft", "--no-robustness"]) == 0
    assert sweep_calls[-1]["methods"] == ["grpo", "rft"]
    # robustness settings with only some of their methods: no GRPO - RFT rows printed
    assert sweep_command.main(["--methods", "dpo"]) == 0
    assert sweep_calls[-1]["methods"] == ["dpo"]
    capsys.readouterr()
    for bad in (["a2c"], ["grpo", "grpo"], []):
        with pytest.raises(SystemExit):
            sweep_command.main(["--methods", *bad])
        err = capsys.readouterr().err
        assert "error: argument --methods: " in err, err
    with pytest.raises(SystemExit):
        sweep_command.main(["--methods", "a2c"])
    err = capsys.readouterr().err
    assert all(repr(m) in err for m in sweep.METHODS), err
    assert len(sweep_calls) == 2


def test_python_m_runs_the_command(tmp_path):
    import subprocess
    import sys

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "dpo_grpo.lab.sweep", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )

    bad = run("--seeds", "5-3")
    assert bad.returncode == 2, bad.stderr
    assert "argument --seeds: the range '5-3' holds no seed" in bad.stderr
    shown = run("--help")
    assert shown.returncode == 0 and "--methods" in shown.stdout
    assert " ".join(shown.stdout.split()).endswith(sweep.refresh_command("cpu") + ".")
    assert list(tmp_path.iterdir()) == []


def test_a_results_file_records_the_command_that_reruns_it():
    line = sweep.command_line("cpu", range(10), sweep.METHODS, robustness=True)
    assert line == "python -m dpo_grpo.lab.sweep --preset cpu --seeds 0-9"
    line = sweep.command_line("gpu", [0, 1, 2, 5], ["grpo", "rft"], robustness=False)
    assert line == (
        "python -m dpo_grpo.lab.sweep --preset gpu --seeds 0-2 5 --methods grpo rft "
        "--no-robustness"
    )
    args = sweep_command.parse_args(line.split()[3:])
    assert (args.preset, args.seeds, args.methods) == (
        "gpu",
        [0, 1, 2, 5],
        ["grpo", "rft"],
    )
    assert sweep.format_seeds([3, 1, 2, 7, 9, 8]) == "1-3 7-9"
    for bad, error, name in [
        (lambda: sweep.format_seeds(None), TypeError, "seeds"),
        (lambda: sweep.format_seeds([1, 1]), ValueError, "seeds"),
        (lambda: sweep.format_seeds([-1]), ValueError, "seeds"),
        (lambda: sweep.command_line("tpu", [0], sweep.METHODS), ValueError, "preset"),
        (lambda: sweep.command_line("cpu", [0], ["a2c"]), ValueError, "methods"),
        (lambda: sweep.load("cpu", path=3), TypeError, "path"),
        (lambda: sweep.refresh_command("tpu"), ValueError, "preset"),
    ]:
        with pytest.raises(error, match=name):
            bad()


def test_the_lab_page_shows_the_commands_real_defaults():
    """Every sweep command the lab page shows parses with the command's parser, and the
    page states the default seeds and the default output as they are."""
    import json
    import re
    from pathlib import Path

    page = Path(__file__).resolve().parents[2] / "book" / "lab_tiny_grpo.ipynb"
    text = "\n".join(
        "".join(c["source"])
        for c in json.loads(page.read_text(encoding="utf-8"))["cells"]
        if c["cell_type"] == "markdown"
    )
    shown = re.findall(r"`python -m dpo_grpo\.lab\.sweep([^`]*)`", text)
    assert shown, "the lab page shows no sweep command"
    for rest in shown:
        args = sweep_command.parse_args(rest.split())
        assert args.seeds == list(sweep.DEFAULT_SEEDS), rest
        assert args.out == Path(f"lab-{args.preset}.json"), rest
    first, last = sweep.DEFAULT_SEEDS[0], sweep.DEFAULT_SEEDS[-1]
    assert f"seeds {first} to {last}" in text
    assert f"`--seeds {sweep.format_seeds(sweep.DEFAULT_SEEDS)}`" in text
    assert "`lab-cpu.json` in the working directory" in text
    assert "five-seed" not in text and "--seeds 10" not in text


def test_robustness_settings_change_each_methods_own_config_and_skip_no_ops():
    preset = LabConfig.preset("cpu")
    own = {
        "grpo": dataclasses.replace(preset, grpo_lr=1e-3, num_iterations=1, beta=0.0),
        "rft": dataclasses.replace(preset, dpo_lr=3e-3),
    }
    st = robustness.robustness_settings(own, preset, ["grpo", "rft"])
    # on-policy and beta = 0 change nothing for this GRPO: not rerun
    assert list(st) == ["preset", "budget_x2"]
    assert st["preset"]["overrides"] == {
        "grpo": {"grpo_lr": preset.grpo_lr, "num_iterations": 2, "beta": preset.beta},
        "rft": {"dpo_lr": preset.dpo_lr},
    }
    assert st["preset"]["configs"]["grpo"] == preset
    doubled = st["budget_x2"]["configs"]["grpo"]
    assert doubled.grpo_steps == 2 * preset.grpo_steps and doubled.grpo_lr == 1e-3
    # an untuned method has no "preset" row; a method not in the sweep none at all
    st = robustness.robustness_settings({"grpo": preset}, preset, ["grpo"])
    assert list(st) == ["budget_x2", "on_policy", "beta_0"]
    assert st["on_policy"]["overrides"]["grpo"]["grpo_steps"] == 80
