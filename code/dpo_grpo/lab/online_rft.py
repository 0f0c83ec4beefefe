"""Online rejection-sampling fine-tuning (``"online_rft"``): offline RFT with one
ingredient changed. Offline RFT (:mod:`dpo_grpo.lab.offline`) samples the SFT policy
once and trains on its correct answers; online RFT samples the *current* policy every
step, as GRPO does (``prompts_per_step`` prompts, ``num_generations`` completions each),
keeps the completions the verifier accepts and runs ``num_iterations`` optimiser steps
of their token-mean NLL. Wrong answers are dropped, not pushed down: the next step of
the chain, :mod:`dpo_grpo.lab.rloo`, puts them in. Same budget axes as GRPO."""

from __future__ import annotations

import torch

from .grpo import GRPO, count_rollout, finish_update
from .task import policy_logps, sample_groups, score


def correct_nll(logps, mask, keep):
    """Token-mean NLL of the completions ``keep`` (``(B,)`` bool) selects:
    ``-sum(logps * mask) / sum(mask)`` over the kept rows (``logps``, ``mask``:
    ``(B, L)``); None when none is kept."""
    m = mask.float() * keep.float().unsqueeze(1)
    if not bool(keep.any()):
        return None
    return -(logps * m).sum() / m.sum()


class OnlineRFT(GRPO):
    """Every step: sample the current policy as GRPO does, keep the finished correct
    completions, ``num_iterations`` optimiser steps of :func:`correct_nll` on them. A
    rollout with no verified answer takes no step, though its steps still count
    against the budget. Learning rate ``grpo_lr``."""

    @staticmethod
    def step(run) -> dict:
        cfg, dev = run.cfg, run.device
        prompts = run.stream.next(cfg.prompts_per_step)
        rep, pids, pmask, ro = sample_groups(
            run.policy, prompts, cfg.num_generations, cfg, run.gen, dev
        )
        cids, cmask = ro.completion_ids, ro.completion_mask
        keep = (score(rep, cids, ro.finished, cfg)[:, 0] > 0).to(dev) & ro.finished
        kept = int((cmask.float() * keep.float().unsqueeze(1)).sum().item())
        run.forward_tokens += int(cmask.sum().item())  # sampling
        loss = gnorm = 0.0
        for _ in range(cfg.num_iterations):
            nll = correct_nll(
                policy_logps(run.policy, pids, pmask, cids, cmask), cmask, keep
            )
            if nll is None:
                break
            run.opt.zero_grad(set_to_none=True)
            nll.backward()
            g = torch.nn.utils.clip_grad_norm_(
                run.policy.parameters(), cfg.max_grad_norm
            )
            run.opt.step()
            loss += float(nll.detach()) / cfg.num_iterations
            gnorm += float(g) / cfg.num_iterations
            run.forward_tokens += kept
            run.backward_tokens += kept
        return count_rollout(
            run,
            {
                "loss": loss,
                "grad_norm": gnorm,
                "lr": finish_update(run),
                "tokens": int(cmask.sum().item()),
                "train_pass_rate": float(keep.float().mean()),
                "completion_length": float(cmask.float().sum(1).mean()),
            },
        )
