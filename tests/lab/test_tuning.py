"""Tests of the validation split (dpo_grpo.lab.task.validation_task) and the tuning of
each method's learning rate on it (dpo_grpo.lab.tuning), and of a sweep that runs each
method at its tuned settings."""

import dataclasses
import json
import types

import pytest

pytest.importorskip("torch")
from dpo_grpo.lab import run as lab_run
from dpo_grpo.lab import (
    LabConfig,
    LabRun,
    make_task,
    run_lab,
    sweep,
    sweep_command,
    tuning,
)
from dpo_grpo.lab import budget as lab_budget


def _multisets(problems):
    return {tuple(sorted(t)) for t in problems}


@pytest.mark.parametrize("seed", [0, 4])
def test_the_validation_split_is_carved_from_training_never_from_held_out(seed):
    cfg = LabConfig.preset("cpu")
    task = make_task(cfg, seed)
    valid = make_task(dataclasses.replace(cfg, eval_split="validation"), seed)
    held, val = _multisets(task.heldout_problems), _multisets(valid.heldout_problems)
    train = _multisets(valid.train_problems)
    assert len(val) == cfg.n_heldout and not held & val and not held & train
    assert not val & train
    # the training problems are split, nothing else
    assert set(valid.train_problems) | set(valid.heldout_problems) == set(
        task.train_problems
    )
    again = make_task(dataclasses.replace(cfg, eval_split="validation"), seed)
    assert again.heldout_problems == valid.heldout_problems
    with pytest.raises(ValueError, match="eval_split"):
        dataclasses.replace(cfg, eval_split="test")


def test_a_validation_run_never_sees_held_out_prompts(tiny_cfg):
    cfg = dataclasses.replace(tiny_cfg, eval_split="validation")
    run = LabRun(cfg, "grpo", 0)
    held = set(make_task(tiny_cfg, 0).heldout_prompts())
    assert not held & set(run.heldout)
    assert not held & set(run.stream.prompts)


def test_best_settings_takes_the_highest_mean():
    def row(settings, per_seed):
        return {"settings": settings, "per_seed": per_seed}

    scores = {
        "grpo": [
            row({"grpo_lr": 1e-4, "beta": 0.0}, [0.1, 0.3]),
            row({"grpo_lr": 1e-3, "beta": 0.0}, [0.25, 0.25]),
        ],
        "rft": [row({"dpo_lr": 3e-4}, [0.2]), row({"dpo_lr": 1e-3}, [0.2])],
    }
    # 0.2 vs 0.25; a tie keeps the first
    assert tuning.best_settings(scores) == {
        "grpo": {"grpo_lr": 1e-3, "beta": 0.0},
        "rft": {"dpo_lr": 3e-4},
    }
    with pytest.raises(ValueError, match="scores"):
        tuning.best_settings({"grpo": []})


def test_every_grid_point_keeps_the_sampled_completions_and_is_a_valid_config():
    cfg = LabConfig.preset("cpu")
    sampled = {m: lab_budget(cfg, m)["completions_sampled"] for m in tuning.GRID}
    for m in tuning.GRID:
        points = tuning.grid_points(m)
        n = 1
        for dim in tuning.GRID[m]:
            n *= len(dim)
        assert len(points) == n == len({json.dumps(p, sort_keys=True) for p in points})
        for p in points:
            own = dataclasses.replace(cfg, **p)
            got = lab_budget(own, m)
            assert got["completions_sampled"] == sampled[m], (m, p)
            assert got["optimizer_steps"] <= lab_budget(cfg, m)["optimizer_steps"]
    # the dimensions the issue asks for
    fields = {m: {k for p in tuning.grid_points(m) for k in p} for m in tuning.GRID}
    assert {"grpo_lr", "num_iterations", "num_generations", "beta"} <= fields["grpo"]
    assert {"grpo_lr", "num_iterations", "critic_lr", "critic_warmup"} <= fields["ppo"]
    assert fields["rft"] == {"dpo_lr", "dpo_steps"}
    with pytest.raises(ValueError, match="method"):
        tuning.grid_points("sft")


def test_tune_runs_the_grid_on_the_validation_split(monkeypatch):
    seen = []

    def fake_run(cfg, algorithm, seed, progress):
        seen.append((cfg.eval_split, algorithm, cfg.grpo_lr, cfg.dpo_lr, seed))
        rate = cfg.grpo_lr * cfg.num_iterations if algorithm != "rft" else -cfg.dpo_lr
        return types.SimpleNamespace(heldout_pass_rate_sampled=[0.0, rate])

    monkeypatch.setattr(lab_run, "run_lab", fake_run)
    res = tuning.tune("cpu", seeds=[0, 1], methods=("grpo", "rft"))
    assert {s[0] for s in seen} == {"validation"}
    n_points = len(tuning.grid_points("grpo")) + len(tuning.grid_points("rft"))
    assert len(seen) == 2 * n_points
    best = res["best"]
    assert best["grpo"]["grpo_lr"] == 3e-3 and best["grpo"]["num_iterations"] == 2
    assert best["rft"] == {"dpo_lr": 3e-4, "dpo_steps": 40}
    assert res["command"] == "python -m dpo_grpo.lab.tuning --preset cpu --seeds 0 1"
    json.dumps(res)


def test_a_tuned_sweep_runs_each_method_at_its_settings(tmp_path):
    tiny = {
        "sft_steps": 30,
        "sft_batch_size": 64,
        "grpo_steps": 2,
        "prompts_per_step": 4,
        "num_generations": 4,
        "dpo_steps": 2,
        "dpo_prompts": 32,
        "dpo_samples_per_prompt": 4,
        "dpo_batch_size": 8,
        "eval_every": 2,
        "offline_eval_every": 2,
        "eval_samples": 1,
    }
    best = {"grpo": {"grpo_lr": 1e-3}}
    res = sweep.run_sweep(
        "cpu", [0], ["grpo", "rft"], tuned=best, tuned_from="t.json", **tiny
    )
    assert res["tuned"] == best
    assert res["command"].endswith("--no-robustness --tuned t.json")
    live = run_lab(LabConfig.preset("cpu", grpo_lr=1e-3, **tiny), "grpo", 0)
    assert sweep.compare(live, res, "grpo")["exact"]
    plain = run_lab(LabConfig.preset("cpu", **tiny), "rft", 0)
    assert sweep.compare(plain, res, "rft")["exact"]
    args = sweep_command.parse_args(res["command"].split()[3:])
    assert args.tuned == "t.json"
