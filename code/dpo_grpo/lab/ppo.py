"""PPO with a critic in the lab, as PPO-RLHF runs it (TRL's ``PPOTrainer``): the
value network GRPO removes, trained here so that the two can be compared on the same
task, model and budget.

One step (:class:`PPO`):

1. sample one completion for each of ``prompts_per_step * num_generations`` prompts
   from the current policy (GRPO samples ``num_generations`` completions of each of
   ``prompts_per_step`` prompts: the number of completions per step, hence the
   sampling budget, is the same; PPO needs no group, so it takes more prompts);
2. score them with the verifier; the per-token reward (:func:`token_rewards`) is
   ``-beta * (log pi - log pi_ref)`` (k1) at every completion token plus the verifier's
   reward at the last one;
3. the critic's values of every completion prefix (:func:`critic_values`), then GAE
   (:func:`gae`, ``gamma``, ``gae_lambda``): advantages, and returns = advantages +
   values; the advantages are whitened over the batch's valid tokens (:func:`whiten`);
4. ``num_iterations`` epochs on the whole batch, each one optimiser step of the policy
   (PPO's clipped surrogate with the same ``epsilon`` as GRPO, per-token advantages,
   token mean over the batch; the KL is in the reward, not in the loss) and one of the
   critic (:func:`value_loss`: clipped value loss, ``vf_coef`` times it).

The critic (:func:`make_critic`) is a copy of the SFT policy whose LM head is replaced
by a new linear layer ``d_model -> 1``; it has its own AdamW with the policy's
conventions (warm-up, weight decay, gradient clipping) at ``critic_lr`` (default
``grpo_lr``). A step counts ``num_iterations`` optimiser steps (policy steps; the
critic steps alongside), as GRPO's does.
"""

from __future__ import annotations

import copy
import time

import torch
from torch import nn

from .. import torch_ops
from .grpo import GRPO, count_passes, count_rollout, finish_update, reference_logps
from .model import count_parameters
from .runtime import derived_seed, synchronize
from .task import policy_logps, reward_weights, sample_groups, score


def make_critic(policy: nn.Module, generator: torch.Generator | None = None):
    """A copy of ``policy`` (a :class:`dpo_grpo.lab.model.TinyTransformer`) whose
    output head is a new ``nn.Linear(d_model, 1)``: weight ~ N(0, 0.02) drawn with
    ``generator`` (on CPU), bias 0 (the model's own initialisation). Every other
    weight is the policy's; ``critic(ids, mask)`` returns ``(B, T, 1)`` values."""
    critic = copy.deepcopy(policy).requires_grad_(True)
    old = policy.head
    head = nn.Linear(old.in_features, 1)
    with torch.no_grad():
        head.weight.normal_(0.0, 0.02, generator=generator)
        head.bias.zero_()
    critic.head = head.to(device=old.weight.device, dtype=old.weight.dtype)
    return critic


def critic_values(critic, pids, pmask, cids, cmask) -> torch.Tensor:
    """``(B, L)`` float values: the critic's value of the state before completion
    token ``t`` (the position whose logits would predict it, ``P - 1 + t``, as in
    TRL's PPOTrainer)."""
    width = pids.shape[1]
    ids = torch.cat([pids, cids], dim=1)
    mask = torch.cat([pmask.bool(), cmask.bool()], dim=1)
    return critic(ids, mask)[:, width - 1 : -1, 0].float()


def token_rewards(scores, logps, ref_logps, mask, beta: float):
    """``(rewards, penalty)``, both ``(B, L)`` and 0 on padding: ``penalty = -beta *
    (logps - ref_logps)`` (the k1 estimate of the KL, per token; 0 when ``ref_logps``
    is None) and ``rewards = penalty`` plus ``scores`` ``(B,)`` at each row's last
    valid token."""
    m = mask.float()
    if ref_logps is None:
        penalty = torch.zeros_like(m)
    else:
        penalty = -beta * (logps - ref_logps) * m
    last = (m.sum(1).long() - 1).clamp(min=0)
    rewards = penalty.clone()
    rows = torch.arange(m.shape[0], device=m.device)
    rewards[rows, last] += scores.to(rewards.dtype)
    return rewards, penalty


