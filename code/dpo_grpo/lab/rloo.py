"""REINFORCE with a leave-one-out baseline (``"rloo"``): online RFT with the wrong
answers put in. Each of a group's ``num_generations`` completions gets the advantage
``r_i - mean_{j != i} r_j`` (:func:`rloo_advantages`): a correct answer is pushed up,
a wrong one down, and a group whose answers all agree teaches nothing. Compared with
GRPO it has no std normalisation, no clipped ratio and no KL term (unless
``rloo_beta > 0``: the k3 penalty of GRPO); the loss (:func:`rloo_loss`) averages over
each completion's tokens, then over completions, as GRPO's ``loss_type="grpo"``. Same
sampling and budget axes as GRPO."""

from __future__ import annotations

import torch

from .grpo import GRPO, count_rollout, finish_update
from .task import policy_logps, sample_groups, score


def rloo_advantages(rewards, group_size: int):
    """``(B,)`` advantages of ``rewards`` ``(B,)`` in consecutive groups of
    ``group_size``: ``r_i - (sum_g r - r_i) / (group_size - 1)``."""
    if group_size < 2 or rewards.numel() % group_size:
        raise ValueError(
            f"group_size must be >= 2 and divide {rewards.numel()}, got {group_size}"
        )
    r = rewards.view(-1, group_size)
    baseline = (r.sum(1, keepdim=True) - r) / (group_size - 1)
    return (r - baseline).reshape(-1)


def rloo_loss(new_logps, old_logps, advantages, mask, ref_logps=None, beta=0.0):
    """``-mean_i mean_t [exp(logp - old) * A_i]`` over each completion's valid tokens
    (``mask``), plus ``beta`` times the k3 KL to ``ref_logps`` per token when given.
    The ratio is not clipped; at the sampling weights it is 1 and the gradient is
    REINFORCE's."""
    m = mask.float()
    per_token = -torch.exp(new_logps - old_logps) * advantages.unsqueeze(1)
    if ref_logps is not None and beta > 0:
        d = ref_logps - new_logps
        per_token = per_token + beta * (torch.exp(d) - d - 1)
    return ((per_token * m).sum(1) / m.sum(1).clamp(min=1)).mean()


class RLOO(GRPO):
    """Every step: sample as GRPO, score, :func:`rloo_advantages`,
    ``num_iterations`` optimiser steps of :func:`rloo_loss`. Learning rate
    ``grpo_lr``."""

    @staticmethod
    def step(run) -> dict:
        cfg, dev = run.cfg, run.device
        prompts = run.stream.next(cfg.prompts_per_step)
        rep, pids, pmask, ro = sample_groups(
            run.policy, prompts, cfg.num_generations, cfg, run.gen, dev
        )
        cids, cmask, old = ro.completion_ids, ro.completion_mask, ro.logps
        correct = score(rep, cids, ro.finished, cfg)[:, 0].to(dev)
        adv = rloo_advantages(correct, cfg.num_generations)
        tokens = int(cmask.sum().item())
        run.forward_tokens += tokens  # sampling
        ref = None
        if cfg.rloo_beta > 0:
            with torch.no_grad():
                ref = policy_logps(run.ref, pids, pmask, cids, cmask, cfg.temperature)
            run.forward_tokens += tokens
        loss = gnorm = 0.0
        for _ in range(cfg.num_iterations):
            new = policy_logps(run.policy, pids, pmask, cids, cmask, cfg.temperature)
            out = rloo_loss(new, old, adv, cmask, ref, cfg.rloo_beta)
            run.opt.zero_grad(set_to_none=True)
            out.backward()
            g = torch.nn.utils.clip_grad_norm_(
                run.policy.parameters(), cfg.max_grad_norm
            )
            run.opt.step()
            loss += float(out.detach()) / cfg.num_iterations
            gnorm += float(g) / cfg.num_iterations
            run.forward_tokens += tokens
            run.backward_tokens += tokens
        groups = correct.view(-1, cfg.num_generations)
        return count_rollout(
            run,
            {
                "loss": loss,
                "grad_norm": gnorm,
                "lr": finish_update(run),
                "tokens": tokens,
                "reward_mean": float(correct.mean()),
                "train_pass_rate": float(correct.mean()),
                "frac_reward_zero_std": float(
                    (groups.max(1).values == groups.min(1).values).float().mean()
                ),
                "completion_length": float(cmask.float().sum(1).mean()),
            },
        )
