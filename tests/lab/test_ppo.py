"""Tests of dpo_grpo.lab.ppo: PPO with a critic (GAE, value clipping, explained
variance, the critic's start, a few steps, determinism, checkpoints, the budget and the
cost comparison with GRPO). CPU only."""

import dataclasses
import math

import numpy as np

import pytest

torch = pytest.importorskip("torch")

from dpo_grpo import lab  # noqa: E402
from dpo_grpo.lab import LabConfig, LabRun, ppo, run_lab  # noqa: E402
from dpo_grpo.lab import verl_mapping as vm  # noqa: E402

# --- the pieces, against hand-computed numbers ----------------------------------------


def test_gae_matches_a_hand_computed_three_token_example():
    # gamma = 1, lambda = 0.95. Row 0, three tokens:
    #   t=2: delta = 1.0 + 0 - 0.8 = 0.2;          A = 0.2
    #   t=1: delta = -0.2 + 0.8 - 0.4 = 0.2;       A = 0.2 + 0.95 * 0.2 = 0.39
    #   t=0: delta = 0.1 + 0.4 - 0.5 = 0.0;        A = 0 + 0.95 * 0.39 = 0.3705
    # Row 1: two tokens and one of padding (its reward 5 and value 9 must not count):
    #   t=1: delta = 1.0 + 0 - 0.6 = 0.4;          A = 0.4
    #   t=0: delta = 0.0 + 0.6 - 0.3 = 0.3;        A = 0.3 + 0.95 * 0.4 = 0.68
    rewards = torch.tensor([[0.1, -0.2, 1.0], [0.0, 1.0, 5.0]])
    values = torch.tensor([[0.5, 0.4, 0.8], [0.3, 0.6, 9.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.bool)
    adv, ret = ppo.gae(rewards, values, mask, gamma=1.0, lam=0.95)
    torch.testing.assert_close(
        adv, torch.tensor([[0.3705, 0.39, 0.2], [0.68, 0.4, 0.0]])
    )
    torch.testing.assert_close(
        ret, torch.tensor([[0.8705, 0.79, 1.0], [0.98, 1.0, 0.0]])
    )
    # lambda = 1 and gamma = 1: the return is the sum of the rewards to go
    _, mc = ppo.gae(rewards, values, mask, gamma=1.0, lam=1.0)
    torch.testing.assert_close(mc, torch.tensor([[0.9, 0.8, 1.0], [1.0, 1.0, 0.0]]))


def test_token_rewards_put_the_score_on_the_last_token_and_k1_on_every_token():
    logps = torch.tensor([[-1.0, -2.0, -0.5], [-0.2, -0.4, -9.0]])
    ref = torch.tensor([[-1.5, -2.0, -0.1], [-0.2, -0.9, -1.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.bool)
    rewards, penalty = ppo.token_rewards(
        torch.tensor([1.0, 0.0]), logps, ref, mask, beta=0.1
    )
    # -0.1 * (logp - ref): row 0 -0.05, 0, +0.04; row 1 0, -0.05, (padding) 0
    torch.testing.assert_close(
        penalty, torch.tensor([[-0.05, 0.0, 0.04], [0.0, -0.05, 0.0]])
    )
    torch.testing.assert_close(
        rewards, torch.tensor([[-0.05, 0.0, 1.04], [0.0, -0.05, 0.0]])
    )
    no_ref, _ = ppo.token_rewards(torch.tensor([1.0, 0.5]), logps, None, mask, 0.1)
    torch.testing.assert_close(no_ref, torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.5, 0.0]]))


def test_value_clipping_matches_a_hand_computed_case():
    # c = 0.2, old values 0. Token by token (new, return) -> max of the errors:
    #   (0.5, 1.0):  clipped to 0.2: (0.5-1)^2 = 0.25 < (0.2-1)^2 = 0.64 -> 0.64
    #   (-0.1, 1.0): inside the range: 1.21 both                          -> 1.21
    #   (0.3, -1.0): clipped to 0.2: (1.3)^2 = 1.69 > (1.2)^2 = 1.44      -> 1.69
    #   (0.1, 0.15): inside: 0.0025                                        -> 0.0025
    #   (5.0, -5.0): padding, ignored
    # loss = 0.5 * (0.64 + 1.21 + 1.69 + 0.0025) / 4; the clipped error is the
    # larger one on 1 token of 4
    new = torch.tensor([[0.5, -0.1, 0.3, 0.1, 5.0]])
    old = torch.zeros_like(new)
    ret = torch.tensor([[1.0, 1.0, -1.0, 0.15, -5.0]])
    mask = torch.tensor([[1, 1, 1, 1, 0]], dtype=torch.bool)
    loss, frac = ppo.value_loss(new, old, ret, mask, cliprange_value=0.2)
    assert float(loss) == pytest.approx(0.5 * 3.5425 / 4, rel=1e-6)
    assert float(frac) == pytest.approx(0.25)
    # the gradient flows through the larger error only: token 0 is clipped (no
    # gradient), token 2 is not
    new.requires_grad_(True)
    ppo.value_loss(new, old, ret, mask, 0.2)[0].backward()
    assert new.grad[0, 0] == 0 and new.grad[0, 2] != 0 and new.grad[0, 4] == 0


def test_explained_variance_of_a_perfect_and_of_a_constant_critic():
    ret = torch.tensor([[1.0, 0.5, 0.0], [0.2, 0.9, 7.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.bool)
    assert ppo.explained_variance(ret, ret.clone(), mask) == pytest.approx(1.0)
    const = torch.full_like(ret, 0.3)
    assert ppo.explained_variance(ret, const, mask) == pytest.approx(0.0, abs=1e-6)
    # worse than a constant: negative
    assert ppo.explained_variance(ret, -ret, mask) < 0
    assert math.isnan(ppo.explained_variance(torch.ones(1, 3), ret[:1], mask[:1]))


def test_whitening_uses_the_valid_tokens_only():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 100.0, 100.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]], dtype=torch.bool)
    w = ppo.whiten(x, mask)
    valid = w[mask]
    assert float(valid.mean()) == pytest.approx(0.0, abs=1e-6)
    assert float(valid.std()) == pytest.approx(1.0, rel=1e-4)  # unbiased, as TRL
    assert torch.all(w[~mask] == 0)


