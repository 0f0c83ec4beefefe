"""The addition task (:class:`AdditionTask`, built from a config by :func:`make_task`)
and what a lab run draws from it: the training prompts in seeded order
(:class:`PromptStream`), the policy's completion log-probs (:func:`policy_logps`) and
the verifier as reward functions (:func:`score`, :func:`reward_weights`)."""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass

import numpy as np
import torch

from .. import _validation as v
from .. import torch_ops
from .config import GRPOTaskConfig, LabConfig, checked_config
from .model import (
    VOCAB,
    completion_logps,
    encode_prompts,
    generate,
    verify,
)


@dataclass(frozen=True)
class AdditionTask:
    """All problems ``x1+...+xn=`` (``n = n_terms``, ``0 <= xi < 10**n_digits``), split
    once, seeded, into training and held-out problems.

    The split is by multiset of terms: ``n_heldout`` multisets are drawn, and every
    order of each (``2+7+3=``, ``3+2+7=``, ...) is a held-out prompt, so the held-out
    score cannot be earned by memorising a reordered training problem. The training set
    holds every order of every other multiset.
    """

    n_terms: int = 3
    n_digits: int = 1
    n_heldout: int = 60
    seed: int = 0

    def __post_init__(self):
        for name in ("n_terms", "n_digits", "n_heldout"):
            v.integer(getattr(self, name), name)
        v.integer(self.seed, "seed", minimum=0)
        if not 2 <= self.n_terms <= 4:
            raise ValueError(f"n_terms must be in 2..4, got {self.n_terms}")
        if not 1 <= self.n_digits <= 3 or self.n_terms * self.n_digits > 6:
            raise ValueError(
                "n_digits must be in 1..3 with n_terms * n_digits <= 6, got "
                f"{self.n_digits}"
            )
        n = 10**self.n_digits
        multisets = list(
            itertools.combinations_with_replacement(range(n), self.n_terms)
        )
        if not 1 <= self.n_heldout <= len(multisets) // 2:
            raise ValueError(
                f"n_heldout must be in 1..{len(multisets) // 2}, got {self.n_heldout}"
            )
        rng = np.random.default_rng(self.seed)
        chosen = rng.permutation(len(multisets))[: self.n_heldout]
        held = {multisets[i] for i in chosen}
        heldout, train = [], []
        for t in itertools.product(range(n), repeat=self.n_terms):
            (heldout if tuple(sorted(t)) in held else train).append(t)
        heldout, train = tuple(heldout), tuple(train)
        object.__setattr__(self, "train_problems", train)
        object.__setattr__(self, "heldout_problems", heldout)

    @staticmethod
    def prompt(terms) -> str:
        return "+".join(str(t) for t in _terms(terms)) + "="

    @staticmethod
    def answer(terms) -> str:
        return str(sum(_terms(terms)))

    @staticmethod
    def no_carry_answer(terms) -> str:
        """The answer of a demonstrator who adds each column but never carries:
        ``7+8+5 -> 0``, ``27+45 -> 62``."""
        out, place, terms = 0, 1, _terms(terms)
        while any(terms):
            out += (sum(t % 10 for t in terms) % 10) * place
            terms, place = [t // 10 for t in terms], place * 10
        return str(out)

    def train_prompts(self) -> list[str]:
        return [self.prompt(t) for t in self.train_problems]

    def heldout_prompts(self) -> list[str]:
        return [self.prompt(t) for t in self.heldout_problems]


def _terms(terms) -> list:
    """The terms of a problem: at least two non-negative integers."""
    terms = [v.integer(t, "terms", minimum=0) for t in v.sequence(terms, "terms")]
    if len(terms) < 2:
        raise ValueError(f"terms must hold at least two numbers, got {terms}")
    return terms


class PromptStream:
    """Training prompts in a fresh seeded permutation each epoch; the cursor
    ``(epoch, pos)`` is the whole state."""

    def __init__(self, prompts, seed: int):
        self.prompts = v.sequence(prompts, "prompts")
        if not self.prompts:
            raise ValueError("prompts must not be empty")
        self.seed = v.integer(seed, "seed", minimum=0)
        self.epoch = 0
        self.pos = 0
        self._perm = None

    def _order(self):
        return np.random.default_rng([self.seed, self.epoch]).permutation(
            len(self.prompts)
        )

    def next(self, n: int) -> list:
        n = v.integer(n, "n", minimum=0)
        out = []
        while len(out) < n:
            if self._perm is None:
                self._perm = self._order()
            take = min(n - len(out), len(self.prompts) - self.pos)
            out.extend(self.prompts[i] for i in self._perm[self.pos : self.pos + take])
            self.pos += take
            if self.pos == len(self.prompts):
                self.epoch, self.pos, self._perm = self.epoch + 1, 0, None
        return out

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, state: dict):
        self.epoch, self.pos, self._perm = int(state["epoch"]), int(state["pos"]), None


