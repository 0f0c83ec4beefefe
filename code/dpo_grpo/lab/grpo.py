"""GRPO in the lab. The update (:func:`reference_logps`, :func:`grpo_update`) is one
function for every model: the tiny transformer here and a Hugging Face model in
:mod:`dpo_grpo.lab.hf` differ in how they sample and compute log-probs (the
``logps_fn`` they pass), not in the update. :class:`GRPO` is the tiny lab's step: the
seven steps of one GRPO iteration on a :class:`dpo_grpo.lab.run.LabRun`."""

from __future__ import annotations

import time

import torch

from .. import torch_ops
from .algorithm import Algorithm
from .runtime import synchronize
from .task import policy_logps, reward_weights, sample_groups, score


def reference_logps(ref, logps_fn, pids, pmask, cids, cmask, cfg):
    """The frozen reference's per-token log-probs ``(B, L)`` of the completions, or
    None when ``cfg.beta == 0`` (no KL term, no reference pass).
    ``logps_fn(model, pids, pmask, cids, cmask, temperature)`` computes them."""
    if cfg.beta == 0:
        return None
    with torch.no_grad():
        return logps_fn(ref, pids, pmask, cids, cmask, cfg.temperature)


def grpo_update(
    policy,
    optimizer,
    logps_fn,
    pids,
    pmask,
    cids,
    cmask,
    old_logps,
    ref_logps,
    advantages,
    cfg,
    *,
    compile: bool = False,
) -> dict:
    """``cfg.num_iterations`` optimiser steps of :func:`torch_ops.grpo_loss` on one
    rollout: per-token clipped ratio ``exp(logp - old_logps)`` times ``advantages``
    (``(B,)``) plus ``beta`` times the k3 KL to ``ref_logps`` (None: no KL), masked by
    ``cmask`` ``(B, L)``; gradients clipped to ``cfg.max_grad_norm``. The optimiser's
    schedule, if any, is the caller's. Returns the means over the epochs of ``loss``,
    ``grad_norm``, ``clip_ratio_low``/``high``/``region`` and ``kl`` (NaN without a KL
    term), and ``sampler_logp_gap``: the largest ``|logp - old_logps|`` of the first
    epoch (same weights as the sampler: only kernel differences)."""
    sums = {
        "loss": 0.0,
        "grad_norm": 0.0,
        "low": 0.0,
        "high": 0.0,
        "region": 0.0,
        "kl": 0.0,
    }
    gap = float("nan")
    m = cmask.float()
    for it in range(cfg.num_iterations):
        new_logps = logps_fn(policy, pids, pmask, cids, cmask, cfg.temperature)
        if it == 0:
            gap = float(((new_logps.detach() - old_logps).abs() * m).max())
        # per-token clipped loss + beta * k3, masked and normalised by loss_type
        out = torch_ops.grpo_loss(
            new_logps,
            old_logps,
            ref_logps,
            advantages,
            m,
            epsilon=cfg.epsilon,
            beta=cfg.beta,
            loss_type=cfg.loss_type,
            importance_sampling_level=cfg.importance_sampling_level,
            epsilon_high=cfg.epsilon_high,
            delta=cfg.delta,
            use_bias_correction_kl=cfg.use_bias_correction_kl,
            max_completion_length=cfg.max_completion_length,
            compile=compile,
        )
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
        optimizer.step()
        mt = out.metrics
        sums["loss"] += float(out.loss.detach())
        sums["grad_norm"] += float(gnorm)
        sums["low"] += float(mt["clip_ratio/low_mean"])
        sums["high"] += float(mt["clip_ratio/high_mean"])
        sums["region"] += float(mt["clip_ratio/region_mean"])
        sums["kl"] += float(mt["kl"]) if "kl" in mt else float("nan")
    k = cfg.num_iterations
    return {
        "loss": sums["loss"] / k,
        "grad_norm": sums["grad_norm"] / k,
        "clip_ratio_low": sums["low"] / k,
        "clip_ratio_high": sums["high"] / k,
        "clip_ratio_region": sums["region"] / k,
        "kl": sums["kl"] / k,
        "sampler_logp_gap": gap,
    }


@torch.no_grad()
def sync_reference(ref, policy, alpha: float):
    """TRL's ``sync_ref_model``: ``ref <- alpha * policy + (1 - alpha) * ref``."""
    for pr, pp in zip(ref.parameters(), policy.parameters()):
        pr.mul_(1 - alpha).add_(pp.detach(), alpha=alpha)


def finish_update(run) -> float:
    """After a rollout's update: step the policy's learning-rate scheduler and, every
    ``ref_sync_steps`` rollouts, pull the reference toward the policy. Returns the
    learning rate the update used."""
    cfg = run.cfg
    lr = run.opt.param_groups[0]["lr"]
    run.sched.step()
    if (
        cfg.ref_sync_steps is not None
        and (run.step_count + 1) % cfg.ref_sync_steps == 0
    ):
        sync_reference(run.ref, run.policy, cfg.ref_mixup_alpha)
        run.ref_version += 1
    return lr