# --- the critic -----------------------------------------------------------------------


def test_critic_starts_from_the_sft_weights_except_its_head(tiny_cfg):
    run = LabRun(tiny_cfg, "ppo", seed=0)
    policy, critic = run.policy.state_dict(), run.critic.state_dict()
    # the policy's head has no bias; the value head has one
    assert set(critic) == set(policy) | {"head.bias"}
    body = [k for k in policy if not k.startswith("head.")]
    assert len(body) > 10
    assert all(torch.equal(policy[k], critic[k]) for k in body)
    # the LM head (d_model -> vocabulary) is replaced by a new d_model -> 1 layer
    d = tiny_cfg.d_model
    assert critic["head.weight"].shape == (1, d) and critic["head.bias"].shape == (1,)
    assert policy["head.weight"].shape[0] == len(lab.model.VOCAB)
    assert 0 < float(critic["head.weight"].std()) < 0.05
    # its own tensors and its own optimiser
    assert not any(
        a.data_ptr() == b.data_ptr()
        for a in run.policy.parameters()
        for b in run.critic.parameters()
    )
    opt_params = {id(p) for g in run.critic_opt.param_groups for p in g["params"]}
    assert opt_params == {id(p) for p in run.critic.parameters()}
    assert run.critic_opt is not run.opt
    assert run.history.n_critic_parameters == sum(
        p.numel() for p in run.critic.parameters()
    )
    pids, pmask = lab.model.encode_prompts(["1+2+3=", "4+5+6="])
    cids, cmask = lab.model.encode_completions(["6", "15"])
    assert ppo.critic_values(run.critic, pids, pmask, cids, cmask).shape == (2, 3)


# --- runs -----------------------------------------------------------------------------


