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
