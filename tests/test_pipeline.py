"""dpo_grpo.chapters.pipeline: the seven steps of one GRPO update on the toy table policy, and the resumable state."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dpo_grpo as dg
import dpo_grpo.trl_exact.grpo  # noqa: F401  (dg.trl_exact.grpo.LOSS_TYPES)
from dpo_grpo.chapters import pipeline as pl

TARGETS = [1, 2, 3, 4, 1, 2]


def _fns():
    return [pl.target_token_reward(TARGETS), pl.length_penalty()]


def _rollout(seed=0, theta=None, **kw):
    rng = np.random.default_rng(seed)
    th = rng.normal(0, 0.5, (6, 5, 5)) if theta is None else theta
    return th, pl.sample_rollout(th, np.array([1, 4]), 4, rng, **kw)


# --- step 2: the rollout --------------------------------------------------------------------------------------------


def test_rollout_layout_and_old_logps():
    th, ro = _rollout()
    assert ro.token_ids.shape == ro.mask.shape == ro.old_logps.shape == (8, 5)
    assert ro.prompt_ids.tolist() == [1] * 4 + [4] * 4
    for row, m in zip(ro.token_ids, ro.mask):
        n = int(m.sum())
        assert n >= 1 and m[:n].all() and not m[n:].any()  # valid prefix, then padding
        assert (row[: n - 1] != pl.EOS).all()  # no EOS before the last valid token
        assert n == 5 or row[n - 1] == pl.EOS  # stopped by EOS unless it hit max_len
    expected = pl.token_logps(th, ro.prompt_ids, ro.token_ids)
    np.testing.assert_array_equal(ro.old_logps, expected)
    np.testing.assert_array_equal(ro.sampling_logps, ro.old_logps)  # no engine noise
    assert np.array_equal(ro.lengths, ro.mask.sum(1))


def test_rollout_is_a_frozen_snapshot():
    th, ro = _rollout()
    old = ro.old_logps.copy()
    th += 10.0  # later updates of the live weights
    np.testing.assert_array_equal(ro.old_logps, old)


def test_engine_noise_gives_different_sampling_logps():
    _, ro = _rollout(engine_logit_noise=0.3)
    m = ro.mask.astype(bool)
    assert np.abs(ro.sampling_logps - ro.old_logps)[m].max() > 1e-3


def test_max_len_and_temperature():
    th, ro = _rollout(max_len=2, temperature=2.0)
    assert ro.mask[:, 2:].sum() == 0
    np.testing.assert_allclose(
        ro.old_logps, pl.token_logps(th, ro.prompt_ids, ro.token_ids, 2.0)
    )
    with pytest.raises(ValueError, match="max_len"):
        pl.sample_rollout(th, np.array([0]), 2, np.random.default_rng(0), max_len=9)


# --- step 5 + 7: log-probs and the chain rule to the logits table ---------------------------------------------------


def test_logits_gradient_matches_finite_differences():
    th, ro = _rollout(temperature=1.5)
    g = np.random.default_rng(3).normal(size=ro.token_ids.shape) * ro.mask

    def f(x):
        return float((g * pl.token_logps(x, ro.prompt_ids, ro.token_ids, 1.5)).sum())

    assert (
        dg.max_abs_error(
            pl.logits_gradient(th, ro, g), dg.finite_difference(f, th, h=1e-6)
        )
        < 1e-8
    )


# --- step 4: group statistics ---------------------------------------------------------------------------------------


def test_assert_complete_groups():
    pl.assert_complete_groups([0, 0, 1, 1], 2)
    with pytest.raises(ValueError, match="block 0"):
        pl.assert_complete_groups([0, 1, 0, 1], 2)
    with pytest.raises(ValueError, match="more than one block"):
        pl.assert_complete_groups([0, 0, 0, 0], 2)
    with pytest.raises(ValueError, match="do not split"):
        pl.assert_complete_groups([0, 0, 0], 2)


def test_group_statistics_matches_reward_advantages():
    _, ro = _rollout()
    rpf = pl.score(ro, _fns())
    stats = pl.group_statistics(rpf, ro.prompt_ids, 4)
    ref = dg.reward_advantages(rpf, 4)
    np.testing.assert_allclose(stats.advantages, ref.advantages)
    total = rpf.sum(1).reshape(-1, 4)
    np.testing.assert_allclose(stats.mean, total.mean(1))
    np.testing.assert_allclose(stats.std, total.std(1, ddof=1))
    with pytest.raises(ValueError, match="group boundary"):
        pl.group_statistics(
            rpf[::-1][np.r_[0:2, 6:8, 2:6]], ro.prompt_ids[np.r_[0:2, 4:6, 2:4, 6:8]], 4
        )


def test_score_none_becomes_nan():
    _, ro = _rollout()
    rpf = pl.score(ro, [lambda p, c: None if p == 1 else 1.0])
    assert np.isnan(rpf[:4]).all() and (rpf[4:] == 1).all()
    with pytest.raises(TypeError):
        pl.score(ro, [])


# --- step 6: aggregation and the engine correction ------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 10_000),
    st.sampled_from(dg.trl_exact.grpo.LOSS_TYPES),
    st.sampled_from([0.0, 0.04]),
)
def test_aggregate_matches_grpo_loss(seed, loss_type, beta):
    rng = np.random.default_rng(seed)
    b, t = 4, 6
    lengths = rng.integers(1, t + 1, b)
    mask = (np.arange(t)[None] < lengths[:, None]).astype(float)
    old = np.log(rng.uniform(0.1, 0.9, (b, t)))
    new = old + rng.normal(0, 0.3, (b, t))
    ref = old + rng.normal(0, 0.2, (b, t))
    out = dg.grpo_loss(
        new,
        old,
        ref,
        rng.normal(size=b),
        mask,
        beta=beta,
        loss_type=loss_type,
        max_completion_length=t + 2,
    )
    got = pl.aggregate(out.per_token_loss, mask, loss_type, max_completion_length=t + 2)
    assert abs(got - out.loss) < 1e-12


def test_engine_importance_weights_arithmetic():
    old = np.log(np.array([[0.5, 0.4, 0.3], [0.2, 0.2, 0.9]]))
    samp = np.log(np.array([[0.25, 0.4, 0.6], [0.2, 0.1, 0.1]]))
    mask = np.array([[1, 1, 1], [1, 1, 0]])
    tok = pl.engine_importance_weights(
        old, samp, mask, mode="token_truncate", clip_max=None
    )
    np.testing.assert_allclose(tok[0], [2.0, 1.0, 0.5])
    np.testing.assert_allclose(tok[1, :2], [1.0, 2.0])
    assert tok[1, 2] == 1.0  # padding contributes log-ratio 0
    seq = pl.engine_importance_weights(
        old, samp, mask, mode="sequence_truncate", clip_max=None
    )
    np.testing.assert_allclose(seq[:, 0], [1.0, 2.0])
    np.testing.assert_allclose(
        pl.engine_importance_weights(
            old, samp, mask, mode="token_truncate", clip_max=1.5
        )[0],
        [1.5, 1.0, 0.5],
    )
    np.testing.assert_allclose(
        pl.engine_importance_weights(
            old, samp, mask, mode="token_mask", clip_min=0.6, clip_max=1.5
        )[0],
        [0.0, 1.0, 0.0],
    )
    np.testing.assert_allclose(
        pl.engine_importance_weights(
            old, samp, mask, mode="sequence_mask", clip_max=1.5
        )[:, 0],
        [1.0, 0.0],
    )
    with pytest.raises(ValueError, match="mode"):
        pl.engine_importance_weights(old, samp, mask, mode="tokens")
    with pytest.raises(ValueError, match="clip_min"):
        pl.engine_importance_weights(old, samp, mask, clip_min=2.0, clip_max=1.0)


@pytest.mark.parametrize("level", ["token", "sequence"])
@pytest.mark.parametrize("loss_type", dg.trl_exact.grpo.LOSS_TYPES)
@pytest.mark.parametrize("wshape", ["token", "sequence"])
def test_loss_and_grad_with_engine_weights(level, loss_type, wshape):
    th, ro = _rollout(engine_logit_noise=0.4)
    rng = np.random.default_rng(1)
    new = ro.old_logps + rng.normal(0, 0.2, ro.old_logps.shape)
    ref = ro.old_logps + rng.normal(0, 0.2, ro.old_logps.shape)
    adv = rng.normal(size=8)
    opts = dict(
        beta=0.04,
        loss_type=loss_type,
        importance_sampling_level=level,
        use_bias_correction_kl=True,
    )
    mode = "token_truncate" if wshape == "token" else "sequence_truncate"
    w = pl.engine_importance_weights(
        ro.old_logps, ro.sampling_logps, ro.mask, mode=mode
    )
    if loss_type == "vespo":  # TRL folds engine ratios into VESPO's weight: refused
        with pytest.raises(ValueError, match="vespo"):
            pl.loss_and_grad(new, ro, adv, ref, engine_weights=w, **opts)
        return
    out = pl.loss_and_grad(new, ro, adv, ref, engine_weights=w, **opts)
    plain = pl.loss_and_grad(new, ro, adv, ref, **opts)
    ones = pl.loss_and_grad(new, ro, adv, ref, engine_weights=np.ones((8, 1)), **opts)
    assert abs(ones.loss - plain.loss) < 1e-12 and np.allclose(
        ones.grad, plain.grad, atol=1e-14
    )
    assert abs(out.loss - plain.loss) > 1e-6

    def f(
        x,
    ):  # cispo's weight min(rho, eps_max) is detached: move old with new so that it stays fixed
        shifted = (
            ro._replace(old_logps=ro.old_logps + (x - new))
            if loss_type == "cispo"
            else ro
        )
        return pl.loss_and_grad(x, shifted, adv, ref, engine_weights=w, **opts).loss

    if loss_type == "cispo":
        opts["use_bias_correction_kl"] = (
            False  # (the bias-corrected KL differentiates the ratio, which f freezes)
        )
        out = pl.loss_and_grad(new, ro, adv, ref, engine_weights=w, **opts)
    assert dg.max_abs_error(out.grad, dg.finite_difference(f, new, h=1e-6)) < 1e-8
    assert np.all(out.grad[ro.mask == 0] == 0)


def test_loss_and_grad_validation():
    _, ro = _rollout()
    with pytest.raises(TypeError, match="rollout"):
        pl.loss_and_grad(ro.old_logps, "rollout", np.zeros(8))
    with pytest.raises(ValueError, match="engine_weights"):
        pl.loss_and_grad(
            ro.old_logps,
            ro,
            np.zeros(8),
            None,
            beta=0.0,
            engine_weights=np.ones((8, 2)),
        )
    with pytest.raises(ValueError, match="beta == 0"):
        pl.loss_and_grad(ro.old_logps, ro, np.zeros(8), None, beta=0.04)


def test_gradient_step_lowers_the_loss():
    th, ro = _rollout()
    adv = pl.group_statistics(pl.score(ro, _fns()), ro.prompt_ids, 4).advantages
    ref = pl.token_logps(th, ro.prompt_ids, ro.token_ids)

    def loss(x):
        return pl.loss_and_grad(
            pl.token_logps(x, ro.prompt_ids, ro.token_ids), ro, adv, ref
        ).loss

    out = pl.loss_and_grad(
        pl.token_logps(th, ro.prompt_ids, ro.token_ids), ro, adv, ref
    )
    g = pl.logits_gradient(th, ro, out.grad)
    assert loss(th - 0.05 * g) < loss(th)


# --- step 1: prompt selection ---------------------------------------------------------------------------------------


def test_pass_rate_tracker_and_selection():
    tr = pl.PassRateTracker(4)
    np.testing.assert_allclose(tr.pass_rates(), 0.5)
    tr.update(
        np.array([0, 0, 1, 1, 2, 2]),
        np.array([1.0, 1.0, 0.0, 0.0, 1.0, np.nan]),
        step=3,
    )
    np.testing.assert_allclose(tr.pass_rates(), [3 / 4, 1 / 4, 2 / 3, 1 / 2])
    assert tr.last_step.tolist() == [3, 3, 3, -1]
    at = pl.PassRateTracker(1, threshold=0.5)
    at.update(np.array([0, 0]), np.array([0.5, 0.49]), step=0)
    # reward >= threshold passes
    assert at.passes.tolist() == [1] and at.attempts.tolist() == [2]
    p = pl.selection_probabilities(tr, "frontier", floor=0.0)
    # the unseen prompt has pass rate 0.5
    assert abs(p.sum() - 1) < 1e-12 and p.argmax() == 3
    w = np.array([3 / 16, 3 / 16, 2 / 9, 1 / 4]) + 0.05  # p (1 - p) + floor
    np.testing.assert_allclose(
        pl.selection_probabilities(tr, "frontier"), w / w.sum(), rtol=1e-13
    )
    np.testing.assert_allclose(pl.selection_probabilities(tr), 0.25)
    pick = pl.select_prompts(tr, 3, np.random.default_rng(0), "frontier")
    assert len(set(pick.tolist())) == 3 and list(pick) == sorted(pick)
    with pytest.raises(ValueError, match="strategy"):
        pl.selection_probabilities(tr, "hard")
    with pytest.raises(ValueError, match="n"):
        pl.select_prompts(tr, 5, np.random.default_rng(0))
    with pytest.raises(TypeError, match="rng"):
        pl.select_prompts(tr, 2, 0)


# --- step 7: monitoring ---------------------------------------------------------------------------------------------


def test_monitor_keys():
    st_ = pl.new_state()
    logs = pl.grpo_step(st_, _fns(), num_iterations=2)
    assert len(logs) == 2 and [l["epoch"] for l in logs] == [0, 1]
    for key in (
        "reward",
        "reward_std",
        "frac_reward_zero_std",
        "rewards/correct/mean",
        "rewards/brevity/std",
        "kl",
        "clip_ratio/region_mean",
        "completions/mean_length",
        "completions/max_length",
        "completions/clipped_ratio",
        "policy_version",
        "loss",
        "learning_rate",
    ):
        assert key in logs[0], key
    assert "kl" not in pl.grpo_step(st_, _fns(), beta=0.0)[0]


def test_monitor_values_by_hand():
    # three completions of one prompt: one stops at EOS after 2 tokens, two hit max_len = 3 without EOS
    tok = np.array([[3, pl.EOS, pl.EOS], [1, 2, 4], [2, 2, 2]])
    mask = np.array([[1.0, 1, 0], [1, 1, 1], [1, 1, 1]])
    ids = np.zeros(3, dtype=np.int64)
    old = pl.token_logps(np.zeros((1, 3, 5)), ids, tok)
    ro = pl.Rollout(
        ids,
        tok,
        mask,
        old,
        old,
        3,
        7,
        {"temperature": 1.0, "max_len": 3, "group_size": 3, "engine_logit_noise": 0.0},
    )
    rpf = pl.score(ro, [pl.target_token_reward([4]), pl.length_penalty(0.1)])
    # brevity counts the tokens before EOS (the EOS itself is free): 1, 3, 3
    np.testing.assert_allclose(rpf, [[0.0, -0.1], [1.0, -0.3], [0.0, -0.3]], rtol=1e-15)
    stats = pl.group_statistics(rpf, ids, 3)
    log = pl.monitor(
        ro,
        stats,
        rpf,
        pl.loss_and_grad(old, ro, stats.advantages, old),
        reward_names=["c", "b"],
    )
    assert (
        log["completions/clipped_ratio"] == pytest.approx(2 / 3)
        and log["completions/max_length"] == 3
    )
    assert log["completions/mean_length"] == pytest.approx(8 / 3)
    assert log["rewards/c/mean"] == pytest.approx(1 / 3) and log[
        "rewards/c/std"
    ] == pytest.approx(np.sqrt(1 / 3))
    assert log["rewards/b/mean"] == pytest.approx(-0.7 / 3)
    # ddof 1: squares sum to 0.08 / 3, over 2
    assert log["rewards/b/std"] == pytest.approx(np.sqrt(0.04 / 3))
    assert log["policy_version"] == 7 and log["kl"] == 0.0  # new = ref


def test_linear_warmup_and_adam_by_hand():
    assert [pl.linear_warmup_lr(s, 0.3, 3) for s in range(5)] == pytest.approx(
        [0.1, 0.2, 0.3, 0.3, 0.3]
    )
    # bias-corrected Adam under a constant gradient moves each weight by lr * g / (|g| + eps) every step
    opt = pl.Adam()
    g = np.array([0.5, -4.0])
    x = opt.step(np.array([1.0, -2.0]), g, 0.1)
    np.testing.assert_allclose(
        x, [1.0 - 0.1 * 0.5 / (0.5 + 1e-8), -2.0 + 0.1 * 4.0 / (4.0 + 1e-8)], rtol=1e-13
    )
    x = opt.step(x, g, 0.1)
    np.testing.assert_allclose(
        x, [1.0 - 0.2 * 0.5 / (0.5 + 1e-8), -2.0 + 0.2 * 4.0 / (4.0 + 1e-8)], rtol=1e-12
    )
    assert opt.t == 2


def _hist(rewards, lengths, kls, zero):
    return [
        {"reward": r, "completions/mean_length": l, "kl": k, "frac_reward_zero_std": z}
        for r, l, k, z in zip(rewards, lengths, kls, zero)
    ]


def test_warning_signs():
    calm = _hist([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [10] * 6, [0.01] * 6, [0.1] * 6)
    assert pl.warning_signs(calm) == []
    hack = _hist(
        [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [10, 12, 15, 20, 25, 30], [0.01] * 6, [0.1] * 6
    )
    assert any("length" in f for f in pl.warning_signs(hack))
    spike = _hist([0.1] * 6, [10] * 6, [0.01, 0.01, 0.012, 0.01, 0.011, 0.2], [0.1] * 6)
    assert any("KL spike" in f for f in pl.warning_signs(spike))
    zero = _hist([0.1] * 6, [10] * 6, [0.01] * 6, [0.1, 0.1, 0.1, 0.5, 0.6, 0.7])
    assert any("zero-std" in f for f in pl.warning_signs(zero))
    with pytest.raises(ValueError):
        pl.warning_signs(calm[:1])


# --- the resumable state --------------------------------------------------------------------------------------------


def test_grpo_step_is_deterministic_and_changes_the_policy():
    a, b = pl.new_state(seed=5), pl.new_state(seed=5)
    for _ in range(4):
        la, lb = pl.grpo_step(a, _fns()), pl.grpo_step(b, _fns())
    np.testing.assert_array_equal(a.theta, b.theta)
    assert la == lb and np.abs(a.theta).max() > 0
    assert a.step == 8 and a.policy_version == 4 and a.data_cursor == 8


def test_reference_cache_is_used():
    st_ = pl.new_state()
    cache = {}
    pl.grpo_step(st_, _fns(), ref_cache=cache)
    assert list(cache) == [("ref-v0", 0)]


def test_checkpoint_resume_is_exact_and_weights_only_is_not():
    fns = _fns()
    straight, resumed = pl.new_state(seed=3), pl.new_state(seed=3)
    for _ in range(6):
        pl.grpo_step(straight, fns)
    for _ in range(3):
        pl.grpo_step(resumed, fns)
    ckpt = pl.checkpoint(resumed)
    assert pl.missing_checkpoint_keys(ckpt) == []
    again = pl.restore(ckpt)
    for _ in range(3):
        pl.grpo_step(again, fns)
    np.testing.assert_array_equal(again.theta, straight.theta)

    weights_only = {"policy": ckpt["policy"]}
    assert pl.missing_checkpoint_keys(weights_only) == [
        k for k in pl.CHECKPOINT_KEYS if k != "policy"
    ]
    with pytest.raises(ValueError, match="optimizer"):
        pl.restore(weights_only)
    naive = pl.restore(weights_only, strict=False)
    # the anchor moved to the loaded actor
    np.testing.assert_array_equal(naive.theta_ref, ckpt["policy"])
    for _ in range(3):
        pl.grpo_step(naive, fns)
    assert np.abs(naive.theta - straight.theta).max() > 1e-3
    for key in [
        k for k in pl.CHECKPOINT_KEYS if k != "policy"
    ]:  # every single part matters
        partial = {k: v for k, v in ckpt.items() if k != key}
        st_ = pl.restore(partial, strict=False)
        for _ in range(3):
            pl.grpo_step(st_, fns)
        if (
            key != "reward_version"
        ):  # a label only: the toy reward functions are passed in explicitly
            assert np.abs(st_.theta - straight.theta).max() > 1e-6, key


def test_validation_errors():
    with pytest.raises(ValueError, match="theta"):
        pl.token_logps(np.zeros((2, 3)), [0], np.zeros((1, 3), int))
    with pytest.raises(ValueError, match="prompt_ids"):
        pl.token_logps(np.zeros((2, 3, 4)), [5], np.zeros((1, 3), int))
    with pytest.raises(TypeError, match="token_ids"):
        pl.token_logps(np.zeros((2, 3, 4)), [0], np.zeros((1, 3)))
    with pytest.raises(ValueError, match="group_size"):
        pl.sample_rollout(
            np.zeros((2, 3, 4)), np.array([0]), 1, np.random.default_rng(0)
        )
    with pytest.raises(TypeError, match="state"):
        pl.grpo_step({}, _fns())
    with pytest.raises(TypeError, match="ckpt"):
        pl.missing_checkpoint_keys([])


def test_masks_from_roles():
    P, M, T, D = pl.PROMPT, pl.MODEL, pl.TOOL, pl.PAD
    roles = np.array([[P, P, M, M, T, T, M, D], [P, M, M, M, M, D, D, D]])
    m = pl.masks_from_roles(roles)
    assert m["loss"].sum(1).tolist() == [3, 4]
    assert m["completion"].sum(1).tolist() == [5, 4] and m["attention"].sum(
        1
    ).tolist() == [7, 5]
    np.testing.assert_array_equal(m["loss"], m["completion"] * m["tool"])
    with pytest.raises(ValueError, match="roles"):
        pl.masks_from_roles(np.array([[5]]))
