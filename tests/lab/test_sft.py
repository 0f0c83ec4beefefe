"""Tests of dpo_grpo.lab.sft: the SFT warm-up's early stop, its flawed demonstrations
and its cache."""

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from dpo_grpo import lab  # noqa: E402


def test_sft_early_stop_and_noisy_demonstrations(tiny_cfg):
    from dpo_grpo.lab.task import AdditionTask as Task

    assert (
        Task.no_carry_answer((7, 8, 5)) == "0"
        and Task.no_carry_answer((27, 45)) == "62"
    )
    assert Task.no_carry_answer((1, 2, 3)) == Task.answer((1, 2, 3)) == "6"
    cfg = dataclasses.replace(
        tiny_cfg,
        sft_steps=200,
        sft_target_pass_rate=0.05,
        sft_check_every=5,
        sft_probe_size=64,
    )
    out = lab.sft_warmup(cfg, 0, "cpu")
    assert out.steps < 200 and out.steps % 5 == 0 and out.probe_pass_rate >= 0.05
    # the cached result reports the same facts
    assert lab.sft_warmup(cfg, 0, "cpu").steps == out.steps
