"""dpo_grpo.chapters.causal_logps: chapter 5's real-model token pipeline on a tiny
random Qwen2 (no download), checked against brute force and TRL 1.16.0's own code."""

import copy
import inspect

import pytest
import torch

from dpo_grpo.chapters import causal_logps as cl

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tiny():
    from dpo_grpo.lab.hf import tiny_random_model

    model, tok = tiny_random_model(0)
    ids = torch.tensor([tok.encode("12+30=42"), tok.encode("17+8=25<|im_end|>")])
    return model, tok, ids


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_shifted_logps_match_prefix_forward_passes(tiny, temperature):
    model, _, ids = tiny
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    ref = cl.prefix_forward_logps(model, ids, temperature)
    good = cl.token_logps(logits, ids, temperature)
    assert cl.assert_logps_match(good, ref) < 1e-5
    bad = cl.token_logps_unshifted_buggy(logits, ids, temperature)
    assert bad.shape == good.shape and torch.isfinite(bad).all()
    with pytest.raises(ValueError, match="shifted"):
        cl.assert_logps_match(bad, ref)


def test_temperature_divides_the_logits_as_trl_does(tiny):
    trl_utils = pytest.importorskip("trl.trainer.utils")
    model, _, ids = tiny
    mask = torch.ones_like(ids)
    keep = 4
    fused = copy.deepcopy(model)
    trl_utils.add_fused_lm_head(fused, temperature=0.7)
    labels = cl.trl_labels(ids, mask, keep)
    with torch.no_grad():
        trl = fused(
            input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True
        )
        ours = cl.token_logps(model(input_ids=ids).logits, ids, 0.7)
        at_one = cl.token_logps(model(input_ids=ids).logits, ids, 1.0)
    assert torch.allclose(trl.log_probs[:, -keep:], ours[:, -keep:], atol=1e-5)
    assert (trl.log_probs[:, -keep:] - at_one[:, -keep:]).abs().max() > 1e-3
    # prompt positions are not scored
    assert (trl.log_probs[:, :-keep] == 0).all()
    # the chapter's helper runs the same head on its own copy of the model
    assert torch.equal(cl.trl_fused_head_logps(model, ids, labels, 0.7), trl.log_probs)


def test_trl_labels_mask_prompt_and_padding():
    ids = torch.tensor([[0, 5, 6, 7, 8, 1, 1]])
    attn = torch.tensor([[0, 1, 1, 1, 1, 1, 0]])
    labels = cl.trl_labels(ids, attn, logits_to_keep=4)
    assert labels.tolist() == [[-100, -100, -100, 7, 8, 1, -100]]


def test_trl_source_still_builds_labels_and_old_logps_this_way():
    from trl import GRPOTrainer

    src = inspect.getsource(GRPOTrainer._get_per_token_logps_and_entropies)
    assert "input_ids_batch.masked_fill(attention_mask_batch == 0, -100)" in src
    assert "labels[:, :-logits_to_keep] = -100" in src
    gen = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    assert "self.args.gradient_accumulation_steps % generate_every != 0" in gen
    loss = inspect.getsource(GRPOTrainer._compute_loss)
    assert "per_token_logps.detach() if old_per_token_logps is None" in loss


def test_completion_mask_stops_after_the_first_eos():
    ids = torch.tensor([[5, 9, 2, 9, 9], [5, 6, 7, 8, 4], [2, 0, 0, 0, 0]])
    assert cl.completion_mask(ids, eos_id=2).tolist() == [
        [1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1],
        [1, 0, 0, 0, 0],
    ]


def test_old_logps_source():
    detached = "the current log-probs, detached (ratio 1)"
    once = "computed once per generation batch, before its updates"
    assert cl.old_logps_source(1) == detached
    assert cl.old_logps_source(2) == once
    assert cl.old_logps_source(1, gradient_accumulation_steps=4) == detached
    assert (
        cl.old_logps_source(1, steps_per_generation=8, gradient_accumulation_steps=4)
        == once
    )
    assert (
        cl.old_logps_source(2, steps_per_generation=2, gradient_accumulation_steps=4)
        == detached
    )
    assert cl.old_logps_source(1, vllm_importance_sampling=True) == once


def test_validation():
    with pytest.raises(ValueError):
        cl.token_logps(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="temperature"):
        cl.token_logps(torch.zeros(1, 3, 4), torch.zeros(1, 3, dtype=torch.long), 0.0)