def count_rollout(run, rec: dict) -> dict:
    """Add one rollout (its record ``rec``) to ``run``'s budget counters: tokens
    generated, ``num_iterations`` optimiser steps, ``prompts_per_step *
    num_generations`` completions. Returns ``rec``."""
    cfg = run.cfg
    run.tokens_generated += rec["tokens"]
    run.optimizer_steps += cfg.num_iterations
    run.completions_sampled += cfg.prompts_per_step * cfg.num_generations
    return rec


def count_passes(run, tokens: int, cfg, reference: bool, models: int = 1):
    """Add one rollout's token passes to ``run``'s counters: ``tokens`` completion
    tokens sampled (a forward each), once more through the reference if
    ``reference``, and ``num_iterations`` forward and backward passes through each of
    ``models`` trained models (the policy; PPO's critic too)."""
    run.forward_tokens += tokens * (1 + int(reference))
    run.forward_tokens += tokens * cfg.num_iterations * models
    run.backward_tokens += tokens * cfg.num_iterations * models


class GRPO(Algorithm):
    """GRPO on the tiny transformer: every step samples ``num_generations``
    completions for each of ``prompts_per_step`` prompts from the current policy,
    scores them, forms group advantages and runs :func:`grpo_update`."""

    @staticmethod
    def learning_rate(cfg) -> float:
        return cfg.grpo_lr

    @staticmethod
    def total_steps(cfg) -> int:
        return cfg.grpo_steps

    @staticmethod
    def eval_interval(cfg) -> int:
        return cfg.eval_every

    @staticmethod
    def budget(cfg) -> dict:
        """``grpo_steps * num_iterations`` optimiser steps and ``grpo_steps *
        prompts_per_step * num_generations`` completions, from the current policy."""
        return {
            "optimizer_steps": cfg.grpo_steps * cfg.num_iterations,
            "completions_sampled": cfg.grpo_steps
            * cfg.prompts_per_step
            * cfg.num_generations,
        }

    @staticmethod
    def step(run) -> dict:
        return count_rollout(run, GRPO.iteration(run))

    @staticmethod
    def iteration(run) -> dict:
        """The seven steps of one GRPO iteration on ``run``, timed by phase."""
        cfg, dev = run.cfg, run.device
        g = cfg.num_generations
        t0 = time.perf_counter()
        # (1) pick prompts; each appears num_generations times in a row (one group)
        prompts = run.stream.next(cfg.prompts_per_step)
        # (2) freeze the sampling snapshot: sample from pi_old, keep ids, masks and
        # old log-probs (never re-tokenise)
        rep, pids, pmask, ro = sample_groups(run.policy, prompts, g, cfg, run.gen, dev)
        cids, cmask, old_logps = ro.completion_ids, ro.completion_mask, ro.logps
        synchronize(dev)
        t1 = time.perf_counter()
        # (3) score with the verifier; (4) group statistics -> one advantage each
        rpf = score(rep, cids, ro.finished, cfg).to(dev)
        adv, _, rmetrics = torch_ops.reward_advantages(
            rpf, g, reward_weights=reward_weights(cfg), scale_rewards=cfg.scale_rewards
        )
        synchronize(dev)
        t2 = time.perf_counter()
        # (5) reference log-probs (frozen)
        ref_logps = reference_logps(
            run.ref, policy_logps, pids, pmask, cids, cmask, cfg
        )
        synchronize(dev)
        t3 = time.perf_counter()
        # (6) per-token clipped loss + beta * k3, (7) update and monitor
        upd = grpo_update(
            run.policy,
            run.opt,
            policy_logps,
            pids,
            pmask,
            cids,
            cmask,
            old_logps,
            ref_logps,
            adv,
            cfg,
        )
        lr = finish_update(run)
        synchronize(dev)
        t4 = time.perf_counter()
        count_passes(run, int(cmask.sum().item()), cfg, ref_logps is not None)
        correct = rpf[:, 0]
        groups = correct.view(-1, g)
        return {
            "loss": upd["loss"],
            "grad_norm": upd["grad_norm"],
            "lr": lr,
            "tokens": int(cmask.sum().item()),
            "reward_mean": float(rmetrics["reward"]),
            "reward_std": float(rmetrics["reward_std"]),
            "frac_reward_zero_std": float(rmetrics["frac_reward_zero_std"]),
            "train_pass_rate": float(correct.mean()),
            "frac_groups_all_correct": float(
                (groups.min(1).values == 1).float().mean()
            ),
            "frac_groups_all_wrong": float((groups.max(1).values == 0).float().mean()),
            "clip_ratio_low": upd["clip_ratio_low"],
            "clip_ratio_high": upd["clip_ratio_high"],
            "clip_ratio_region": upd["clip_ratio_region"],
            "kl": upd["kl"],
            "completion_length": float(cmask.float().sum(1).mean()),
            "frac_truncated": float((~ro.finished).float().mean()),
            "sampler_logp_gap": upd["sampler_logp_gap"],
            "rollout_time_s": t1 - t0,
            "score_time_s": t2 - t1,
            "reference_time_s": t3 - t2,
            "train_time_s": t4 - t3,
            "ref_version": run.ref_version,
        }