def gae(rewards, values, mask, gamma: float = 1.0, lam: float = 0.95):
    """Generalised advantage estimation over a right-padded batch: ``delta_t = r_t +
    gamma * V_{t+1} - V_t`` (``V`` = 0 after the last valid token), ``A_t = delta_t +
    gamma * lam * A_{t+1}``. Returns ``(advantages, returns)`` ``(B, L)``, ``returns =
    advantages + values``, both 0 on padding."""
    m = mask.float()
    r, val = rewards * m, values * m
    width = r.shape[1]
    adv = torch.zeros_like(r)
    running = torch.zeros_like(r[:, 0])
    for t in reversed(range(width)):
        next_value = val[:, t + 1] if t + 1 < width else torch.zeros_like(running)
        delta = r[:, t] + gamma * next_value - val[:, t]
        running = delta + gamma * lam * running
        adv[:, t] = running
    adv = adv * m
    return adv, (adv + val) * m


def masked_mean(x, mask) -> torch.Tensor:
    m = mask.float()
    return (x * m).sum() / m.sum()


def whiten(x, mask, eps: float = 1e-8) -> torch.Tensor:
    """``(x - mean) / sqrt(var + eps)`` over the valid tokens (unbiased variance, as
    TRL's ``masked_whiten``), 0 on padding."""
    m = mask.float()
    mean = masked_mean(x, m)
    n = m.sum()
    var = (((x - mean) ** 2) * m).sum() / (n - 1).clamp(min=1)
    return (x - mean) * torch.rsqrt(var + eps) * m


def value_loss(new_values, old_values, returns, mask, cliprange_value: float):
    """PPO's clipped value loss (TRL's PPOTrainer): ``V_clip = clip(V_new, V_old - c,
    V_old + c)``, ``loss = 0.5 * token mean of max((V_new - R)^2, (V_clip - R)^2)``.
    Returns ``(loss, clip_fraction)``: the fraction of valid tokens where the clipped
    error is the larger one."""
    clipped = torch.clamp(
        new_values, old_values - cliprange_value, old_values + cliprange_value
    )
    unclipped_err = (new_values - returns) ** 2
    clipped_err = (clipped - returns) ** 2
    loss = 0.5 * masked_mean(torch.maximum(unclipped_err, clipped_err), mask)
    frac = masked_mean((clipped_err > unclipped_err).float(), mask)
    return loss, frac


def explained_variance(returns, values, mask) -> float:
    """``1 - Var[returns - values] / Var[returns]`` over the valid tokens: 1 for a
    perfect critic, 0 for a constant one, negative for one worse than a constant; NaN
    when the returns do not vary."""
    m = mask.float()
    r, res = returns, returns - values

    def var(x):
        mean = masked_mean(x, m)
        return float((((x - mean) ** 2) * m).sum() / m.sum())

    vr = var(r)
    return float("nan") if vr == 0 else 1.0 - var(res) / vr


def _cpu_state(sd: dict) -> dict:
    return {
        k: v.detach().cpu().clone() if torch.is_tensor(v) else copy.deepcopy(v)
        for k, v in sd.items()
    }


