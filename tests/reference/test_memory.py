"""dpo_grpo.reference.memory: the 7B training-state ledger and the per-algorithm model
counts."""

import dpo_grpo as dg
import pytest


def test_seven_billion_ledger():
    led = dg.training_state_ledger(7_000_000_000)
    c = led.components
    assert c["weights (bf16)"] == 14 * dg.GB and c["gradients (bf16)"] == 14 * dg.GB
    assert c["master weights (fp32)"] + c["adamw states (fp32)"] == 84 * dg.GB
    assert led.total_bytes == 112 * dg.GB and led.gb == 112.0
    assert round(led.gib, 1) == 104.3


def test_variants():
    assert dg.training_state_ledger(
        10, weight_dtype="fp32", grad_dtype="fp32"
    ).total_bytes == 10 * (4 + 4 + 8)
    assert (
        dg.training_state_ledger(10, optimizer="sgd", master_weights=False).total_bytes
        == 40
    )
    # SGD with momentum keeps one fp32 state per parameter: bf16 weights 2 + grads 2 +
    # master 4 + momentum 4
    momentum = dg.training_state_ledger(10, optimizer="sgd_momentum")
    assert momentum.components == {
        "weights (bf16)": 20,
        "gradients (bf16)": 20,
        "master weights (fp32)": 40,
        "sgd_momentum states (fp32)": 40,
    }
    assert (
        dg.frozen_model_bytes(10, "fp32") == 40
        and dg.frozen_model_bytes(10, "fp8") == 10
    )
    assert dg.frozen_model_bytes(10) == 20


def test_algorithms():
    n = 7_000_000_000
    ppo = dg.algorithm_ledger("ppo", n, reward_params=n)
    grpo = dg.algorithm_ledger("grpo", n)
    dpo = dg.algorithm_ledger("dpo", n, precomputed_reference=True)
    assert sum(ppo.values()) == 2 * 112 * dg.GB + 2 * 14 * dg.GB
    assert sum(grpo.values()) == 112 * dg.GB + 14 * dg.GB
    assert sum(dpo.values()) == 112 * dg.GB
    # a critic of its own size; DPO never runs a reward model, even when one is named
    small_critic = dg.algorithm_ledger("ppo", n, critic_params=1_000_000_000)
    assert small_critic["critic (trainable)"] == 16 * dg.GB
    assert dg.algorithm_ledger("dpo", n, reward_params=n) == {
        "policy (trainable)": 112 * dg.GB,
        "reference (frozen)": 14 * dg.GB,
    }
    assert (
        dg.algorithm_ledger("grpo", n, reward_params=n)["reward model (frozen)"]
        == 14 * dg.GB
    )


def test_invalid():
    with pytest.raises(ValueError, match="n_params"):
        dg.training_state_ledger(0)
    with pytest.raises(ValueError, match="weight_dtype"):
        dg.training_state_ledger(10, weight_dtype="int4")
    with pytest.raises(TypeError, match="n_params"):
        dg.training_state_ledger(7e9)
    with pytest.raises(ValueError, match="algorithm"):
        dg.algorithm_ledger("rloo", 10)
