"""The lab's offline methods (``"dpo"``, ``"dpo+nll"``, ``"rft"``): sample the SFT
policy once, keep one (correct, wrong) pair per prompt that has both
(:func:`build_preference_set`), then train on batches of those pairs
(:class:`Offline`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from .. import torch_ops
from .algorithm import Algorithm
from .model import VOCAB, encode_completions, encode_prompts
from .runtime import derived_seed
from .task import policy_logps, sample_groups, score

#: sample the SFT policy once, then train on the selected data
OFFLINE = ("dpo", "dpo+nll", "rft")


@torch.no_grad()
def build_preference_set(run):
    """Sample ``run``'s (SFT) policy offline; one (correct, wrong) pair per prompt that
    has both, in ``run.pairs``; reference log-probs precomputed once (the reference is
    the frozen SFT copy, so it never has to be run again)."""
    cfg, dev = run.cfg, run.device
    k = cfg.dpo_samples_per_prompt
    prompts = run.stream.next(cfg.dpo_prompts)
    rows = {"prompt": [], "chosen": [], "rejected": []}
    n_tokens = 0
    per_chunk = 128 if dev.type == "cpu" else 1024  # prompts per sampling batch
    for i in range(0, len(prompts), per_chunk):
        chunk = prompts[i : i + per_chunk]
        rep, _, _, ro = sample_groups(run.policy, chunk, k, cfg, run.gen, dev)
        n_tokens += int(ro.completion_mask.sum().item())
        ok = score(
            rep,
            ro.completion_ids,
            ro.finished,
            dataclasses.replace(cfg, reward="correct"),
        )[:, 0]
        texts = [VOCAB.decode(r) for r in ro.completion_ids.tolist()]
        fin = ro.finished.tolist()
        for j, p in enumerate(chunk):
            group = range(j * k, (j + 1) * k)
            good = [g for g in group if ok[g] > 0]
            # a truncated sample is not a clean answer
            wrong = [g for g in group if ok[g] == 0 and fin[g]]
            if good and wrong:
                rows["prompt"].append(p)
                rows["chosen"].append(texts[good[0]])
                rows["rejected"].append(texts[wrong[0]])
    run.tokens_generated += n_tokens
    run.completions_sampled += len(prompts) * k
    n = len(rows["prompt"])
    run.history.n_pairs = n
    run.history.frac_prompts_without_pair = 1.0 - n / len(prompts)
    if n == 0:
        raise RuntimeError(
            "the SFT policy produced no (correct, wrong) pair; "
            "raise dpo_prompts or sft_steps"
        )
    width = cfg.max_completion_length
    pids, pmask = encode_prompts(rows["prompt"], dev)
    cids, cmask = encode_completions(rows["chosen"], width, dev)
    rids, rmask = encode_completions(rows["rejected"], width, dev)
    ref_c = (policy_logps(run.ref, pids, pmask, cids, cmask) * cmask).sum(1)
    ref_r = (policy_logps(run.ref, pids, pmask, rids, rmask) * rmask).sum(1)
    # sampling, then the reference over the pairs
    run.forward_tokens += n_tokens + int(cmask.sum().item() + rmask.sum().item())
    run.pairs = {
        "prompt_ids": pids,
        "prompt_mask": pmask,
        "chosen_ids": cids,
        "chosen_mask": cmask,
        "rejected_ids": rids,
        "rejected_mask": rmask,
        "ref_chosen": ref_c,
        "ref_rejected": ref_r,
        "prompts": rows["prompt"],
        "chosen": rows["chosen"],
        "rejected": rows["rejected"],
    }


def pair_batch(run) -> torch.Tensor:
    """The next ``dpo_batch_size`` pair indices of ``run``: a fresh seeded permutation
    of the pairs each epoch, cursor in ``run.pair_cursor``."""
    n = run.pairs["prompt_ids"].shape[0]
    c = run.pair_cursor
    idx = []
    while len(idx) < min(run.cfg.dpo_batch_size, n):
        perm = np.random.default_rng(
            [derived_seed(run.seed, "pairs"), c["epoch"]]
        ).permutation(n)
        take = min(run.cfg.dpo_batch_size - len(idx), n - c["pos"])
        idx.extend(perm[c["pos"] : c["pos"] + take].tolist())
        c["pos"] += take
        if c["pos"] == n:
            c["epoch"], c["pos"] = c["epoch"] + 1, 0
    return torch.tensor(idx, device=run.device)


def pair_forward(run, idx):
    """One forward over the chosen and rejected completions of pairs ``idx`` (as TRL
    does): ``(logp_chosen (k,), logp_rejected (k,), tokens, nll_chosen)``, sequence
    log-probs and the token-mean NLL of the chosen completions (TRL's "sft" loss)."""
    p = run.pairs
    pids, pmask = p["prompt_ids"][idx], p["prompt_mask"][idx]
    both_p = torch.cat([pids, pids]), torch.cat([pmask, pmask])
    both_c = torch.cat([p["chosen_ids"][idx], p["rejected_ids"][idx]])
    both_m = torch.cat([p["chosen_mask"][idx], p["rejected_mask"][idx]])
    tok = policy_logps(run.policy, *both_p, both_c, both_m) * both_m
    seq = tok.sum(1)
    k = idx.shape[0]
    nll_chosen = -tok[:k].sum() / both_m[:k].sum()
    return seq[:k], seq[k:], int(both_m.sum().item()), nll_chosen


def dpo_loss(run, logp_chosen, logp_rejected, idx=None):
    """:func:`torch_ops.dpo_loss` of ``run``'s config against the precomputed
    reference log-probs of pairs ``idx`` (None: all pairs)."""
    ref_c, ref_r = run.pairs["ref_chosen"], run.pairs["ref_rejected"]
    if idx is not None:
        ref_c, ref_r = ref_c[idx], ref_r[idx]
    return torch_ops.dpo_loss(
        logp_chosen,
        logp_rejected,
        ref_c,
        ref_r,
        beta=run.cfg.dpo_beta,
        loss_type=run.cfg.dpo_loss_type,
        label_smoothing=run.cfg.dpo_label_smoothing,
    )


@torch.no_grad()
def pair_margin(run) -> float:
    """Mean implicit reward margin ``beta * [(pi_c - ref_c) - (pi_r - ref_r)]`` over
    all of ``run``'s training pairs."""
    idx = torch.arange(run.pairs["prompt_ids"].shape[0], device=run.device)
    pc, pr, _, _ = pair_forward(run, idx)
    out = dpo_loss(run, pc, pr)
    return float((out.chosen_rewards - out.rejected_rewards).mean())


class Offline(Algorithm):
    """One offline step on a batch of pairs: ``dpo`` minimises the DPO loss,
    ``dpo+nll`` adds ``dpo_sft_weight`` times the chosen completions' NLL, ``rft``
    minimises that NLL alone (the same forward pass on the same batch in all three, so
    the implicit-reward metrics are logged for each). The preference set is sampled
    before the first step."""

    @staticmethod
    def learning_rate(cfg) -> float:
        return cfg.dpo_lr

    @staticmethod
    def total_steps(cfg) -> int:
        return cfg.dpo_steps

    @staticmethod
    def eval_interval(cfg) -> int:
        return cfg.offline_eval_every or cfg.eval_every

    @staticmethod
    def budget(cfg) -> dict:
        """``dpo_steps`` optimiser steps and ``dpo_prompts * dpo_samples_per_prompt``
        completions, all from the SFT policy."""
        return {
            "optimizer_steps": cfg.dpo_steps,
            "completions_sampled": cfg.dpo_prompts * cfg.dpo_samples_per_prompt,
        }

    @staticmethod
    def step(run) -> dict:
        if run.pairs is None:
            build_preference_set(run)
        rec = Offline.update(run)
        run.optimizer_steps += 1
        # one forward and one backward over the batch's chosen and rejected tokens
        run.forward_tokens += rec["tokens"]
        run.backward_tokens += rec["tokens"]
        return rec

    @staticmethod
    def update(run) -> dict:
        """One optimiser step on the next batch of pairs (the loss of
        ``run.algorithm``)."""
        cfg = run.cfg
        idx = pair_batch(run)
        pc, pr, n_tok, nll_chosen = pair_forward(run, idx)
        out = dpo_loss(run, pc, pr, idx)
        if run.algorithm == "dpo":
            loss = out.loss
        elif run.algorithm == "dpo+nll":
            loss = out.loss + cfg.dpo_sft_weight * nll_chosen
        else:  # rft
            loss = nll_chosen
        run.opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(
            run.policy.parameters(), cfg.max_grad_norm
        )
        lr = run.opt.param_groups[0]["lr"]
        run.opt.step()
        run.sched.step()
        cr, rr = out.chosen_rewards.detach(), out.rejected_rewards.detach()
        return {
            "loss": float(loss.detach()),
            "grad_norm": float(gnorm),
            "lr": lr,
            "tokens": n_tok,
            "nll": float(nll_chosen.detach()),
            "rewards_chosen": float(cr.mean()),
            "rewards_rejected": float(rr.mean()),
            "rewards_margin": float((cr - rr).mean()),
            "rewards_accuracy": float((cr > rr).float().mean()),
        }

    @staticmethod
    def evaluate(run):
        if run.pairs is not None:
            run.history.eval_pair_margin.append(pair_margin(run))
