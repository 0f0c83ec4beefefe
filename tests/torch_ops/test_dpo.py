"""dpo_grpo.torch_ops.dpo: every DPO loss type equals NumPy (float64) and the TRL 1.16.0
fixtures; the same input validation as NumPy."""

from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dpo_grpo as dg  # noqa: E402
from dpo_grpo import torch_ops as T  # noqa: E402

from testing_support import dpo_case, trl_fixture  # noqa: E402
from torch_support import tensor, to_numpy, TIGHT  # noqa: E402


# --------------------------------------------------------------------------------------
# DPO
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "loss_type, s", [("sigmoid", 0.0), ("hinge", 0.0), ("robust", 0.0), ("robust", 0.2)]
)
@pytest.mark.parametrize("beta", [0.1, 0.5, 2.0])
def test_dpo_matches_numpy(loss_type, s, beta):
    rng = np.random.default_rng(2)
    pc, pr, rc, rr = (rng.normal(-20, 3, 9) for _ in range(4))
    expected = dg.trl_exact.dpo_loss(
        pc, pr, rc, rr, beta, loss_type=loss_type, label_smoothing=s
    )
    pc_t, pr_t = tensor(pc).requires_grad_(), tensor(pr).requires_grad_()
    out = T.dpo_loss(
        pc_t, pr_t, tensor(rc), tensor(rr), beta, loss_type=loss_type, label_smoothing=s
    )
    assert out._fields[:2] == ("loss", "logits")
    out.loss.backward()
    np.testing.assert_allclose(out.loss.item(), expected.loss, **TIGHT)
    np.testing.assert_allclose(to_numpy(out.logits), expected.logits, **TIGHT)
    np.testing.assert_allclose(
        to_numpy(pc_t.grad), expected.grad_policy_chosen, **TIGHT
    )
    np.testing.assert_allclose(
        to_numpy(pr_t.grad), expected.grad_policy_rejected, **TIGHT
    )
    np.testing.assert_allclose(
        to_numpy(out.chosen_rewards), expected.chosen_rewards, **TIGHT
    )
    np.testing.assert_allclose(
        to_numpy(out.rejected_rewards), expected.rejected_rewards, **TIGHT
    )
    for name, value in expected.metrics.items():
        np.testing.assert_allclose(out.metrics[name].item(), value, **TIGHT)


def test_dpo_invalid_like_numpy():
    ok = [np.zeros(3)] * 4
    cases = [
        (dict(beta=0.0), ValueError),
        (dict(loss_type="ipo"), ValueError),
        (dict(label_smoothing=0.1), ValueError),
        (dict(loss_type="robust", label_smoothing=0.5), ValueError),
        (dict(beta="x"), TypeError),
    ]
    for kwargs, err in cases:
        with pytest.raises(err):
            dg.trl_exact.dpo_loss(*ok, **kwargs)
        with pytest.raises(err):
            T.dpo_loss(*map(tensor, ok), **kwargs)
    for bad, err in (
        ([np.zeros(3)] * 3 + [np.zeros(4)], ValueError),
        ([np.zeros(3)] * 3 + [np.full(3, np.nan)], ValueError),
    ):
        with pytest.raises(err):
            dg.trl_exact.dpo_loss(*bad)
        with pytest.raises(err):
            T.dpo_loss(*map(tensor, bad))


# --------------------------------------------------------------------------------------
# TRL 1.16.0 fixtures (produced by TRL's own trainer code; see
# tests/trl_exact/test_trl_parity.py)
# --------------------------------------------------------------------------------------


def test_dpo_matches_trl_fixtures():
    for case in trl_fixture("trl_dpo_loss.json")["cases"]:
        # label_smoothing only where TRL reads it (robust here): it ignores it for
        # sigmoid and hinge
        (pc, pr, rc, rr), beta, options = dpo_case(case)
        pc, pr = tensor(pc).requires_grad_(), tensor(pr).requires_grad_()
        out = T.dpo_loss(pc, pr, tensor(rc), tensor(rr), beta, **options)
        out.loss.backward()
        np.testing.assert_allclose(
            out.loss.item(), case["loss"], rtol=0, atol=1e-10, err_msg=case["name"]
        )
        np.testing.assert_allclose(
            to_numpy(pc.grad), case["grad_policy_chosen"], rtol=0, atol=1e-10
        )
        np.testing.assert_allclose(
            to_numpy(pr.grad), case["grad_policy_rejected"], rtol=0, atol=1e-10
        )
        for metric, value in out.metrics.items():
            atol = 1e-7 if metric == "rewards/accuracies" else 1e-10
            np.testing.assert_allclose(
                value.item(), case["metrics"][metric], rtol=0, atol=atol
            )
