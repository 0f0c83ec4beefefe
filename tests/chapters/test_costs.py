"""dpo_grpo.chapters.costs: the per-step budget of PPO, GRPO and DPO and the time
model."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dpo_grpo as dg
from dpo_grpo.chapters import costs as c

N7 = 7_000_000_000


def test_memory_matches_the_ledger_in_full_fine_tuning():
    w = c.Workload(n_params=N7, reward_params=N7)
    for alg in c.ALGORITHMS:
        ledger = dg.algorithm_ledger(alg, N7, reward_params=N7)
        assert c.step_cost(alg, w).memory == pytest.approx(ledger)
    saving = c.memory_saving(w)
    assert saving["gb"] == pytest.approx(112.0) and saving["gib"] == pytest.approx(
        112e9 / 2**30
    )


def test_removing_the_critic_is_exactly_the_difference_at_the_same_rollout():
    w = c.Workload(n_params=N7, group_size=8, ppo_samples=8)
    ppo, grpo = c.step_cost("ppo", w), c.step_cost("grpo", w)
    assert (
        ppo.generated_tokens == grpo.generated_tokens
        and ppo.reward_calls == grpo.reward_calls
    )
    crit = c.critic_cost(w)
    assert ppo.total_flops - grpo.total_flops == pytest.approx(crit["flops"])
    assert ppo.trainable_bytes - grpo.trainable_bytes == pytest.approx(
        crit["state_bytes"]
    )
    tp, tg = c.step_time(ppo), c.step_time(grpo)
    assert tp["training"] - tg["training"] == pytest.approx(crit["seconds"])
    assert tp["generation"] == pytest.approx(tg["generation"])


def test_counts_follow_the_definitions():
    w = c.Workload(
        n_params=1000,
        prompts=3,
        group_size=4,
        ppo_samples=2,
        prompt_len=5,
        answer_len=7,
        reward_params=500,
        inner_epochs=2,
        n_gpus=1,
        separate_generation=False,
    )
    grpo = c.step_cost("grpo", w)
    assert (
        grpo.sequences == 12
        and grpo.generated_tokens == 12 * 7
        and grpo.reward_calls == 12
    )
    assert (
        grpo.tokens["reference forward"] == 12 * 12
        and grpo.tokens["old-logprob forward"] == 12 * 12
    )
    assert grpo.flops["policy update"] == 6 * 1000 * 12 * 12 * 2
    assert grpo.flops["generation"] == 2 * 1000 * (12 * 7 + 3 * 5)
    assert grpo.flops["reward model"] == 2 * 500 * 12 * 12
    assert grpo.communication == {
        "gradient all-reduce (per GPU)": 0.0,
        "group statistics": 12 * 4,
    }
    # reward model, reference, old log-probs
    assert grpo.frozen_forward_tokens == 3 * 12 * 12
    ppo = c.step_cost("ppo", w)
    assert ppo.sequences == 6 and ppo.flops["critic"] == (2 + 6 * 2) * 1000 * 6 * 12
    assert ppo.frozen_forward_tokens == 4 * 6 * 12  # ... and the critic's value pass
    dpo = c.step_cost("dpo", w)
    assert dpo.sequences == 6 and dpo.generated_tokens == 0 and dpo.reward_calls == 0
    # one epoch
    assert (
        "generation" not in dpo.flops
        and dpo.tokens["policy forward+backward"] == 6 * 12
    )
    assert (
        c.step_cost("dpo", w.with_(precomputed_reference=True)).frozen_forward_tokens
        == 0
    )
    assert c.step_time(dpo)["generation"] == 0.0 and c.step_time(dpo)["scoring"] == 0.0


def test_no_grad_tokens_are_the_forward_only_compute():
    """Every forward pass without a backward is in the token row, and it is what the
    compute row charges at 2N."""
    # every model of the policy's size
    w = c.Workload(n_params=N7, inner_epochs=2, reward_params=N7)
    for alg in c.ALGORITHMS:
        cost = c.step_cost(alg, w)
        forward_only = (
            cost.flops["reference forward"]
            + cost.flops["old-logprob forward"]
            + cost.flops.get("reward model", 0.0)
        )
        if alg == "ppo":
            forward_only += 2 * N7 * cost.tokens["critic value forward"]
        assert forward_only == pytest.approx(2 * N7 * cost.frozen_forward_tokens)
    base = c.compare(c.Workload(n_params=N7))
    # reference + critic values
    assert base["ppo"].frozen_forward_tokens == 2 * 64 * 1280
    # reference only (one update per rollout)
    assert base["grpo"].frozen_forward_tokens == 64 * 8 * 1280


def test_attention_flops_and_the_kv_cache():
    w = c.Workload(
        n_params=1000,
        prompts=2,
        group_size=2,
        ppo_samples=3,
        prompt_len=4,
        answer_len=6,
        n_gpus=2,
    )
    ppo = c.step_cost("ppo", w)
    extra = c.attention_flops(ppo, (3, 8))
    fwd = 2 * 3 * 8 * 10  # 2 n_layers d_model T per token
    assert (
        extra["policy update"] == 3 * fwd * 6 * 10
        and extra["reference forward"] == fwd * 6 * 10
    )
    assert extra["old-logprob forward"] == 0 and extra["critic"] == 4 * fwd * 6 * 10
    assert "critic" not in c.attention_flops(c.step_cost("grpo", w), (3, 8))
    t = c.Throughput()
    with_att, without = c.step_time(ppo, t, attention=(3, 8)), c.step_time(ppo, t)
    assert with_att["training"] - without["training"] == pytest.approx(
        sum(extra.values()) / (2e15 * 0.4)
    )
    assert with_att["generation"] == without["generation"]
    assert c.critic_cost(w, attention=(3, 8))["flops"] == pytest.approx(
        ppo.flops["critic"] + extra["critic"]
    )
    # 7B, G answers per prompt: the attention term is n_layers d_model T / N of the
    # critic's 8N per token
    same = c.Workload(n_params=N7, ppo_samples=8, answer_len=4096)
    crit, crit_att = (
        c.critic_cost(same)["flops"],
        c.critic_cost(same, attention=c.ATTENTION_SHAPE)["flops"],
    )
    assert crit_att / crit - 1 == pytest.approx(32 * 4096 * 4352 / N7)
    # ... and it moves the crossover: at 4096-token answers the rollout beats the critic
    # only without it
    g = c.step_time(c.step_cost("grpo", same))
    rollout = g["generation"] + g["scoring"]
    assert (
        c.critic_cost(same)["seconds"]
        < rollout
        < c.critic_cost(same, attention=c.ATTENTION_SHAPE)["seconds"]
    )
    # the KV cache that generation assumes fits: 64 sequences per GPU of 16,640 tokens
    # at 128 KiB
    long = same.with_(answer_len=16384)
    assert c.kv_cache_bytes(long, 512) == 64 * 16640 * 131072
    assert c.kv_cache_bytes(long, 0) == 0
    with pytest.raises(TypeError, match="attention"):
        c.step_time(ppo, attention=32)
    with pytest.raises(ValueError, match="d_model"):
        c.attention_flops(ppo, (32, 0))
    with pytest.raises(TypeError, match="workload"):
        c.kv_cache_bytes("w", 1)


def test_critic_vs_rollout_sweep_and_crossover():
    lens = (256, 1024, 2048, 4096, 8192, 16384)
    # ppo_samples is set to G inside
    rows = c.critic_vs_rollout(c.Workload(n_params=N7), lens)
    assert [r["answer_len"] for r in rows] == list(lens)
    same = c.Workload(n_params=N7, ppo_samples=8, answer_len=4096)
    r = rows[3]
    assert r["critic"] == pytest.approx(c.critic_cost(same)["seconds"])
    assert r["critic_att"] == pytest.approx(
        c.critic_cost(same, attention=c.ATTENTION_SHAPE)["seconds"]
    )
    assert r["share"] == pytest.approx(
        r["critic"] / sum(c.step_time(c.step_cost("ppo", same)).values())
    )
    assert r["kv_gb"] == pytest.approx(c.kv_cache_bytes(same, 512) / 1e9)
    # the critic's share falls with the answer length, with or without attention, and
    # falls less with it
    for key in ("share", "share_att"):
        assert np.all(np.diff([x[key] for x in rows]) < 0)
    assert all(x["share_att"] >= x["share"] for x in rows)
    assert c.rollout_crossover(rows) == (2048, 4096)
    assert c.rollout_crossover(rows, "critic_att") == (4096, 8192)
    assert c.rollout_crossover(rows[:2]) is None
    assert c.rollout_crossover(rows[3:]) == (None, 4096)
    with pytest.raises(ValueError, match="critic_key"):
        c.rollout_crossover(rows, "share")
    with pytest.raises(TypeError, match="workload"):
        c.critic_vs_rollout("w", lens)


def test_lora_and_sharding_change_the_absolute_saving():
    full = c.memory_saving(c.Workload(n_params=N7))["bytes"]
    lora = c.memory_saving(c.Workload(n_params=N7, trainable_fraction=0.01))["bytes"]
    zero = c.memory_saving(c.Workload(n_params=N7, shard_states=True, n_gpus=8))[
        "bytes"
    ]
    assert zero == pytest.approx(full / 8)
    # a frozen critic base + the adapter's state
    assert lora == pytest.approx(14e9 + 16 * 7e7)
    assert lora < full
    # with LoRA the reference is the base with the adapter off: no second copy
    assert (
        "reference (frozen)"
        not in c.step_cost(
            "grpo", c.Workload(n_params=N7, trainable_fraction=0.01)
        ).memory
    )
    # LoRA backward: activation gradients 2N + weight gradients 2fN
    w = c.Workload(
        n_params=1000,
        trainable_fraction=0.5,
        prompts=1,
        group_size=2,
        prompt_len=1,
        answer_len=1,
    )
    assert c.step_cost("grpo", w).flops["policy update"] == pytest.approx(
        (2 + 2 + 1) * 1000 * 2 * 2
    )


def test_communication_channels():
    w = c.Workload(
        n_params=N7, critic_remote=True, reward_remote=True, reward_params=N7
    )
    ppo, grpo, dpo = (c.step_cost(a, w) for a in c.ALGORITHMS)
    assert (
        "remote critic" in ppo.communication
        and "remote critic" not in grpo.communication
    )
    # token ids, mask, values, returns
    per_answer_critic = ppo.communication["remote critic"] / ppo.sequences
    # one scalar reward
    per_answer_stats = grpo.communication["group statistics"] / grpo.sequences
    assert per_answer_critic == w.seq_len * 13 and per_answer_stats == 4
    assert grpo.communication["remote reward scorer"] == grpo.sequences * (
        w.seq_len * 4 + 4
    )
    assert set(dpo.communication) == {"gradient all-reduce (per GPU)"}
    assert ppo.communication["gradient all-reduce (per GPU)"] == pytest.approx(
        2 * grpo.communication["gradient all-reduce (per GPU)"]
    )


def test_communication_bytes_by_hand():
    """Default 7B workload, GRPO: 64 prompts x G=8 = 512 answers of 256 + 1024 tokens,
    bf16 grads, 8 GPUs."""
    w = c.Workload(n_params=N7)
    comm = c.step_cost("grpo", w).communication
    assert comm == {
        "gradient all-reduce (per GPU)": 2
        * 7
        / 8
        * 2
        * N7,  # ring all-reduce: 2 (k-1)/k x the gradient bytes
        "weight sync to generation engine": 2 * N7,  # bf16 weights
        "rollouts to trainer": 512 * 1280 * 4
        + 512 * 1024 * 4,  # int32 token ids + one fp32 log-prob per answer token
        "group statistics": 512 * 4,
    }
    # LoRA: only the adapter's gradients are reduced and only the adapter is synced
    lora = c.step_cost("grpo", w.with_(trainable_fraction=0.01)).communication
    assert lora["gradient all-reduce (per GPU)"] == pytest.approx(
        2 * 7 / 8 * 2 * 7e7, rel=1e-15
    )
    assert lora["weight sync to generation engine"] == 2 * 70_000_000
    # the all-reduce is overlapped with the backward unless overlap_gradients=False
    cost = c.step_cost("grpo", w)
    assert c.step_time(cost)["waiting"] == pytest.approx(
        (2 * N7 + 4_718_592 + 2048) / 25e9, rel=1e-15
    )
    assert c.step_time(cost, c.Throughput(overlap_gradients=False))[
        "waiting"
    ] == pytest.approx((24.5e9 + 2 * N7 + 4_718_592 + 2048) / 25e9, rel=1e-15)


def test_generation_seconds_by_hand():
    """Roofline per decode step max(b 2N / (peak eff), (2N + b c kv) / hbm) plus the
    prefill at train_mfu."""
    t = c.Throughput(
        peak_flops=1e3, hbm_bandwidth=1e3, decode_efficiency=0.5, train_mfu=0.5
    )
    w = c.Workload(
        n_params=1000,
        prompts=2,
        group_size=2,
        prompt_len=3,
        answer_len=2,
        n_gpus=1,
        kv_bytes_per_token=10,
    )
    # b = 4: compute 4 * 2000 / 500 = 16 s per step beats memory
    # (2000 + 4 * {3, 4} * 10) / 1000; prefill 2 * 1000 * 2 prompts * 3 tokens
    # / (1e3 * 0.5) = 24 s
    assert c.generation_seconds(w, 4, t) == pytest.approx(16 + 16 + 24, rel=1e-15)
    # a large KV cache: memory (2000 + 4 * 3 * 1000) / 1000 = 14 < 16, then
    # (2000 + 4 * 4 * 1000) / 1000 = 18
    assert c.generation_seconds(
        w.with_(kv_bytes_per_token=1000), 4, t
    ) == pytest.approx(16 + 18 + 24, rel=1e-15)
    # two GPUs: b = 2 per GPU, so both the decode compute and the prefill halve
    assert c.generation_seconds(w.with_(n_gpus=2), 4, t) == pytest.approx(
        8 + 8 + 12, rel=1e-15
    )
    assert c.step_time(c.step_cost("grpo", w), t)["generation"] == pytest.approx(
        56.0, rel=1e-15
    )
    assert c.generation_seconds(w, 0, t) == 0.0


def test_long_answers_make_rollout_dearer_than_the_critic():
    base = c.Workload(n_params=N7, group_size=8, ppo_samples=8)
    ratio = []
    for length in (256, 1024, 4096, 16384):
        w = base.with_(answer_len=length)
        t = c.step_time(c.step_cost("grpo", w))
        ratio.append((t["generation"] + t["scoring"]) / c.critic_cost(w)["seconds"])
    assert np.all(np.diff(ratio) > 0) and ratio[0] < 1 < ratio[-1]
    # a heavy reward model adds scoring time; a rule checker costs one call per answer
    heavy = c.step_time(c.step_cost("grpo", base.with_(reward_params=70_000_000_000)))[
        "scoring"
    ]
    rule = c.step_time(c.step_cost("grpo", base))["scoring"]
    assert heavy > 100 * rule


@given(st.integers(1, 8), st.integers(2, 64), st.integers(1, 64), st.integers(1, 4096))
def test_monotone_in_group_size_and_lengths(prompts, g, prompt_len, answer_len):
    w = c.Workload(
        n_params=10**9,
        prompts=prompts,
        group_size=g,
        prompt_len=prompt_len,
        answer_len=answer_len,
    )
    a, b = c.step_cost("grpo", w), c.step_cost("grpo", w.with_(group_size=g + 1))
    assert b.generated_tokens > a.generated_tokens and b.total_flops > a.total_flops
    assert sum(c.step_time(b).values()) >= sum(c.step_time(a).values())
    assert a.memory == b.memory  # G changes compute and tokens, not the logical state
    assert c.step_cost("ppo", w).memory_bytes > a.memory_bytes


def test_budget_rows_and_format():
    rows = c.budget_rows(c.Workload(n_params=N7))
    items = [r[0] for r in rows]
    for needed in (
        "trainable state per GPU",
        "frozen / no-grad forward tokens",
        "generated tokens",
        "reward evaluations",
        "communication",
        "time: generation",
        "time: scoring",
        "time: training",
        "time: waiting",
    ):
        assert needed in items
    text = c.format_rows(rows)
    assert (
        "PPO" in text
        and "GRPO" in text
        and "DPO" in text
        and text.count("<tr>") == len(rows) + 1
    )


def test_validation():
    with pytest.raises(ValueError, match="algorithm"):
        c.step_cost("rloo", c.Workload(n_params=10))
    with pytest.raises(TypeError, match="workload"):
        c.step_cost("ppo", {"n_params": 10})
    with pytest.raises(ValueError, match="train_mfu"):
        c.Throughput(train_mfu=2.0)
    with pytest.raises(TypeError, match="cost"):
        c.step_time("ppo")


def test_budget_rows_without_memory_leave_out_the_two_memory_rows():
    w = c.Workload(n_params=7_000_000_000)
    full, lean = c.budget_rows(w), c.budget_rows(w, memory=False)
    assert [r[0] for r in full[:2]] == [
        "trainable state per GPU",
        "frozen weights per GPU",
    ]
    assert lean == full[2:]
    with pytest.raises(TypeError, match="memory"):
        c.budget_rows(w, memory="no")
