"""dpo_grpo.chapters.trl_log_line: one GRPO step's log line (the page "Reading a TRL
run"), every metric against a second computation."""

import numpy as np
import pytest

from dpo_grpo.chapters import trl_log_line as q


def test_log_line_every_metric_has_a_meaning_and_agrees_with_its_second_computation():
    out = q.log_line()
    m = out["metrics"]
    assert list(m) == list(q.LOG_LINE_MEANINGS)
    for key, value in out["checks"].items():
        assert m[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
    inp = out["inputs"]
    assert m["completions/mean_length"] == inp["mask"].sum() / len(inp["lengths"])
    assert 0 < m["completions/clipped_ratio"] < 1 and 0 < m["frac_reward_zero_std"] < 1
    assert m["clip_ratio/low_mean"] > 0 and m["clip_ratio/high_mean"] > 0
    assert m["clip_ratio/region_mean"] == pytest.approx(
        m["clip_ratio/low_mean"] + m["clip_ratio/high_mean"]
    )
    assert "kl" not in q.log_line(beta=0.0)["metrics"]


def test_log_line_loss_meaning_is_the_logging_window_not_the_last_micro_batch():
    # transformers 5.24: logs["loss"] = sum of micro-batch losses / optimiser steps
    assert "last micro-batch" not in q.LOG_LINE_MEANINGS["loss"]
    assert "since the last log" in q.LOG_LINE_MEANINGS["loss"]


def test_vllm_log_line_on_policy_loss_is_not_zero():
    plain = q.log_line(update_scale=0.0, beta=0.0, loss_type="grpo")
    vllm = q.log_line(update_scale=0.0, beta=0.0, loss_type="grpo", use_vllm=True)
    # ratio 1 everywhere: nothing clipped, and without vLLM the loss cancels
    assert vllm["metrics"]["clip_ratio/region_mean"] == 0.0
    assert abs(plain["metrics"]["loss"]) < 1e-12
    assert abs(vllm["metrics"]["loss"]) > 1e-5
    # by hand: -(1/B) sum_i IS_i A_i at ratio 1 for loss_type 'grpo'
    w = vllm["inputs"]["importance_sampling_ratio"][:, 0]
    a = vllm["inputs"]["advantages"]
    assert vllm["metrics"]["loss"] == pytest.approx(-(w * a).mean(), abs=1e-12)
    # TRL's sampling/* metrics appear only with vLLM
    assert "sampling/importance_sampling_ratio/mean" in vllm["metrics"]
    assert not any(k.startswith("sampling/") for k in plain["metrics"])
    d = np.abs(vllm["inputs"]["old_logps"] - vllm["inputs"]["sampler_logps"])
    m = vllm["inputs"]["mask"] > 0
    assert vllm["metrics"]["sampling/sampling_logp_difference/max"] == d[m].max()
    # a sampler that agrees with the trainer changes nothing
    same = q.log_line(update_scale=0.0, beta=0.04, use_vllm=True, sampler_noise=0.0)
    ref = q.log_line(update_scale=0.0, beta=0.04)
    assert same["metrics"]["loss"] == pytest.approx(ref["metrics"]["loss"], abs=1e-15)
    assert same["metrics"]["grad_norm"] == pytest.approx(ref["metrics"]["grad_norm"])