def test_a_few_ppo_steps_fit_the_critic_and_keep_the_kl_finite(cpu_cfg):
    cfg = dataclasses.replace(cpu_cfg, grpo_steps=10, eval_every=10)
    h = run_lab(cfg, algorithm="ppo", seed=0)
    ev = h.explained_variance
    assert len(ev) == len(h.value_loss) == len(h.kl) == 10
    # the new head starts near 0 on every token: worse than a constant
    assert ev[0] < 0
    # out-of-sample explained variance of the last steps, above the start
    # (seed 0: -0.33 -> 0.05, 0.05, 0.01)
    assert min(ev[-3:]) > ev[0] + 0.2
    assert all(math.isfinite(x) and x >= 0 for x in h.kl) and 0 < h.kl[-1] < 1
    assert all(math.isfinite(x) for x in h.value_loss + h.loss + h.critic_grad_norm)
    assert all(0 <= x <= 1 for x in h.value_clip_fraction + h.clip_ratio_region)
    assert all(g < 1e-4 for g in h.sampler_logp_gap)
    # the KL penalty is part of the reward: its sum is <= 0 on average as the
    # policy moves away from the reference
    assert h.non_score_reward[-1] < 0
    # the fields both algorithms share are filled; GRPO's group fields are not
    for name in ("reward_mean", "train_pass_rate", "clip_ratio_low", "lr"):
        assert len(getattr(h, name)) == 10
    assert h.frac_groups_all_correct == [] and h.frac_reward_zero_std == []


def _weights(history):
    return {k: v.detach().clone() for k, v in history.policy.state_dict().items()}


def _assert_same_run(a, b):
    assert a.as_dict(include_timing=False) == b.as_dict(include_timing=False)
    wa, wb = _weights(a), _weights(b)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_ppo_runs_are_deterministic(tiny_cfg):
    lab.clear_sft_cache()
    first = run_lab(tiny_cfg, algorithm="ppo", seed=3)
    lab.clear_sft_cache()
    second = run_lab(tiny_cfg, algorithm="ppo", seed=3)
    _assert_same_run(first, second)
    assert len(first.explained_variance) == tiny_cfg.grpo_steps
    other = run_lab(tiny_cfg, algorithm="ppo", seed=4)
    assert other.as_dict(include_timing=False) != first.as_dict(include_timing=False)


def test_a_ppo_history_hands_back_its_final_critic(tiny_cfg):
    h = run_lab(dataclasses.replace(tiny_cfg, grpo_steps=1), algorithm="ppo", seed=0)
    assert h.critic is not None and h.critic.head.out_features == 1
    assert any(
        p.data_ptr() != q.data_ptr()
        for p, q in zip(h.critic.parameters(), h.policy.parameters())
    )
    assert "critic" not in h.as_dict()
    assert run_lab(dataclasses.replace(tiny_cfg, grpo_steps=1), "grpo").critic is None


def test_ppo_checkpoint_resume_is_bit_for_bit(tmp_path, tiny_cfg):
    cfg = dataclasses.replace(tiny_cfg, ref_sync_steps=2)
    full = run_lab(cfg, algorithm="ppo", seed=1)
    path = tmp_path / "ckpt.pt"
    run_lab(
        cfg,
        algorithm="ppo",
        seed=1,
        checkpoint_path=path,
        checkpoint_every=3,
        stop_after=3,
    )
    state = torch.load(path, weights_only=False)
    assert set(state["algorithm_state"]) == {
        "critic",
        "critic_optimizer",
        "critic_scheduler",
    }
    assert state["algorithm_state"]["critic"]["head.weight"].shape == (
        1,
        cfg.d_model,
    )
    torch.manual_seed(12345)
    resumed = run_lab(cfg, algorithm="ppo", seed=1, resume_from=path)
    _assert_same_run(full, resumed)  # value_loss/explained_variance: the critic too
    assert full.ref_version[-1] == 3


# --- budget and cost ------------------------------------------------------------------


