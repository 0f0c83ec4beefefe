"""dpo_grpo.chapters.workload: one training step's workload, validated on every
construction and copy."""

import pytest

from dpo_grpo.chapters import costs
from dpo_grpo.chapters.workload import Workload


def test_derived_fields_and_copies():
    w = Workload(n_params=10, prompt_len=3, answer_len=5)
    assert w.seq_len == 8 and not w.lora
    lora = w.with_(trainable_fraction=0.01)
    assert lora.lora and lora.seq_len == 8 and w.trainable_fraction == 1.0
    assert costs.Workload is Workload  # the chapter's notebooks use costs.Workload


def test_validation():
    with pytest.raises(TypeError, match="n_params"):
        Workload(n_params=7e9)
    with pytest.raises(ValueError, match="group_size"):
        Workload(n_params=10, group_size=1)
    with pytest.raises(ValueError, match="trainable_fraction"):
        Workload(n_params=10, trainable_fraction=1.5)
    with pytest.raises(TypeError, match="shard_states"):
        Workload(n_params=10, shard_states=1)
    with pytest.raises(ValueError, match="answer_len"):
        Workload(n_params=10).with_(answer_len=0)
