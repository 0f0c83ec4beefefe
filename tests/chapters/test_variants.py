"""Chapter 10's variants: RLOO as TRL's RLOOTrainer computes it, every GRPO variant and DPO loss type on the toy
batch, and configs whose keys are TRL 1.16.0's own."""

import dataclasses

import numpy as np
import pytest

from dpo_grpo.chapters import variants as V
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
    # on-policy the clip never acts: GSPO's narrow band and DAPO's clip-higher change nothing
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
