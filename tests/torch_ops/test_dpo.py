"""dpo_grpo.torch_ops.dpo: every DPO loss type equals NumPy (float64) and the TRL 1.16.0
fixtures; the same input validation as NumPy."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dpo_grpo as dg  # noqa: E402
from dpo_grpo import torch_ops as T  # noqa: E402

from torch_support import tensor, to_numpy, FIXTURES, TIGHT  # noqa: E402


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


def _fixture(name):
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"{path.name} not generated")
    with open(path, encoding="utf-8") as f:
        return json.load(f)["cases"]


def test_dpo_matches_trl_fixtures():
    for case in _fixture("trl_dpo_loss.json"):
        o, x = case["options"], case["inputs"]
        # TRL ignores it for sigmoid and hinge
        s = o["label_smoothing"] if o["loss_type"] == "robust" else 0.0
        pc, pr = (
            tensor(x["policy_chosen"]).requires_grad_(),
            tensor(x["policy_rejected"]).requires_grad_(),
        )
        out = T.dpo_loss(
            pc,
            pr,
            tensor(x["ref_chosen"]),
            tensor(x["ref_rejected"]),
            o["beta"],
            loss_type=o["loss_type"],
            label_smoothing=s,
        )
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
