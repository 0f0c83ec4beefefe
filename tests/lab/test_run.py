"""Tests of dpo_grpo.lab.run: whole lab runs (GRPO and the offline methods), budgets,
determinism and checkpoints. CPU only, well under a minute."""

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from dpo_grpo import lab  # noqa: E402
from dpo_grpo.lab import LabConfig, run_lab  # noqa: E402


# --- training behaviour ---------------------------------------------------------------


def test_grpo_few_steps_improves_heldout_pass_rate(cpu_cfg):
    cfg = dataclasses.replace(cpu_cfg, grpo_steps=10)
    h = run_lab(cfg, algorithm="grpo", seed=0)
    assert h.eval_step[0] == 0 and h.eval_step[-1] == 10
    assert 0.1 <= h.heldout_pass_rate[0] <= 0.6  # a mediocre SFT start
    # stopped at target
    assert (
        h.sft_probe_pass_rate >= cpu_cfg.sft_target_pass_rate
        and h.sft_steps < cpu_cfg.sft_steps
    )
    # sampled pass@1 at every evaluation
    assert len(h.heldout_pass_rate_sampled) == len(h.heldout_pass_rate)
    # GRPO raises the expected reward of the sampling policy: sampled pass@1 on held-out
    # prompts (seeds 0, 1, 2: +0.035, +0.044, +0.026). The greedy pass rate after 10
    # steps is not asserted: it can go either way (seed 2: 0.175 -> 0.156), and for seed
    # 0 it cleared a +0.03 bar on one machine's CPU and missed it by 0.0003 on another
    assert h.heldout_pass_rate_sampled[-1] >= h.heldout_pass_rate_sampled[0] + 0.02
    assert (
        len(h.reward_mean)
        == len(h.kl)
        == len(h.clip_ratio_region)
        == len(h.tokens_per_s)
        == 10
    )
    assert all(0 <= x <= 1 for x in h.frac_reward_zero_std)
    assert (
        h.tokens_generated == sorted(h.tokens_generated) and h.tokens_generated[-1] > 0
    )
    assert all(0 <= x <= 1 for x in h.clip_ratio_region)
    # the policy has moved away from the frozen SFT reference, not far
    assert 0 < h.kl[-1] < 1
    assert all(g < 1e-4 for g in h.sampler_logp_gap)


def test_dpo_increases_implicit_reward_margin_on_its_pairs(cpu_cfg):
    cfg = dataclasses.replace(cpu_cfg, dpo_steps=10, offline_eval_every=5)
    h = run_lab(cfg, algorithm="dpo", seed=0)
    assert h.n_pairs > 50
    assert (
        len(h.eval_pair_margin) == 2
        and h.eval_pair_margin[-1] > h.eval_pair_margin[0] > 0
    )
    # step 1 starts at policy == reference
    assert h.rewards_margin[-1] > h.rewards_margin[0] >= -1e-6
    # a GRPO run of no steps: its evaluation of the SFT start only
    grpo_start = run_lab(
        dataclasses.replace(cpu_cfg, grpo_steps=0), algorithm="grpo", seed=0
    ).heldout_pass_rate[0]
    assert h.heldout_pass_rate[0] == grpo_start  # both start from the same SFT weights
    # offline: all sampling happens before step 1
    assert h.tokens_generated[0] == h.tokens_generated[-1] > 0


def test_presets_match_budgets_on_both_axes(cpu_cfg):
    for preset in ("cpu", "gpu"):
        cfg = LabConfig.preset(preset)
        budgets = {a: lab.budget(cfg, a) for a in lab.ALGORITHMS}
        assert len({tuple(b.values()) for b in budgets.values()}) == 1, budgets
        # the start is controlled in both presets
        assert cfg.sft_target_pass_rate is not None
    assert lab.budget(cpu_cfg, "grpo") == {
        "optimizer_steps": 80,
        "completions_sampled": 5120,
    }
    with pytest.raises(ValueError, match="algorithm"):
        lab.budget(cpu_cfg, "a2c")


def test_histories_log_both_budget_axes_as_budget_predicts(tiny_cfg):
    for algorithm in ("grpo", "rft"):
        h = run_lab(tiny_cfg, algorithm=algorithm, seed=0)
        b = lab.budget(tiny_cfg, algorithm)
        assert h.optimizer_steps[-1] == b["optimizer_steps"]
        assert h.completions_sampled[-1] == b["completions_sampled"]
        assert (
            h.eval_optimizer_steps[0] == 0
            and h.eval_optimizer_steps[-1] == b["optimizer_steps"]
        )
    # offline: every sample is drawn before step 1
    assert h.completions_sampled[0] == b["completions_sampled"]


