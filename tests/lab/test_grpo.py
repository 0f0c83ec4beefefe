"""Tests of dpo_grpo.lab.grpo: the one GRPO update that the tiny lab and the Hugging
Face run share."""

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from dpo_grpo import torch_ops  # noqa: E402
from dpo_grpo.lab import grpo, make_model  # noqa: E402
from dpo_grpo.lab.model import encode_prompts, generate  # noqa: E402
from dpo_grpo.lab.task import policy_logps  # noqa: E402


def _rollout(cfg):
    torch.manual_seed(0)
    policy = make_model(cfg)
    pids, pmask = encode_prompts(["1+2+3=", "4+5+6="] * 2)
    ro = generate(policy, pids, pmask, 4, generator=torch.Generator().manual_seed(1))
    return policy, pids, pmask, ro


def test_update_is_grpo_loss_steps_on_one_rollout(cpu_cfg):
    cfg = dataclasses.replace(cpu_cfg, num_iterations=1)
    policy, pids, pmask, ro = _rollout(cfg)
    twin = make_model(cfg)
    twin.load_state_dict(policy.state_dict())
    ref = make_model(cfg)
    ref.load_state_dict(policy.state_dict())
    batch = (pids, pmask, ro.completion_ids, ro.completion_mask)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])
    ref_logps = grpo.reference_logps(ref, policy_logps, *batch, cfg)
    opt = torch.optim.SGD(policy.parameters(), lr=0.1)
    out = grpo.grpo_update(
        policy, opt, policy_logps, *batch, ro.logps, ref_logps, adv, cfg
    )
    # by hand: one SGD step on torch_ops.grpo_loss, gradients clipped
    new = policy_logps(twin, *batch)
    loss = torch_ops.grpo_loss(
        new, ro.logps, ref_logps, adv, ro.completion_mask.float(), beta=cfg.beta
    ).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(twin.parameters(), cfg.max_grad_norm)
    with torch.no_grad():
        for p in twin.parameters():
            p -= 0.1 * p.grad
    assert out["loss"] == pytest.approx(float(loss), rel=1e-6)
    for a, b in zip(policy.parameters(), twin.parameters()):
        torch.testing.assert_close(a, b)
    # same weights as the sampler: only kernel differences
    assert out["sampler_logp_gap"] < 1e-4
    assert not any(p.grad is not None for p in ref.parameters())


def test_no_reference_pass_without_a_kl_term(cpu_cfg):
    cfg = dataclasses.replace(cpu_cfg, beta=0.0)
    policy, pids, pmask, ro = _rollout(cfg)
    batch = (pids, pmask, ro.completion_ids, ro.completion_mask)
    assert grpo.reference_logps(policy, policy_logps, *batch, cfg) is None
    opt = torch.optim.SGD(policy.parameters(), lr=0.0)
    out = grpo.grpo_update(
        policy, opt, policy_logps, *batch, ro.logps, None, torch.ones(4), cfg
    )
    assert out["kl"] != out["kl"]  # NaN: no KL was computed


def test_the_hf_run_uses_the_same_update(monkeypatch):
    pytest.importorskip("transformers")
    from dpo_grpo.lab import hf

    calls = []
    real = grpo.grpo_update

    def spy(*args, **kwargs):
        calls.append(args[2])
        return real(*args, **kwargs)

    monkeypatch.setattr(hf, "grpo_update", spy)
    model, tok = hf.tiny_random_model(0)
    cfg = hf.HFLabConfig.preset("tiny-random", grpo_steps=1, eval_prompts=2)
    hf.run_hf_grpo(cfg, model, tok, seed=0)
    assert calls == [hf.hf_logps]
