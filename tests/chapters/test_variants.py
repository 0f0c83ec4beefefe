"""Chapter 10's variants: RLOO as TRL's RLOOTrainer computes it, every GRPO variant and
DPO loss type on the toy batch, and configs whose keys are TRL 1.16.0's own."""

import dataclasses
import json

import numpy as np
import pytest

from dpo_grpo.chapters import variants as V
from dpo_grpo.data import TRL_FIXTURES
from dpo_grpo.trl_exact.advantages import reward_advantages
from dpo_grpo.trl_exact.grpo import grpo_loss


def test_rloo_matches_its_definition_by_hand():
    b = V.toy_batch(0.1)
    m = b["mask"]
    out = V.rloo_loss(b["new"], b["old"], b["ref"], b["rewards"], m, 4, beta=0.05)
    # k1 summed per answer
    r = b["rewards"].reshape(-1) - 0.05 * ((b["old"] - b["ref"]) * m).sum(axis=1)
    g = r.reshape(2, 4)
    adv = (g - (g.sum(axis=1, keepdims=True) - g) / 3).reshape(-1)
    np.testing.assert_allclose(out.rewards, r)
    np.testing.assert_allclose(out.advantages, adv)
    # product of token ratios, not the geometric mean
    rho = np.exp(((b["new"] - b["old"]) * m).sum(axis=1))
    np.testing.assert_allclose(out.ratio, rho)
    assert out.loss == pytest.approx(
        np.mean(-np.minimum(rho * adv, np.clip(rho, 0.8, 1.2) * adv))
    )


def test_rloo_gradient_by_finite_differences():
    b = V.toy_batch(0.1)
    args = (b["old"], b["ref"], b["rewards"], b["mask"], 4)
    out = V.rloo_loss(b["new"], *args)
    h, new = 1e-6, b["new"].copy()
    for i, t in ((0, 0), (2, 3), (5, 1)):
        up, down = new.copy(), new.copy()
        up[i, t] += h
        down[i, t] -= h
        fd = (V.rloo_loss(up, *args).loss - V.rloo_loss(down, *args).loss) / (2 * h)
        assert out.grad[i, t] == pytest.approx(fd, rel=1e-5, abs=1e-9)
    assert (out.grad[b["mask"] == 0] == 0).all()


def test_every_grpo_variant_runs_and_the_grpo_row_is_grpo_loss():
    for drift in (0.0, 0.1, 1.0):
        b = V.toy_batch(drift)
        rows = {r["name"]: r for r in V.run_grpo_variants(b)}
        assert set(rows) == {v.name for v in V.GRPO_VARIANTS}
        assert all(
            np.isfinite(r["loss"]) and np.isfinite(r["grad"]).all()
            for r in rows.values()
        )
        adv = reward_advantages(b["rewards"].reshape(-1, 1), 4).advantages
        want = grpo_loss(
            b["new"],
            b["old"],
            b["ref"],
            adv,
            b["mask"],
            beta=0.04,
            loss_type="grpo",
            max_completion_length=6,
        )
        assert rows["GRPO"]["loss"] == pytest.approx(want.loss)
    on = {r["name"]: r for r in V.run_grpo_variants(V.toy_batch(0.0))}
    # on-policy the clip never acts: GSPO's narrow band and DAPO's clip-higher change
    # nothing
    assert (
        on["GSPO"]["metric"][1] == 0.0
        and on["DAPO"]["metric"][1] == 0.0
        and on["GSPO"]["grad_norm"] > 0
    )
    stale = {r["name"]: r for r in V.run_grpo_variants(V.toy_batch(1.0))}
    assert stale["GSPO"]["grad_norm"] == 0.0 and stale["CISPO"]["grad_norm"] > 0


def test_every_dpo_variant_runs():
    rows = V.run_dpo_variants()
    assert [r["name"] for r in rows] == [v.name for v in V.DPO_VARIANTS]
    by = {r["name"]: r for r in rows}
    np.testing.assert_allclose(by["DPO"]["grad_chosen"], -by["DPO"]["grad_rejected"])
    assert by["DPO + SFT (RPO-style)"]["loss"] > by["DPO"]["loss"]
    assert all(np.isfinite(r["loss"]) for r in rows)


def test_configs_use_trl_field_names():
    trl = pytest.importorskip("trl")
    fields = {
        "GRPOConfig": {f.name for f in dataclasses.fields(trl.GRPOConfig)},
        "RLOOConfig": {f.name for f in dataclasses.fields(trl.RLOOConfig)},
        "DPOConfig": {f.name for f in dataclasses.fields(trl.DPOConfig)},
    }
    for var in V.GRPO_VARIANTS + V.DPO_VARIANTS:
        assert set(var.config) <= fields[var.trainer], (
            var.name,
            set(var.config) - fields[var.trainer],
        )
    assert V.config_code(V.GRPO_VARIANTS[2]).startswith(
        'GRPOConfig(loss_type="dapo", epsilon=0.2, epsilon_high=0.28'
    )


