"""dpo_grpo.chapters.checks: the verification suite of chapter 9 passes, reproduces the
article's numbers, reports, and its command line exits 1 when a check fails."""

import json
import re

import numpy as np
import pytest

from dpo_grpo.chapters import check_result, checks, grpo_checks


@pytest.fixture(scope="module")
def results():
    return checks.run_all_checks(bandit=False)


def test_every_check_passes(results):
    failed = [name for name, r in results.items() if not r.passed]
    assert not failed, checks.report(results)
    assert "bandit_table" not in results
    for r in results.values():
        assert isinstance(r, check_result.CheckResult) and bool(r) is True
        if r.threshold is not None:
            assert r.value < r.threshold


def test_article_numbers_are_reproduced(results):
    assert results["objective_identity"].value <= 4.45e-16 * 2
    assert results["dpo_swap"].value == pytest.approx(0.731428, abs=5e-7)
    np.testing.assert_allclose(
        results["dpo_swap"].details["logits"], [-0.10, -0.05], atol=1e-12
    )
    drop = results["dpo_chosen_probability_drop"].details
    assert (round(drop["loss_before"], 6), round(drop["loss_after"], 6)) == (
        0.673079,
        0.639724,
    )
    enum = results["group_enumeration"].details
    np.testing.assert_allclose(enum["exact"], [-0.372, -0.198, 0.570], atol=1e-12)
    np.testing.assert_allclose(enum["centred"], [-0.248, -0.132, 0.380], atol=1e-12)
    np.testing.assert_array_equal(
        np.round(enum["standardised"], 6), [-0.209534, -0.136999, 0.346534]
    )
    assert enum["n_groups"] == 27
    assert [
        round(r["advantage"], 6) for r in results["two_sample_gaps"].details["rows"]
    ] == [0.999800, 0.980392, 0.047619]
    kl = results["kl_value_and_gradient"].details["values"]
    assert (round(kl["exact_kl"], 6), round(kl["old_sample_expectation"], 6)) == (
        0.634897,
        1.146128,
    )


def test_swap_counter_pair_keeps_a_positive_logit(results):
    d = results["dpo_swap"].details
    assert d["counter_pair_logit"] > 0 and d["counter_pair_swapped_logit"] > 0
    np.testing.assert_allclose(
        d["swap_reference_too_logits"], -d["original_logits"], atol=1e-15
    )


def test_report(results):
    text = checks.report(results)
    assert (
        text.count("PASS") == len(results)
        and f"{len(results)}/{len(results)} checks passed" in text
    )
    with pytest.raises(TypeError, match="results"):
        checks.report({"x": 1})


def test_report_shows_rounding_level_values_as_a_bound(results):
    """Issue #43: a value below EXACT_TOL (1e-12) is float64 rounding; the report line
    shows the bound '< 1e-12', not its digits (4.441e-16, 0.000e+00). Larger values,
    such as finite-difference errors, keep theirs."""
    tiny = check_result.check_result("identity", 4.4e-16, 1e-12, "an identity", {})
    assert "< 1e-12 (threshold 1e-12)" in tiny.line() and "e-16" not in tiny.line()
    zero = check_result.check_result("zero", 0.0, 1e-12, "an identity", {})
    assert "< 1e-12" in zero.line() and "0.000e+00" not in zero.line()
    fd = check_result.check_result("gradient", 1.2416e-11, 1e-8, "a gradient", {})
    assert "1.242e-11 (threshold 1e-08)" in fd.line()
    text = checks.report(results)
    assert not re.search(r"e-(1[3-9]|[2-9]\d)\b|0\.0+e\+00", text), text


def test_report_in_chinese(results, monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    text = checks.report(results)
    n = len(results)
    assert text.count("通过  ") == n and f"{n}/{n} 项检查通过" in text
    assert "PASS" not in text and "threshold" not in text and "阈值" in text
    # the check names are keys and stay as they are
    assert all(name in text for name in results)


def test_command_line(capsys):
    assert checks.main(["--fast"]) == 0
    assert "checks passed" in capsys.readouterr().out
    assert checks.main(["--fast", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["masks"]["passed"] is True and data["masks"]["details"]["rejected"] == 9


def test_command_line_exit_status_reflects_a_failure(monkeypatch, capsys):
    monkeypatch.setattr(grpo_checks, "kl_grad_logits", lambda z, q: np.zeros(len(z)))
    assert checks.main(["--fast"]) == 1
    assert "FAIL" in capsys.readouterr().out
