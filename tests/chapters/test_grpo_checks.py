"""dpo_grpo.chapters.grpo_checks: the bandit table matches the article, and each GRPO
check fails when the thing it checks is broken."""

import re

import numpy as np
import pytest
from hypothesis import given, strategies as st

from dpo_grpo.chapters import check_result, grpo_checks
from dpo_grpo.reference import examples as ex


def test_bandit_table_matches_the_article():
    res = grpo_checks.check_bandit_table()
    assert res.passed and res.value <= 5e-7
    table = res.details["table"]
    for name, (mean, lo, hi) in check_result.ARTICLE_REPORTED["bandit"].items():
        assert (
            round(table[name]["mean"], 6),
            round(table[name]["min"], 6),
            round(table[name]["max"], 6),
        ) == (mean, lo, hi)


def test_bandit_table_other_seeds_only_checks_the_constant_row():
    res = grpo_checks.check_bandit_table(seeds=[0, 1])
    assert res.passed and res.details["table"]["all rewards 1"]["values"] == [
        0.25,
        0.25,
    ]


def test_surrogate_check_detects_a_wrong_gradient(monkeypatch):
    real = grpo_checks.grpo_loss

    def wrong(*args, **kwargs):
        out = real(*args, **kwargs)
        return out._replace(grad=out.grad * 1.001)

    monkeypatch.setattr(grpo_checks, "grpo_loss", wrong)
    res = grpo_checks.check_surrogate_gradient()
    assert not res.passed and res.value > check_result.FD_TOL


def test_surrogate_check_requires_all_four_regions(monkeypatch):
    only_article = dict(grpo_checks.FOUR_REGION_EXAMPLE)
    # the article's example twice: one wrong direction missing
    only_article.update(ex.surrogate_gradient_example())
    monkeypatch.setattr(grpo_checks, "FOUR_REGION_EXAMPLE", only_article)
    res = grpo_checks.check_surrogate_gradient()
    assert res.value < check_result.FD_TOL and not res.passed
    assert "wrong_direction/low" not in res.details["covered"]


def test_four_region_example_covers_each_off_centre_region():
    run = grpo_checks.surrogate_gradient_error(grpo_checks.FOUR_REGION_EXAMPLE)
    assert run["regions"] == [
        "platform",
        "wrong_direction",
        "platform",
        "wrong_direction",
    ]
    np.testing.assert_allclose(run["ratio"], [2.0, 2.5, 0.75, 0.625])


def test_masks_check_fails_when_an_invalid_input_is_accepted(monkeypatch):
    real = grpo_checks.invalid_input_cases
    monkeypatch.setattr(
        grpo_checks, "invalid_input_cases", lambda: real() + [("accepted", lambda: 1.0)]
    )
    res = grpo_checks.check_masks()
    assert not res.passed and res.details["messages"]["accepted"] == "NOT REJECTED"


@pytest.mark.parametrize(
    "desc, fn",
    grpo_checks.invalid_input_cases(),
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_each_invalid_input_raises_value_error(desc, fn):
    with pytest.raises(ValueError):
        fn()


def test_enumeration_check_fails_for_a_biased_package(monkeypatch):
    real = grpo_checks.enumerate_group_gradients

    def biased(*args, **kwargs):
        out = real(*args, **kwargs)
        return out._replace(leave_one_out=out.leave_one_out * (2 / 3))

    monkeypatch.setattr(grpo_checks, "enumerate_group_gradients", biased)
    assert not grpo_checks.check_group_enumeration().passed


def test_kl_check_fails_if_the_true_gradient_is_wrong(monkeypatch):
    monkeypatch.setattr(grpo_checks, "kl_grad_logits", lambda z, q: np.zeros(len(z)))
    assert not grpo_checks.check_kl().passed


@given(st.floats(1e-6, 1e3), st.floats(1e-8, 1e-1))
def test_two_sample_formula(d, eps):
    row = grpo_checks.two_sample_gap_table([d], eps=eps)[0]
    assert row["advantage"] == pytest.approx(d / (d + 2 * eps), rel=1e-12)
    assert row["advantage_ddof1"] == pytest.approx(
        (d / 2) / (d / np.sqrt(2) + eps), rel=1e-12
    )


def test_invalid_arguments():
    with pytest.raises(ValueError, match="gap"):
        grpo_checks.two_sample_gap_table([0.0])
    with pytest.raises(ValueError, match="eps"):
        grpo_checks.two_sample_gap_table([1.0], eps=0)


def test_descriptions_and_case_names_in_chinese_and_english(monkeypatch):
    """Report lines in the reader's language (counts filled in); the invalid-input cases
    keep English keys and have Chinese labels (the table shows them translated)."""
    from dpo_grpo.i18n import catalog
    from dpo_grpo.tables import html_table

    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    masks = grpo_checks.check_masks()
    assert masks.description == "padding NaN/inf ignored; 9/9 invalid inputs rejected"
    assert (
        grpo_checks.check_group_enumeration()
        .line()
        .endswith("27 groups: centred, leave-one-out, standardised")
    )
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    assert "9/9 个无效输入被拒绝" in grpo_checks.check_masks().line()
    assert "27 个组" in grpo_checks.check_group_enumeration().line()
    assert "5 种配置 × 1 个种子" in grpo_checks.check_bandit_table(seeds=[0]).line()
    for check in (
        grpo_checks.check_two_sample_gaps,
        grpo_checks.check_kl,
        grpo_checks.check_surrogate_gradient,
        grpo_checks.check_clip_does_not_bound_kl,
    ):
        line = check().line()
        assert re.search(r"[\u4e00-\u9fff]", line.split("  ")[-1]), line
    names = [desc for desc, _ in grpo_checks.invalid_input_cases()]
    assert names[0] == "group of one answer (G = 1)"
    assert all(name in catalog("zh") for name in names)
    assert "只有一个回答的组" in html_table([[names[0], "x"]], ["invalid input", "m"])