RLOO_FIXTURE = json.loads((TRL_FIXTURES / "trl_rloo.json").read_text())


def test_rloo_fixture_was_made_by_trl_rlootrainer():
    assert RLOO_FIXTURE["trl_version"] == "1.16.0"
    assert "RLOOTrainer._compute_loss" in RLOO_FIXTURE["produced_by"]
    cases = RLOO_FIXTURE["cases"]
    assert {c["options"]["beta"] for c in cases} >= {0.0, 0.05}
    assert any(c["options"]["normalize_advantages"] for c in cases)
    # the cases reach both clip platforms and the unclipped region
    assert any(c["metrics"]["clip_ratio/region_mean"] > 0 for c in cases)
    assert any(c["metrics"]["clip_ratio/region_mean"] < 1 for c in cases)


@pytest.mark.parametrize("case", RLOO_FIXTURE["cases"], ids=lambda c: c["name"])
def test_rloo_loss_matches_trl_rlootrainer(case):
    o, x = case["options"], case["inputs"]
    out = V.rloo_loss(
        x["new_logps"],
        x["old_logps"],
        x["ref_logps"],
        x["rewards"],
        x["mask"],
        o["num_generations"],
        beta=o["beta"],
        epsilon=o["epsilon"],
        epsilon_high=o["epsilon_high"],
        normalize_advantages=o["normalize_advantages"],
    )
    # TRL's rewards are float32: advantages agree to float32 precision
    np.testing.assert_allclose(out.advantages, case["advantages"], rtol=1e-5, atol=1e-6)
    assert out.loss == pytest.approx(case["loss"], rel=1e-5, abs=1e-7)
    np.testing.assert_allclose(out.grad, case["grad_new_logps"], rtol=1e-5, atol=1e-7)
    for name, value in case["metrics"].items():
        assert out.metrics[name] == pytest.approx(value), name


def test_reinforcepp_baseline_is_not_trl_batch_scaling():
    b = V.toy_batch()
    rpp = V.reinforcepp_baseline_advantages(b["rewards"], 4)
    trl_batch = reward_advantages(
        b["rewards"].reshape(-1, 1), 4, scale_rewards="batch"
    ).advantages
    assert np.std(rpp, ddof=1) == pytest.approx(1.0, abs=1e-3)
    ratio = rpp / trl_batch
    # one factor for the whole batch, > 1: TRL's raw-reward std counts the
    # between-prompt spread of the group means
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-3)
    assert ratio[0] > 1.1
    # groups with equal means: the two agree
    same = np.array([[0.0, 1.0, 0.5, 0.5], [1.0, 0.0, 0.5, 0.5]])
    np.testing.assert_allclose(
        V.reinforcepp_baseline_advantages(same, 4),
        reward_advantages(same.reshape(-1, 1), 4, scale_rewards="batch").advantages,
        rtol=1e-3,
    )


def _cosine(a, b):
    a, b = np.ravel(a), np.ravel(b)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_the_toy_batch_shows_what_dividing_by_the_group_std_does():
    # section 10.4 compares scale_rewards "group" (GRPO), "none" (Dr. GRPO), "batch"
    # (the REINFORCE++ row) and REINFORCE++-baseline: with two groups of one std these
    # are parallel, so the groups' spreads must differ
    b = V.toy_batch()
    r, g = b["rewards"], b["num_generations"]
    std = r.std(axis=1, ddof=1)
    low = int(np.argmin(std))
    assert std.max() > 2 * std.min()
    adv = {
        s: reward_advantages(r.reshape(-1, 1), g, scale_rewards=s).advantages
        for s in ("group", "batch", "none")
    }
    rpp = V.reinforcepp_baseline_advantages(r, g)
    assert _cosine(adv["none"], adv["group"]) < 0.95
    assert _cosine(rpp, adv["group"]) < 0.95
    assert _cosine(adv["batch"], adv["group"]) < 0.95

    def low_share(x):
        x = np.abs(np.asarray(x)).reshape(-1, g).sum(axis=1)
        return x[low] / x.sum()

    # dividing by the group std raises the low-spread group's weight
    assert low_share(adv["group"]) > low_share(adv["none"]) + 0.2
    # and so does the on-policy gradient of GRPO's row against Dr. GRPO's and the
    # REINFORCE++ row's
    on = {row["name"]: row for row in V.run_grpo_variants(V.toy_batch(0.0))}
    grpo = low_share(on["GRPO"]["push"])
    assert grpo > low_share(on["Dr. GRPO"]["push"]) + 0.2
    assert grpo > low_share(on["REINFORCE++ (approx.)"]["push"]) + 0.2
