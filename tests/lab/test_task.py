"""Tests of dpo_grpo.lab.task: the verifier as reward functions."""

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from dpo_grpo import lab  # noqa: E402
from dpo_grpo.lab.model import VOCAB, encode_completions  # noqa: E402


def test_score_requires_eos_and_counts_length(cpu_cfg):
    prompts = ["3+5+2=", "3+5+2=", "3+5+2="]
    ids, _ = encode_completions(["10", "10", "9"], width=4)
    ids[1, 2] = VOCAB.stoi["7"]  # "107": no EOS within the limit -> truncated
    finished = torch.tensor([True, False, True])
    r = lab.score(prompts, ids, finished, cpu_cfg)
    assert r.shape == (3, 1) and r[:, 0].tolist() == [1.0, 0.0, 0.0]
    r2 = lab.score(
        prompts, ids, finished, dataclasses.replace(cpu_cfg, reward="length_bonus")
    )
    assert r2[:, 1].tolist() == [2.0, 3.0, 1.0]