class PPO(GRPO):
    """PPO with a critic (see the module): GRPO's learning rate, number of steps,
    evaluation interval and budget (inherited); its own critic, GAE and value loss."""

    @staticmethod
    def setup(run):
        """The critic (:func:`make_critic` of the SFT policy, head drawn from the
        run's seed) and its optimiser."""
        gen = torch.Generator()
        gen.manual_seed(derived_seed(run.seed, "critic-head"))
        run.critic = make_critic(run.policy, gen)
        lr = run.cfg.critic_lr if run.cfg.critic_lr is not None else run.cfg.grpo_lr
        run.critic_opt, run.critic_sched = run.new_optimizer(
            run.critic.parameters(), lr
        )
        run.history.n_critic_parameters = count_parameters(run.critic)

    @staticmethod
    def state_dict(run) -> dict:
        return {
            "critic": _cpu_state(run.critic.state_dict()),
            "critic_optimizer": copy.deepcopy(run.critic_opt.state_dict()),
            "critic_scheduler": run.critic_sched.state_dict(),
        }

    @staticmethod
    def load_state_dict(run, state: dict):
        run.critic.load_state_dict(state["critic"])
        run.critic_opt.load_state_dict(state["critic_optimizer"])
        run.critic_sched.load_state_dict(state["critic_scheduler"])

    @staticmethod
    def step(run) -> dict:
        return count_rollout(run, PPO.iteration(run))

    @staticmethod
    def iteration(run) -> dict:
        """One PPO iteration on ``run``, timed by phase as GRPO's."""
        cfg, dev = run.cfg, run.device
        t0 = time.perf_counter()
        # (1) one completion for each of prompts_per_step * num_generations prompts
        prompts = run.stream.next(cfg.prompts_per_step * cfg.num_generations)
        rows, pids, pmask, ro = sample_groups(run.policy, prompts, 1, cfg, run.gen, dev)
        cids, cmask, old_logps = ro.completion_ids, ro.completion_mask, ro.logps
        m = cmask.float()
        synchronize(dev)
        t1 = time.perf_counter()
        # (2) the verifier's reward of each completion (weighted columns)
        rpf = score(rows, cids, ro.finished, cfg).to(dev)
        w = reward_weights(cfg)
        scores = rpf[:, 0] if w is None else rpf @ torch.tensor(w, device=dev)
        synchronize(dev)
        t2 = time.perf_counter()
        # (3) reference log-probs, values, per-token rewards, GAE
        ref_logps = reference_logps(
            run.ref, policy_logps, pids, pmask, cids, cmask, cfg
        )
        with torch.no_grad():
            old_values = critic_values(run.critic, pids, pmask, cids, cmask)
        rewards, penalty = token_rewards(scores, old_logps, ref_logps, m, cfg.beta)
        adv, returns = gae(rewards, old_values, m, cfg.gamma, cfg.gae_lambda)
        adv = whiten(adv, m)
        ev = explained_variance(returns, old_values, m)
        synchronize(dev)
        t3 = time.perf_counter()
        # (4) num_iterations epochs: one policy step and one critic step each
        upd = PPO.update(
            run,
            pids,
            pmask,
            cids,
            cmask,
            old_logps,
            ref_logps,
            adv,
            old_values,
            returns,
        )
        warm = run.step_count < cfg.critic_warmup  # the critic trains alone
        lr = 0.0 if warm else finish_update(run)
        run.critic_sched.step()
        synchronize(dev)
        t4 = time.perf_counter()
        # sampling, reference, the critic's old values, then policy and critic epochs
        trained = 1 if warm else 2
        count_passes(run, int(cmask.sum().item()), cfg, ref_logps is not None, trained)
        run.forward_tokens += int(cmask.sum().item())
        correct = rpf[:, 0]
        return {
            **upd,
            "lr": lr,
            "tokens": int(cmask.sum().item()),
            "reward_mean": float(scores.mean()),
            "reward_std": float(scores.std()) if len(scores) > 1 else 0.0,
            "train_pass_rate": float(correct.mean()),
            "completion_length": float(m.sum(1).mean()),
            "frac_truncated": float((~ro.finished).float().mean()),
            "explained_variance": ev,
            "value_mean": float(masked_mean(old_values, m)),
            "return_mean": float(masked_mean(returns, m)),
            "non_score_reward": float(penalty.sum(1).mean()),
            "rollout_time_s": t1 - t0,
            "score_time_s": t2 - t1,
            "reference_time_s": t3 - t2,
            "train_time_s": t4 - t3,
            "ref_version": run.ref_version,
        }

    @staticmethod
    def update(
        run, pids, pmask, cids, cmask, old_logps, ref_logps, adv, old_values, returns
    ) -> dict:
        """``cfg.num_iterations`` epochs on the batch; returns the epoch means of the
        policy's ``loss``, ``grad_norm``, clip fractions and k3 ``kl`` to the reference
        (NaN when ``beta == 0``), the critic's ``value_loss``,
        ``value_clip_fraction`` and ``critic_grad_norm``, and ``sampler_logp_gap``
        (first epoch). During the critic's warm-up (the first ``cfg.critic_warmup``
        steps) only the critic steps, and the policy's numbers are NaN."""
        cfg = run.cfg
        m = cmask.float()
        keys = (
            "loss",
            "grad_norm",
            "clip_ratio_low",
            "clip_ratio_high",
            "clip_ratio_region",
            "kl",
            "value_loss",
            "value_clip_fraction",
            "critic_grad_norm",
        )
        sums = dict.fromkeys(keys, 0.0)
        gap = float("nan")
        if run.step_count < cfg.critic_warmup:
            for _ in range(cfg.num_iterations):
                vloss, vclip, cnorm = PPO.critic_step(
                    run, pids, pmask, cids, cmask, old_values, returns
                )
                for key, value in zip(keys[-3:], (vloss, vclip, cnorm)):
                    sums[key] += float(value)
            k = cfg.num_iterations
            policy = dict.fromkeys(keys[:-3], float("nan"))
            critic = {key: sums[key] / k for key in keys[-3:]}
            return {**policy, **critic, "sampler_logp_gap": gap}
        for it in range(cfg.num_iterations):
            new_logps = policy_logps(
                run.policy, pids, pmask, cids, cmask, cfg.temperature
            )
            if it == 0:
                gap = float(((new_logps.detach() - old_logps).abs() * m).max())
            # the clipped surrogate with per-token advantages, token mean over the
            # batch (TRL PPO's masked_mean = loss_type "bnpo"); no KL term here
            out = torch_ops.grpo_loss(
                new_logps,
                old_logps,
                None,
                adv,
                m,
                epsilon=cfg.epsilon,
                beta=0.0,
                loss_type="bnpo",
                epsilon_high=cfg.epsilon_high,
                delta=cfg.delta,
            )
            run.opt.zero_grad(set_to_none=True)
            out.loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(
                run.policy.parameters(), cfg.max_grad_norm
            )
            run.opt.step()
            vloss, vclip, cnorm = PPO.critic_step(
                run, pids, pmask, cids, cmask, old_values, returns
            )
            if ref_logps is None:
                kl = float("nan")
            else:
                d = ref_logps - new_logps.detach()
                kl = float(masked_mean(torch.exp(d) - d - 1, m))
            mt = out.metrics
            for key, value in (
                ("loss", out.loss.detach()),
                ("grad_norm", gnorm),
                ("clip_ratio_low", mt["clip_ratio/low_mean"]),
                ("clip_ratio_high", mt["clip_ratio/high_mean"]),
                ("clip_ratio_region", mt["clip_ratio/region_mean"]),
                ("kl", kl),
                ("value_loss", vloss.detach()),
                ("value_clip_fraction", vclip),
                ("critic_grad_norm", cnorm),
            ):
                sums[key] += float(value)
        k = cfg.num_iterations
        return {**{key: s / k for key, s in sums.items()}, "sampler_logp_gap": gap}

    @staticmethod
    def critic_step(run, pids, pmask, cids, cmask, old_values, returns):
        """One optimiser step of the critic on the clipped value loss (weighted by
        ``vf_coef``); returns the loss, its clip fraction and the gradient norm."""
        cfg = run.cfg
        values = critic_values(run.critic, pids, pmask, cids, cmask)
        vloss, vclip = value_loss(
            values, old_values, returns, cmask.float(), cfg.cliprange_value
        )
        run.critic_opt.zero_grad(set_to_none=True)
        (cfg.vf_coef * vloss).backward()
        cnorm = torch.nn.utils.clip_grad_norm_(
            run.critic.parameters(), cfg.max_grad_norm
        )
        run.critic_opt.step()
        return vloss.detach(), vclip, cnorm