def test_offline_losses_dpo_nll_is_dpo_plus_rft_on_the_same_batch(tiny_cfg):
    first = {
        a: run_lab(dataclasses.replace(tiny_cfg, dpo_steps=1), algorithm=a, seed=2)
        for a in lab.OFFLINE
    }
    dpo, both, rft = first["dpo"], first["dpo+nll"], first["rft"]
    assert dpo.n_pairs == both.n_pairs == rft.n_pairs > 0  # the same selected data
    # RFT: the NLL of the chosen completions only
    assert rft.loss[0] == pytest.approx(rft.nll[0], rel=1e-6)
    assert both.loss[0] == pytest.approx(
        dpo.loss[0] + tiny_cfg.dpo_sft_weight * rft.nll[0], rel=1e-5
    )
    # policy == reference at step 1: -log sigmoid(0)
    assert dpo.loss[0] == pytest.approx(0.6931, abs=1e-3)
    assert (
        rft.heldout_pass_rate[-1] != dpo.heldout_pass_rate[-1]
        or rft.grad_norm[0] != dpo.grad_norm[0]
    )


def _weights(history):
    return {k: v.detach().clone() for k, v in history.policy.state_dict().items()}


def _assert_same_run(a, b):
    assert a.as_dict(include_timing=False) == b.as_dict(include_timing=False)
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.parametrize("algorithm", ["grpo", "dpo+nll"])
def test_cpu_runs_are_deterministic(algorithm, tiny_cfg):
    """Two runs of one seed are bit for bit the same. The SFT warm-up does not depend on
    the algorithm (its cache key has no algorithm): the GRPO case runs it afresh in both
    runs, the other cases (here and in test_chain.py) start from the cached
    SFT, so that each checks its own steps."""
    if algorithm == "grpo":
        lab.clear_sft_cache()  # include the SFT warm-up in both runs
    first = run_lab(tiny_cfg, algorithm=algorithm, seed=3)
    if algorithm == "grpo":
        lab.clear_sft_cache()
    second = run_lab(tiny_cfg, algorithm=algorithm, seed=3)
    _assert_same_run(first, second)
    other = run_lab(tiny_cfg, algorithm=algorithm, seed=4)
    assert other.as_dict(include_timing=False) != first.as_dict(include_timing=False)


@pytest.mark.parametrize("algorithm", ["grpo", "rft", "online_rft", "rloo"])
def test_checkpoint_resume_is_bit_for_bit(tmp_path, algorithm, tiny_cfg):
    cfg = dataclasses.replace(
        tiny_cfg, ref_sync_steps=2 if algorithm == "grpo" else None
    )
    full = run_lab(cfg, algorithm=algorithm, seed=1)
    path = tmp_path / "ckpt.pt"
    part = run_lab(
        cfg,
        algorithm=algorithm,
        seed=1,
        checkpoint_path=path,
        checkpoint_every=3,
        stop_after=3,
    )
    assert part.step == [1, 2, 3]
    state = torch.load(path, weights_only=False)
    for key in (
        "policy",
        "optimizer",
        "scheduler",
        "reference",
        "ref_version",
        "rng",
        "data_cursor",
        "generation",
        "step",
    ):
        assert key in state
    assert {"torch", "numpy", "python", "sampler"} <= set(state["rng"])
    # perturb every global generator in between: the checkpoint must restore them
    torch.manual_seed(12345)
    import random

    import numpy as np

    random.seed(1)
    np.random.seed(1)
    resumed = run_lab(cfg, algorithm=algorithm, seed=1, resume_from=path)
    _assert_same_run(full, resumed)
    if algorithm == "grpo":
        assert full.ref_version[-1] == 3
    with pytest.raises(ValueError, match="different config"):
        run_lab(
            dataclasses.replace(cfg, grpo_lr=1e-4),
            algorithm=algorithm,
            seed=1,
            resume_from=path,
        )
    with pytest.raises(ValueError, match="seed"):
        run_lab(cfg, algorithm=algorithm, seed=2, resume_from=path)


def test_presets_and_entry_point_arguments(cpu_cfg, tiny_cfg):
    gpu = LabConfig.preset("gpu")
    assert (
        gpu.d_model > cpu_cfg.d_model and gpu.num_generations > cpu_cfg.num_generations
    )
    assert LabConfig.preset("cpu", grpo_steps=3).grpo_steps == 3
    with pytest.raises(ValueError, match="preset"):
        LabConfig.preset("tpu")
    with pytest.raises(ValueError, match="algorithm"):
        run_lab(tiny_cfg, algorithm="a2c")
    with pytest.raises(ValueError, match="seed"):
        run_lab(tiny_cfg, algorithm="grpo", seed=-1)


def test_gpu_preset_runs_on_cpu_with_tiny_budgets():
    cfg = LabConfig.preset(
        "gpu",
        device="cpu",
        cpu_threads=1,
        sft_steps=2,
        sft_batch_size=8,
        sft_target_pass_rate=None,
        grpo_steps=1,
        prompts_per_step=2,
        num_generations=2,
        n_heldout=20,
        eval_every=1,
        # what runs is the preset's model and code path; how many prompts its SFT
        # probe and its sampled pass@1 score is not what is tested
        sft_probe_size=8,
        eval_samples=1,
    )
    h = run_lab(cfg, algorithm="grpo", seed=0)
    assert h.eval_step == [0, 1] and h.n_parameters > 1_000_000
