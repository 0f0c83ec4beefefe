"""dpo_grpo.chapters.labels: the memory ledger's and the clip regions' English keys,
shown in the reader's language (the keys themselves in English)."""

import dpo_grpo as dg
import numpy as np
import pytest
from dpo_grpo.chapters.labels import LEDGER_MODELS, REGIONS, ledger_label, region_label


def _ledger_keys():
    ppo = dg.algorithm_ledger("ppo", 10, reward_params=10)
    states = dg.training_state_ledger(10, optimizer="sgd_momentum").components
    return [*ppo, *states, *dg.training_state_ledger(10).components]


def test_every_key_reads_as_itself_in_english(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    for key in _ledger_keys():
        assert ledger_label(key) == key
    regions = dg.clip_region([2.0, 1.0, 0.5], [1.0, 1.0, 1.0])
    assert [region_label(r) for r in regions] == list(regions)
    assert set(REGIONS) == {"inside", "platform", "wrong_direction"}
    assert dg.ledger_label is ledger_label and dg.region_label is region_label


def test_every_key_is_chinese_under_zh(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    labels = [ledger_label(k) for k in [*LEDGER_MODELS, *_ledger_keys()]]
    labels += [region_label(r) for r in REGIONS]
    assert all(any("\u4e00" <= c <= "\u9fff" for c in s) for s in labels), labels
    # the dtype and the optimizer are kept, in the Chinese text
    assert "bf16" in ledger_label("weights (bf16)")
    assert "sgd_momentum" in ledger_label("sgd_momentum states (fp32)")
    assert region_label(np.str_("platform")) == region_label("platform")


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: ledger_label("activations (bf16)"), ValueError, "memory-ledger key"),
        (lambda: ledger_label("policy"), ValueError, "memory-ledger key"),
        (lambda: ledger_label(3), TypeError, "name must be a str"),
        (lambda: region_label("outside"), ValueError, "region must be one of"),
    ],
)
def test_a_key_it_does_not_know_is_named(call, error, message):
    with pytest.raises(error, match=message):
        call()
