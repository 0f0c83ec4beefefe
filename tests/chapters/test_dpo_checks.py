"""dpo_grpo.chapters.dpo_checks: each DPO check fails when the thing it checks is
broken."""

import re

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


def test_descriptions_in_chinese_and_english(monkeypatch):
    """The report line's description: English as before, Chinese under DPO_GRPO_LANG=zh,
    the computed count filled in both."""
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    en = dpo_checks.check_objective_identity(n_policies=7)
    assert (
        en.description == "J(p) = beta log Z - beta KL(p||pi*) over 7 random policies"
    )
    assert en.line().endswith("  " + en.description)
    assert (
        dpo_checks.check_dpo_swap()
        .line()
        .endswith("swapped policy log-probs: logits and loss")
    )
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    zh = dpo_checks.check_objective_identity(n_policies=7)
    assert "在 7 个随机策略上" in zh.line() and "random" not in zh.line()
    for check in (
        dpo_checks.check_dpo_gradient,
        dpo_checks.check_dpo_swap,
        dpo_checks.check_chosen_probability_counterexample,
    ):
        line = check().line()
        assert re.search(r"[\u4e00-\u9fff]", line.split("  ")[-1]), line
