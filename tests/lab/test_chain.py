"""Tests of the chain's two new steps: online RFT (dpo_grpo.lab.online_rft) and RLOO
(dpo_grpo.lab.rloo), their losses by hand, their budgets and token passes, and their
determinism."""

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from dpo_grpo import lab
from dpo_grpo.lab import run_lab
from dpo_grpo.lab.online_rft import correct_nll
from dpo_grpo.lab.rloo import rloo_advantages, rloo_loss

CHAIN = ("rft", "online_rft", "rloo", "grpo", "ppo")


def test_the_chain_is_registered_in_order():
    assert lab.ALGORITHMS[:5] == CHAIN
    assert {"dpo", "dpo+nll"} <= set(lab.ALGORITHMS)


def test_rloo_baseline_by_hand():
    r = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    # group 1: [1, 0, 0, 0]: baselines 0, 1/3, 1/3, 1/3
    # group 2: [1, 1, 0, 1]: baselines 2/3, 2/3, 1, 2/3
    want = [1.0, -1 / 3, -1 / 3, -1 / 3, 1 / 3, 1 / 3, -1.0, 1 / 3]
    torch.testing.assert_close(rloo_advantages(r, 4), torch.tensor(want))
    # a group whose answers agree has zero advantages
    assert rloo_advantages(torch.ones(4), 4).abs().max() == 0
    with pytest.raises(ValueError, match="group_size"):
        rloo_advantages(r, 3)


def test_rloo_loss_gradient_by_hand():
    old = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -0.7, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    adv = torch.tensor([0.5, -2.0])
    new = old.clone().requires_grad_(True)
    loss = rloo_loss(new, old, adv, mask)
    # ratio 1: loss = -mean_i A_i = -(0.5 - 2) / 2
    assert float(loss.detach()) == pytest.approx(0.75)
    loss.backward()
    # d/d logp_{i,t} = -A_i / (len_i * B) on valid tokens
    want = torch.tensor([[-0.5 / 6] * 3, [2.0 / 4, 2.0 / 4, 0.0]])
    torch.testing.assert_close(new.grad, want)
    # the KL term, only when asked for: zero at the reference, k3 > 0 elsewhere
    same = rloo_loss(old, old, adv, mask, ref_logps=old, beta=0.5)
    assert float(same) == pytest.approx(0.75)
    moved = rloo_loss(old, old, adv, mask, ref_logps=old - 1.0, beta=0.5)
    k3 = torch.exp(torch.tensor(-1.0)) + 1.0 - 1.0
    assert float(moved) == pytest.approx(0.75 + 0.5 * float(k3), rel=1e-6)


def test_online_rft_loss_is_the_nll_of_the_correct_answers_by_hand():
    logps = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.5, 0.0], [-4.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0]])
    keep = torch.tensor([True, False, True])
    # kept tokens: -1, -2, -3 and -4: mean NLL 10 / 4
    assert float(correct_nll(logps, mask, keep)) == pytest.approx(2.5)
    assert correct_nll(logps, mask, torch.zeros(3, dtype=torch.bool)) is None


@pytest.mark.parametrize("algorithm", ["online_rft", "rloo"])
def test_new_methods_keep_the_budget_and_are_deterministic(algorithm, tiny_cfg):
    # the SFT warm-up's own determinism is checked once, in
    # test_run.py::test_cpu_runs_are_deterministic[grpo]; both runs here start from the
    # cached SFT (computed by the first if no test did before), so the method's steps
    # are what is compared
    first = run_lab(tiny_cfg, algorithm=algorithm, seed=3)
    b = lab.budget(tiny_cfg, algorithm)
    assert b == lab.budget(tiny_cfg, "grpo")
    assert first.completions_sampled[-1] == b["completions_sampled"]
    assert first.optimizer_steps[-1] == b["optimizer_steps"]
    second = run_lab(tiny_cfg, algorithm=algorithm, seed=3)
    assert first.as_dict(include_timing=False) == second.as_dict(include_timing=False)
    wa, wb = first.policy.state_dict(), second.policy.state_dict()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    other = run_lab(tiny_cfg, algorithm=algorithm, seed=4)
    assert other.as_dict(include_timing=False) != first.as_dict(include_timing=False)


def test_rloo_moves_the_policy_and_its_kl_is_optional(tiny_cfg):
    plain = run_lab(tiny_cfg, algorithm="rloo", seed=0)
    kl = run_lab(dataclasses.replace(tiny_cfg, rloo_beta=0.1), algorithm="rloo", seed=0)
    # the KL term adds one reference pass per rollout
    extra = kl.forward_tokens[-1] - plain.forward_tokens[-1]
    assert plain.loss != kl.loss
    assert extra > 0
    with pytest.raises(ValueError, match="rloo_beta"):
        dataclasses.replace(tiny_cfg, rloo_beta=-1.0)


def test_token_passes_are_counted_per_method(tiny_cfg):
    k = tiny_cfg.num_iterations
    grpo = run_lab(tiny_cfg, algorithm="grpo", seed=0)
    gen = grpo.tokens_generated[-1]
    # sampling, the reference (beta > 0), k training epochs
    assert grpo.forward_tokens[-1] == gen * (2 + k)
    assert grpo.backward_tokens[-1] == gen * k
    rloo = run_lab(tiny_cfg, algorithm="rloo", seed=0)
    assert rloo.forward_tokens[-1] == rloo.tokens_generated[-1] * (1 + k)
    ppo = run_lab(tiny_cfg, algorithm="ppo", seed=0)
    # sampling, reference, critic values, k epochs of policy and critic
    assert ppo.forward_tokens[-1] == ppo.tokens_generated[-1] * (3 + 2 * k)
    assert ppo.backward_tokens[-1] == ppo.tokens_generated[-1] * 2 * k
    rft = run_lab(tiny_cfg, algorithm="rft", seed=0)
    online = run_lab(tiny_cfg, algorithm="online_rft", seed=0)
    for h in (rft, online):
        assert h.forward_tokens[-1] > h.tokens_generated[-1] > 0
        assert 0 < h.backward_tokens[-1] < h.forward_tokens[-1]
        assert h.eval_forward_tokens[-1] == h.forward_tokens[-1]
        assert h.eval_backward_tokens[0] == 0
        assert list(h.forward_tokens) == sorted(h.forward_tokens)


def test_heldout_pass_rate_splits_into_carry_and_no_carry(tiny_cfg):
    run = lab.LabRun(dataclasses.replace(tiny_cfg, eval_samples=1), "grpo", 0)
    n = {c: len(p) for c, p in run.heldout_by_class.items()}
    assert n["carry"] > 0 and n["nocarry"] > 0
    assert n["carry"] + n["nocarry"] == len(run.heldout)
    run.evaluate()
    h = run.history
    whole = (
        h.heldout_pass_rate_carry[0] * n["carry"]
        + h.heldout_pass_rate_nocarry[0] * n["nocarry"]
    ) / len(run.heldout)
    assert h.heldout_pass_rate[0] == pytest.approx(whole, abs=1e-12)
    # what the whole set's greedy pass rate is when scored in one batch
    alone = lab.heldout_pass_rate(run.policy, run.heldout, run.cfg, run.device)
    assert h.heldout_pass_rate[0] == pytest.approx(alone, abs=1e-12)
    sampled = (
        h.heldout_pass_rate_sampled_carry[0] * n["carry"]
        + h.heldout_pass_rate_sampled_nocarry[0] * n["nocarry"]
    ) / len(run.heldout)
    assert h.heldout_pass_rate_sampled[0] == pytest.approx(sampled, abs=1e-12)