def make_task(cfg: GRPOTaskConfig, seed: int | None = None) -> AdditionTask:
    """The addition task of ``cfg`` (a :class:`LabConfig` or any
    :class:`GRPOTaskConfig`) for run ``seed``: its split is drawn with ``task_seed +
    seed`` when ``cfg.split_per_seed`` is true (a :class:`LabConfig`'s default), else
    (or with ``seed=None``) with ``task_seed``."""
    checked_config(cfg, GRPOTaskConfig)
    split = cfg.task_seed
    if seed is not None and getattr(cfg, "split_per_seed", False):
        split += v.integer(seed, "seed", minimum=0)
    task = AdditionTask(
        n_terms=cfg.n_terms,
        n_digits=cfg.n_digits,
        n_heldout=cfg.n_heldout,
        seed=split,
    )
    if getattr(cfg, "eval_split", "heldout") == "validation":
        task = validation_task(task, split)
    return task


def validation_task(task: AdditionTask, seed: int) -> AdditionTask:
    """``task`` with its evaluation problems replaced by a validation set carved from
    its training problems: ``n_heldout`` multisets of terms (every order of each),
    drawn with ``seed``; the training problems are the rest. The held-out problems
    are in neither."""
    multisets = sorted({tuple(sorted(t)) for t in task.train_problems})
    if 2 * task.n_heldout > len(multisets):
        raise ValueError(
            f"n_heldout ({task.n_heldout}) must be at most half of the "
            f"{len(multisets)} training multisets to carve a validation set"
        )
    rng = np.random.default_rng([seed, 1])
    chosen = {multisets[i] for i in rng.permutation(len(multisets))[: task.n_heldout]}
    out = copy.copy(task)
    valid = tuple(t for t in task.train_problems if tuple(sorted(t)) in chosen)
    train = tuple(t for t in task.train_problems if tuple(sorted(t)) not in chosen)
    object.__setattr__(out, "train_problems", train)
    object.__setattr__(out, "heldout_problems", valid)
    return out


def block_log_softmax(logits, token_ids):
    """``torch_ops.selective_log_softmax`` as one block. The lab's vocabulary has 15
    tokens, so a contiguous copy of the ``(B, L, V)`` completion logits is tiny, and it
    lets every position go through one chunk instead of a Python loop over rows (the
    sliced logits cannot be viewed as one block)."""
    return torch_ops.selective_log_softmax(
        logits.contiguous(), token_ids, chunk_size=max(1, token_ids.numel())
    )


def policy_logps(model, pids, pmask, cids, cmask, temperature=1.0):
    """Per-token completion log-probs ``(B, L)`` of the tiny transformer ``model``
    (policy or reference), via :func:`block_log_softmax`."""
    return completion_logps(
        model,
        pids,
        pmask,
        cids,
        cmask,
        temperature=temperature,
        log_softmax_fn=block_log_softmax,
    )


def score(prompts, completion_ids, finished, cfg: LabConfig) -> torch.Tensor:
    """The verifier as reward functions: ``(N, K)`` float tensor. Column 0 is
    correctness (1 if the completion ended with EOS and is exactly the sum); with
    ``reward="length_bonus"`` column 1 is the number of characters emitted (weighted by
    ``length_bonus``), a reward a policy can earn without being right."""
    checked_config(cfg)
    prompts = v.sequence(prompts, "prompts")
    if not isinstance(completion_ids, torch.Tensor) or completion_ids.dim() != 2:
        raise TypeError(
            "completion_ids must be a 2-D tensor of token ids, got "
            f"{type(completion_ids).__name__}"
        )
    if not isinstance(finished, torch.Tensor) or finished.shape != (
        completion_ids.shape[0],
    ):
        raise ValueError(
            f"finished must be a tensor of shape ({completion_ids.shape[0]},), got "
            f"{type(finished).__name__} {tuple(getattr(finished, 'shape', ()))}"
        )
    if len(prompts) != completion_ids.shape[0]:
        raise ValueError(
            "prompts must have one entry per completion "
            f"({completion_ids.shape[0]}), got {len(prompts)}"
        )
    texts = [VOCAB.decode(row) for row in completion_ids.tolist()]
    done = finished.tolist()
    correct = [
        1.0 if (ok and verify(p, t)) else 0.0 for p, t, ok in zip(prompts, texts, done)
    ]
    cols = [correct]
    if cfg.reward == "length_bonus":
        cols.append([float(len(t)) for t in texts])
    return torch.tensor(cols, dtype=torch.float32).T.contiguous()


def reward_weights(cfg: LabConfig):
    """The weights of :func:`score`'s columns (None: the single correctness column)."""
    checked_config(cfg)
    return None if cfg.reward == "correct" else [1.0, cfg.length_bonus]


def sample_groups(policy, prompts, k: int, cfg: LabConfig, generator, device):
    """Sample ``k`` completions of each prompt from ``policy`` at ``cfg.temperature``
    (each prompt ``k`` times in a row: one group). Returns ``(rows, prompt_ids,
    prompt_mask, rollout)``: the repeated prompts, their encoding and the
    :class:`dpo_grpo.lab.model.Rollout`."""
    rows = [p for p in prompts for _ in range(k)]
    pids, pmask = encode_prompts(rows, device)
    ro = generate(
        policy,
        pids,
        pmask,
        cfg.max_completion_length,
        temperature=cfg.temperature,
        generator=generator,
    )
    return rows, pids, pmask, ro
