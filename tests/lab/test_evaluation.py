"""How the lab scores a policy (:mod:`dpo_grpo.lab.evaluation`): :func:`error_profile`
agrees with :func:`heldout_pass_rate` and counts the wrong answers it describes."""

from __future__ import annotations

import collections
import dataclasses

import pytest
from dpo_grpo.lab import heldout_pass_rate, make_task, sft_warmup
from dpo_grpo.lab.evaluation import error_profile
from dpo_grpo.lab.model import VOCAB, encode_prompts, generate, verify


@pytest.fixture(scope="module")
def start(tiny_cfg):
    """A briefly fine-tuned model (test_sft's run, cached): some held-out sums right,
    most wrong."""
    cfg = dataclasses.replace(
        tiny_cfg,
        sft_steps=200,
        sft_target_pass_rate=0.05,
        sft_check_every=5,
        sft_probe_size=64,
    )
    return sft_warmup(cfg, 0, "cpu").model, make_task(cfg)


def test_error_profile_agrees_with_the_pass_rate_and_counts_the_errors(cpu_cfg, start):
    model, task = start
    prof = error_profile(model, task, cpu_cfg, "cpu")
    prompts = task.heldout_prompts()
    assert prof.pass_rate == heldout_pass_rate(model, prompts, cpu_cfg, "cpu")
    ids, mask = encode_prompts(prompts, "cpu")
    ro = generate(model, ids, mask, cpu_cfg.max_completion_length, greedy=True)
    texts = [VOCAB.decode(r) for r in ro.completion_ids.tolist()]
    wrong = [
        (t, terms)
        for p, t, terms, done in zip(
            prompts, texts, task.heldout_problems, ro.finished.tolist()
        )
        if not (done and verify(p, t))
    ]
    assert 0 < len(wrong) < len(prompts), "the model should get some sums right"
    top, n_top = collections.Counter(t for t, _ in wrong).most_common(1)[0]
    assert prof.top_wrong == top
    assert prof.top_wrong_share == n_top / len(wrong)
    no_carry = sum(t == task.no_carry_answer(terms) for t, terms in wrong)
    assert prof.no_carry_share == no_carry / len(wrong)
    # the page unpacks it as a tuple and slices it
    assert prof[:2] == (prof.pass_rate, prof.no_carry_share)


def test_error_profile_names_a_bad_config(start):
    model, task = start
    with pytest.raises((TypeError, ValueError), match="cfg"):
        error_profile(model, task, {"max_completion_length": 4}, "cpu")
