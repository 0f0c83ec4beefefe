"""dpo_grpo.stats: the exact sign test, against hand counts and SciPy's binomial
test."""

import pytest
from dpo_grpo import stats


def test_sign_test_by_hand_drops_ties():
    # 9 of 10 ahead: p = 2 * (C(10,9) + C(10,10)) / 2**10 = 22 / 1024
    out = stats.sign_test([1.0] * 9 + [-1.0, 0.0])
    assert out == {"ahead": 9, "behind": 1, "ties": 1, "sign_p": 22 / 1024}
    assert stats.sign_test([1.0, -1.0])["sign_p"] == 1.0
    assert stats.sign_test([0.0, 0.0]) == {
        "ahead": 0,
        "behind": 0,
        "ties": 2,
        "sign_p": 1.0,
    }


@pytest.mark.parametrize("ahead,behind", [(0, 10), (2, 8), (5, 5), (7, 3), (12, 1)])
def test_sign_test_equals_scipys_exact_binomial_test(ahead, behind):
    scipy_stats = pytest.importorskip("scipy.stats")
    out = stats.sign_test([1.0] * ahead + [-1.0] * behind)
    want = scipy_stats.binomtest(ahead, ahead + behind, 0.5).pvalue
    assert out["sign_p"] == pytest.approx(want, rel=1e-12)


def test_sign_test_rejects_what_is_not_a_vector():
    with pytest.raises(ValueError, match="differences"):
        stats.sign_test([[1.0, -1.0]])


def test_holm_by_hand():
    # sorted: 0.01 x 4 = 0.04, 0.02 x 3 = 0.06, 0.04 x 2 = 0.08, 0.30 x 1 = 0.30
    # (already monotone); given out of order, returned in the input's order
    out = stats.holm([0.04, 0.30, 0.01, 0.02])
    assert out == pytest.approx([0.08, 0.30, 0.04, 0.06])
    # the running maximum: 0.01 x 3 = 0.03, 0.011 x 2 = 0.022 -> 0.03, 0.5 x 1
    assert stats.holm([0.5, 0.011, 0.01]) == pytest.approx([0.5, 0.03, 0.03])
    # capped at 1
    assert stats.holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])
    for bad in ([0.2, 1.5], []):
        with pytest.raises(ValueError, match="p_values"):
            stats.holm(bad)