def test_ppo_budget_equals_grpo_on_both_axes(tiny_cfg):
    for cfg in (
        LabConfig.preset("cpu"),
        LabConfig.preset("gpu"),
        dataclasses.replace(tiny_cfg, num_iterations=3, prompts_per_step=5),
    ):
        assert lab.budget(cfg, "ppo") == lab.budget(cfg, "grpo")
    cfg = dataclasses.replace(tiny_cfg, grpo_steps=2, eval_every=2)
    b = lab.budget(cfg, "ppo")
    runs = {a: LabRun(cfg, a, seed=0) for a in ("grpo", "ppo")}
    for run in runs.values():
        run.step()
        run.step()
        assert run.optimizer_steps == b["optimizer_steps"]
        assert run.completions_sampled == b["completions_sampled"]
    # the same completions per step; PPO draws one per prompt, so G times the prompts
    per_step = cfg.prompts_per_step * cfg.num_generations
    assert runs["ppo"].stream.pos == 2 * per_step
    assert runs["grpo"].stream.pos == 2 * cfg.prompts_per_step


def test_ppo_vs_grpo_cost_counts_the_critic(tiny_cfg):
    out = lab.ppo_vs_grpo_cost(tiny_cfg, steps=2)
    grpo, ppo_ = out["grpo"], out["ppo"]
    assert ppo_["parameters"]["policy"] == grpo["parameters"]["policy"]
    assert ppo_["trainable_parameters"] == (
        grpo["trainable_parameters"] + ppo_["parameters"]["critic"]
    )
    # AdamW: two float32 moments a parameter (+ a step counter a tensor)
    n = grpo["trainable_parameters"]
    assert 8 * n <= grpo["optimizer_state_bytes"] < 8 * n + 1024
    assert out["ppo_over_grpo"]["optimizer_state_bytes"] == pytest.approx(2, rel=0.02)
    assert ppo_["completions_per_step"] == grpo["completions_per_step"]
    assert all(
        r[k] > 0
        for r in (grpo, ppo_)
        for k in ("step_seconds_median", "peak_memory_bytes")
    )


# --- config ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("gae_lambda", 1.5),
        ("gae_lambda", -0.1),
        ("gamma", 1.01),
        ("cliprange_value", 0.0),
        ("vf_coef", 0.0),
        ("critic_lr", 0.0),
        ("critic_lr", "fast"),
        ("critic_warmup", -1),
        ("critic_warmup", 1.5),
    ],
)
def test_ppo_config_fields_are_checked(field, value):
    with pytest.raises(ValueError, match=f"LabConfig.{field}"):
        LabConfig(**{field: value})
    assert set(lab.PPO_FIELDS) <= set(LabConfig().to_dict())


def test_during_the_critic_warmup_only_the_critic_learns(tiny_cfg):
    # verl's trainer.critic_warmup: the first critic_warmup steps train the critic alone
    cfg = dataclasses.replace(tiny_cfg, critic_warmup=2, grpo_steps=3)
    run = LabRun(cfg, "ppo", seed=0)
    policy0 = {k: t.clone() for k, t in run.policy.state_dict().items()}
    critic0 = {k: t.clone() for k, t in run.critic.state_dict().items()}
    for _ in range(2):
        run.step()
    assert all(torch.equal(policy0[k], t) for k, t in run.policy.state_dict().items())
    assert not all(
        torch.equal(critic0[k], t) for k, t in run.critic.state_dict().items()
    )
    h = run.history
    assert h.lr[:2] == [0.0, 0.0] and all(np.isnan(h.clip_ratio_region[:2]))
    assert np.isfinite(h.value_loss[:2]).all()
    run.step()  # the third step moves the policy
    assert not all(
        torch.equal(policy0[k], t) for k, t in run.policy.state_dict().items()
    )
    assert h.lr[2] > 0 and np.isfinite(h.clip_ratio_region[2])
    # its verl setting: verl updates the actor from the step whose number reaches it
    assert vm.verl_overrides(cfg)["trainer.critic_warmup"] == 3
    assert vm.verl_overrides(tiny_cfg)["trainer.critic_warmup"] == 0
