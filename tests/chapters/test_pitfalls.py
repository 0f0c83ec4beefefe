"""dpo_grpo.chapters.pitfalls: each buggy version runs and gives a wrong number, the fix
gives the right one, the detector catches the bug and stays quiet on correct data."""

import dpo_grpo as dg
import numpy as np
import pytest
from dpo_grpo.chapters import pitfalls as pf
from dpo_grpo.reference import examples
from dpo_grpo.trl_exact.grpo import grpo_loss
from hypothesis import given, settings
from hypothesis import strategies as st

R = np.array([0.0, 1, 1, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1, 1])
IDS = np.repeat(np.arange(4), 4)


# --- 1. group boundaries --------------------------------------------------------------


def test_group_blocks_detector():
    perm = np.random.default_rng(0).permutation(16)
    pf.assert_group_blocks(IDS, 4)
    with pytest.raises(ValueError, match="group boundary"):
        pf.assert_group_blocks(IDS[perm], 4)
    with pytest.raises(ValueError):  # an incomplete group
        pf.assert_group_blocks(IDS[:-1], 4)


# --- 2. population vs sample std ------------------------------------------------------


@pytest.mark.parametrize("g", [2, 4, 8, 64])
def test_std_mix_shrinks_by_sqrt_g_minus_1_over_g(g):
    r = np.random.default_rng(g).normal(size=(3, g))
    # torch.std's default (G - 1) where the formula says population std (G)
    ratio = dg.group_advantages(r, eps=1e-12, ddof=1) / dg.group_advantages(
        r, eps=1e-12, ddof=0
    )
    np.testing.assert_allclose(ratio, np.sqrt((g - 1) / g), rtol=1e-9)


def test_infer_and_assert_std_convention():
    r = np.array([[0.2, 0.8, 1.4, 0.6], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    a0, a1 = dg.group_advantages(r, ddof=0), dg.group_advantages(r, ddof=1)
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


def _per_shard_advantages_buggy(rewards, prompt_ids, shard_of_row, eps=1e-4):
    """Chapter 5b's buggy line: each shard standardises its own part of a group."""
    out = np.empty_like(rewards)
    for shard in np.unique(shard_of_row):
        for p in np.unique(prompt_ids[shard_of_row == shard]):
            rows = (shard_of_row == shard) & (prompt_ids == p)
            out[rows] = (rewards[rows] - rewards[rows].mean()) / (
                rewards[rows].std() + eps
            )
    return out


def _gathered_advantages(rewards, prompt_ids, shard_of_row, group_size):
    return dg.group_advantages(rewards.reshape(-1, group_size)).reshape(-1)


def test_sharding_detectors():
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
    assert pf.sharding_discrepancy(_per_shard_advantages_buggy, r, ids, [a, b]) > 0.1
    assert (
        pf.sharding_discrepancy(_gathered_advantages, r, ids, [a, b], group_size=4)
        == 0.0
    )
    right = dg.group_advantages(r.reshape(2, 4)).reshape(-1)
    # a sharding that keeps whole groups happens to be right, which is why the bug
    # survives small tests
    whole = pf.shard_rows(8, 2, "contiguous")
    np.testing.assert_allclose(_per_shard_advantages_buggy(r, ids, whole), right)
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
    again = tok.encode(text)  # the trainer re-encodes the text
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


def test_on_policy_ratio_detector():
    tok = pf.ToyTokenizer()
    rng = np.random.default_rng(0)
    table = dg.log_softmax(rng.normal(size=(10, len(tok.vocab))))
    sampled = np.array([tok.id_of[t] for t in ["a", "b", " ", " ", "c", "<eos>"]])
    old = pf.position_logps(table, sampled)[None]
    mask = np.ones_like(old)
    pf.assert_on_policy_ratio_is_one(pf.position_logps(table, sampled)[None], old, mask)
    again = tok.encode(pf.serve_text(sampled, tok))
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
    assert (ids == np.repeat(np.arange(ids.size // 8), 8)).all()
    adv = dg.group_advantages(rewards.reshape(-1, 8)).reshape(-1)
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
            dg.group_advantages(examples.REWARD_GROUPS, ddof=1), ddof=0
        )
    with pytest.raises(ValueError, match="先收集整组"):
        pf.assert_shards_hold_complete_groups([0, 0, 1, 1], [0, 1, 0, 1], 2)
    with pytest.raises(ValueError, match="排序一致度"):
        pf.assert_reward_model_consistent([0.0, 1.0, 2.0], [2.0, 1.0, 0.0])
    with pytest.raises(ValueError, match="同策略时对数概率比不为 0"):
        pf.assert_on_policy_ratio_is_one([[0.0, 0.0]], [[0.5, 0.0]], [[1, 1]])
