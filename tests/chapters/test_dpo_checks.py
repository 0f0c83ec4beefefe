"""dpo_grpo.chapters.dpo_checks: each DPO check fails when the thing it checks is
broken."""

import pytest

from dpo_grpo.chapters import check_result, dpo_checks


def test_dpo_gradient_check_detects_a_wrong_gradient(monkeypatch):
    real = dpo_checks.dpo_loss

    def wrong(*args, **kwargs):
        out = real(*args, **kwargs)
        return out._replace(grad_policy_chosen=out.grad_policy_chosen * 1.01)

    monkeypatch.setattr(dpo_checks, "dpo_loss", wrong)
    res = dpo_checks.check_dpo_gradient()
    assert not res.passed and res.value > check_result.FD_TOL


def test_invalid_arguments():
    with pytest.raises(ValueError, match="n_policies"):
        dpo_checks.check_objective_identity(n_policies=0)
