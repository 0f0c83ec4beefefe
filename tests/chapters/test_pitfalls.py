"""dpo_grpo.chapters.pitfalls: each buggy version runs and gives a wrong number, the fix
gives the right one, the detector catches the bug and stays quiet on correct data."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dpo_grpo as dg
from dpo_grpo.chapters import pitfalls as pf
from dpo_grpo.trl_exact.grpo import grpo_loss

R = np.array([0.0, 1, 1, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1, 1])
IDS = np.repeat(np.arange(4), 4)


# --- 1. group boundaries --------------------------------------------------------------


def test_view_after_shuffle_is_wrong_and_detected():
    perm = np.random.default_rng(0).permutation(16)
    right = pf.advantages_by_prompt_id(R, IDS, 4)
    # fine while grouped
    np.testing.assert_allclose(pf.advantages_by_view_buggy(R, 4), right)
    buggy = pf.advantages_by_view_buggy(R[perm], 4)  # runs...
    assert np.abs(buggy - right[perm]).max() > 0.5  # ...and is wrong
    np.testing.assert_allclose(
        pf.advantages_by_prompt_id(R[perm], IDS[perm], 4), right[perm]
    )
    pf.assert_group_blocks(IDS, 4)
    with pytest.raises(ValueError, match="group boundary"):
        pf.assert_group_blocks(IDS[perm], 4)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10_000))
def test_fixed_version_is_permutation_equivariant(seed):
    rng = np.random.default_rng(seed)
    r = rng.normal(size=16)
    perm = rng.permutation(16)
    np.testing.assert_allclose(
        pf.advantages_by_prompt_id(r[perm], IDS[perm], 4),
        pf.advantages_by_prompt_id(r, IDS, 4)[perm],
        atol=1e-12,
    )


def test_incomplete_group_is_rejected():
    with pytest.raises(ValueError):
        pf.advantages_by_prompt_id(R[:-1], IDS[:-1], 4)


# --- 2. population vs sample std ------------------------------------------------------


@pytest.mark.parametrize("g", [2, 4, 8, 64])
def test_std_mix_shrinks_by_sqrt_g_minus_1_over_g(g):
    r = np.random.default_rng(g).normal(size=(3, g))
    ratio = pf.advantages_torch_std_buggy(r, eps=1e-12) / pf.advantages_declared_std(
        r, 0, eps=1e-12
    )
    np.testing.assert_allclose(ratio, np.sqrt((g - 1) / g), rtol=1e-9)


def test_infer_and_assert_std_convention():
    r = np.array([[0.2, 0.8, 1.4, 0.6], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    a0, a1 = pf.advantages_declared_std(r, 0), pf.advantages_declared_std(r, 1)
    # the zero-std row matches neither
    assert pf.infer_std_ddof(a0).tolist() == [
        0,
        0,
        -1,
    ]
    assert pf.infer_std_ddof(a1).tolist() == [1, 1, -1]
    pf.assert_std_convention(a0, 0)
    with pytest.raises(ValueError, match="ddof=1"):
        pf.assert_std_convention(a1, 0)
    assert pf.infer_std_ddof(np.array([[-2.0, 2.0]])).tolist() == [-1]


# --- 3. per-GPU normalisation ---------------------------------------------------------


def test_per_shard_normalisation_depends_on_sharding():
    r = np.array([0.2, 0.8, 1.4, 0.6, 8.0, 9.0, 11.0, 12.0])
    ids = np.repeat([0, 1], 4)
    a, b = pf.shard_rows(8, 2, "round_robin"), pf.shard_rows(8, 4, "contiguous")
    assert a.tolist() == [0, 1, 0, 1, 0, 1, 0, 1] and b.tolist() == [
        0,
        0,
        1,
        1,
        2,
        2,
        3,
        3,
    ]
    assert pf.sharding_discrepancy(pf.per_shard_advantages_buggy, r, ids, [a, b]) > 0.1
    assert (
        pf.sharding_discrepancy(pf.gathered_advantages, r, ids, [a, b], group_size=4)
        == 0.0
    )
    right = dg.group_advantages(r.reshape(2, 4)).reshape(-1)
    np.testing.assert_allclose(pf.gathered_advantages(r, ids, a, 4), right)
    # a sharding that keeps whole groups happens to be right, which is why the bug
    # survives small tests
    whole = pf.shard_rows(8, 2, "contiguous")
    np.testing.assert_allclose(pf.per_shard_advantages_buggy(r, ids, whole), right)
    pf.assert_shards_hold_complete_groups(ids, whole, 4)
    with pytest.raises(ValueError, match="gather"):
        pf.assert_shards_hold_complete_groups(ids, a, 4)


# --- 4. text vs tokens ----------------------------------------------------------------


def test_retokenised_text_changes_the_actions():
    tok = pf.ToyTokenizer()
    sampled = np.array(
        [tok.id_of[t] for t in ["a", "b", " ", " ", "c", "=", "a", "<eos>"]]
    )
    text = pf.serve_text(sampled, tok)
    assert text == "ab c=a"
    again = pf.retokenized_ids_buggy(text, tok)
    assert again.size < sampled.size and tok.id_of["ab"] in again.tolist()
    with pytest.raises(ValueError, match="round-trip"):
        pf.assert_token_roundtrip(sampled, text, tok)
    raw = tok.decode(sampled)
    assert raw == "ab  c=a<eos>"
    with pytest.raises(
        ValueError
    ):  # even without the service's post-processing, "a"+"b" re-encodes as "ab"
        pf.assert_token_roundtrip(sampled, raw, tok)
    fine = np.array([tok.id_of[t] for t in ["ab", " ", "c", "<eos>"]])
    pf.assert_token_roundtrip(fine, tok.decode(fine), tok)
    np.testing.assert_array_equal(pf.stored_ids(sampled), sampled)


def test_on_policy_ratio_detector():
    tok = pf.ToyTokenizer()
    rng = np.random.default_rng(0)
    table = dg.log_softmax(rng.normal(size=(10, len(tok.vocab))))
    sampled = np.array([tok.id_of[t] for t in ["a", "b", " ", " ", "c", "<eos>"]])
    old = pf.position_logps(table, sampled)[None]
    mask = np.ones_like(old)
    pf.assert_on_policy_ratio_is_one(
        pf.position_logps(table, pf.stored_ids(sampled))[None], old, mask
    )
    again = pf.retokenized_ids_buggy(pf.serve_text(sampled, tok), tok)
    new = np.zeros_like(old)
    new[0, : again.size] = pf.position_logps(table, again)
    with pytest.raises(ValueError, match="on-policy"):
        pf.assert_on_policy_ratio_is_one(new, old, mask)


def test_tokenizer_validation():
    tok = pf.ToyTokenizer()
    with pytest.raises(ValueError, match="cannot encode"):
        tok.encode("z")
    with pytest.raises(TypeError):
        tok.encode(3)
    with pytest.raises(ValueError):
        pf.ToyTokenizer(["a", "a"])


# --- 5. length normalisation ----------------------------------------------------------


def test_sequence_weights_by_loss_type():
    mask = (np.arange(8)[None] < np.array([2, 8, 4])[:, None]).astype(float)
    np.testing.assert_allclose(pf.sequence_weights(mask, "grpo"), [1 / 3] * 3)
    np.testing.assert_allclose(
        pf.sequence_weights(mask, "bnpo"), np.array([2, 8, 4]) / 14
    )
    np.testing.assert_allclose(
        pf.sequence_weights(mask, "dapo"), np.array([2, 8, 4]) / 14
    )
    np.testing.assert_allclose(
        pf.sequence_weights(mask, "dr_grpo"), np.array([2, 8, 4]) / 24
    )
    np.testing.assert_allclose(
        pf.sequence_weights(mask, "dr_grpo", max_completion_length=16),
        np.array([2, 8, 4]) / 48,
    )


def test_length_normalisation_changes_the_preference():
    ids, lengths, rewards = pf.simulate_length_correlated_rewards(seed=1)
    width = int(lengths.max())
    mask = (np.arange(width)[None] < lengths[:, None]).astype(float)
    adv = pf.advantages_by_prompt_id(rewards, ids, 8)
    # on-policy surrogate per token: -A
    lt = np.broadcast_to(-adv[:, None], mask.shape) * mask
    assert pf.per_token_mean_loss_buggy(lt, mask) != pytest.approx(
        pf.per_sequence_mean_loss(lt, mask)
    )
    edges, push_seq = pf.push_by_length(adv, lengths, pf.sequence_weights(mask, "grpo"))
    _, push_tok = pf.push_by_length(adv, lengths, pf.sequence_weights(mask, "bnpo"))
    assert push_seq[0] < 0 < push_seq[-1] and push_tok[-1] > 0
    share = lambda p: p[-1] / np.abs(p).sum()  # noqa: E731
    # per-token weighting concentrates the push on long answers
    assert share(push_tok) > share(push_seq) + 0.1
    # per-sequence weighting mostly pushes short answers down
    assert abs(push_seq[0]) > abs(push_tok[0])
    rep = pf.reward_length_report(rewards, lengths, 4)
    assert (
        rep.correlation > 0.3
        and np.all(np.diff(rep.pass_rate) > 0)
        and rep.count.sum() == rewards.size
    )
    flat = pf.reward_length_report(
        np.tile([0.0, 1.0], 50), np.repeat(np.arange(1, 51), 2), 4
    )
    assert abs(flat.correlation) < 1e-12


# --- 6. reward drift ------------------------------------------------------------------


def test_affine_drift_cancels_ranking_change_does_not():
    rng = np.random.default_rng(0)
    quality = rng.uniform(size=(5, 8))
    length = rng.uniform(size=(5, 8))
    a_old = dg.group_advantages(quality)
    a_affine = dg.group_advantages(2.0 * quality + 0.5)
    a_rank = dg.group_advantages(quality + 0.8 * length)
    assert np.abs(a_affine - a_old).max() < 1e-3  # only the eps guard differs
    assert np.abs(a_rank - a_old).max() > 0.3
    calib_q, calib_l = rng.uniform(size=40), rng.uniform(size=40)
    assert pf.rank_agreement(calib_q, 2.0 * calib_q + 0.5) == 1.0
    assert pf.assert_reward_model_consistent(calib_q, 3 * calib_q - 1) == 1.0
    agree = pf.rank_agreement(calib_q, calib_q + 0.8 * calib_l)
    assert agree < 0.95
    with pytest.raises(ValueError, match="rank agreement"):
        pf.assert_reward_model_consistent(calib_q, calib_q + 0.8 * calib_l)
    assert pf.rank_agreement(calib_q, -calib_q) == 0.0


def test_progress_under_a_drifting_judge():
    samples = [np.full(10, 0.5)] * 4  # the policy's answers do not change
    judges = [lambda s, k=k: (1 + 0.2 * k) * s + 0.1 * k for k in range(4)]
    live = pf.progress_under_live_reward_buggy(samples, judges)
    frozen = pf.progress_under_frozen_reward(samples, judges[0])
    assert np.all(np.diff(live) > 0) and np.all(np.diff(frozen) == 0)
    with pytest.raises(ValueError):
        pf.progress_under_live_reward_buggy(samples, judges[:2])


# --- 0. mask before exp ---------------------------------------------------------------


def test_mask_after_exp_leaks_padding_garbage():
    rng = np.random.default_rng(0)
    old = np.log(rng.uniform(0.2, 0.8, (3, 4)))
    new = old + rng.normal(0, 0.05, (3, 4))
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]], dtype=float)
    adv = np.array([0.5, -1.0, 1.5])
    clean = grpo_loss(new, old, None, adv, mask, beta=0.0, loss_type="bnpo").loss
    assert pf.masked_after_exp_loss_buggy(new, old, adv, mask) == pytest.approx(
        clean, abs=1e-12
    )
    dirty = new.copy()
    dirty[1, 2], dirty[2, 3] = np.nan, np.inf
    assert np.isnan(pf.masked_after_exp_loss_buggy(dirty, old, adv, mask))
    assert grpo_loss(
        dirty, old, None, adv, mask, beta=0.0, loss_type="bnpo"
    ).loss == pytest.approx(clean)


def test_detector_messages_in_chinese(monkeypatch):
    """The messages chapter 5b prints when a detector fires are Chinese under
    DPO_GRPO_LANG=zh."""
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    with pytest.raises(ValueError, match="规范要求 ddof=0"):
        pf.assert_std_convention(
            pf.advantages_torch_std_buggy(dg.reference.examples.REWARD_GROUPS), ddof=0
        )
    with pytest.raises(ValueError, match="先收集整组"):
        pf.assert_shards_hold_complete_groups([0, 0, 1, 1], [0, 1, 0, 1], 2)
    with pytest.raises(ValueError, match="排序一致率"):
        pf.assert_reward_model_consistent([0.0, 1.0, 2.0], [2.0, 1.0, 0.0])
    with pytest.raises(ValueError, match="同策略时对数比率不为 0"):
        pf.assert_on_policy_ratio_is_one([[0.0, 0.0]], [[0.5, 0.0]], [[1, 1]])
