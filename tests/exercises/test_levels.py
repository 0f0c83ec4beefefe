"""Exercise levels (1 = recall/compute, 2 = apply, 3 = derive): every exercise of
chapters 1-5 is levelled, each of those chapters has at least three exercises and two
derivations, the derivations exist and check out, and ``level`` is validated."""

import numpy as np
import pytest

from dpo_grpo.exercises import EXERCISES, check
from dpo_grpo.exercises.core import _level


@pytest.mark.parametrize("chapter", ["01", "02", "03", "04", "05"])
def test_chapters_1_to_5_are_levelled(chapter):
    exercises = [e for k, e in EXERCISES.items() if k.startswith(chapter + ".")]
    assert len(exercises) >= 3
    assert all(e.level in (1, 2, 3) for e in exercises), [
        e.id for e in exercises if e.level is None
    ]


@pytest.mark.parametrize("chapter", ["01", "02", "03", "04", "05"])
def test_chapters_1_to_5_have_two_derivations(chapter):
    derivations = [
        k for k, e in EXERCISES.items() if k.startswith(chapter + ".") and e.level == 3
    ]
    assert len(derivations) >= 2, derivations


def test_the_derivations_are_there():
    derivations = {k for k, e in EXERCISES.items() if e.level == 3}
    assert {
        "03.5",
        "03.12",
        "03.13",
        "03.14",
        "01.6",
        "01.7",
        "02.6",
        "02.7",
        "04.5",
        "04.6",
        "05.5",
        "05.7",
    } <= derivations


def test_derivation_answers():
    # 03.12: (1 - 1/G) grad J at G = 16, for p = [0.1, 0.6, 0.3], r = [1, 0, 2]
    grad_j = np.array([0.1 * 0.3, 0.6 * -0.7, 0.3 * 1.3])
    assert check("03.12", 15 / 16 * grad_j)
    assert not check("03.12", 0.8) and not check("03.12", grad_j)
    assert check("03.13", [0.4, 0.0, -0.4])
    assert check("01.6", 2 + 14 / 8) and not check("01.6", 16)
    assert check("01.7", 8 / 18) and not check("01.7", 8 / 20)
    assert check("05.5", 1.1848835) and not check("05.5", 1.0)
    assert check("02.6", 0.002 / (0.002 + 2e-4))
    assert check("03.14", "b") and not check("03.14", "a")
    assert check("02.7", 0.3 * 0.06 / 0.15) and not check("02.7", 0.3)
    assert not check("02.7", 0.3 - (0.15 - 0.06))


def test_02_7_the_loss_is_unchanged_at_the_derived_floor():
    """At the floor the DPO loss equals the loss before the update; below it the loss
    rises, above it falls."""
    from dpo_grpo import trl_exact
    from dpo_grpo.exercises.ch02 import EX7

    ref = np.log([0.2, 0.3])

    def loss(chosen, rejected):
        lp = np.log([chosen, rejected])
        return trl_exact.dpo_loss(lp[:1], lp[1:], ref[:1], ref[1:], beta=0.1).loss

    before = loss(EX7["chosen"], EX7["rejected"])
    floor = EXERCISES["02.7"].solution()
    assert loss(floor, EX7["rejected_new"]) == pytest.approx(before, abs=1e-12)
    assert loss(floor - 1e-3, EX7["rejected_new"]) > before
    assert loss(floor + 1e-3, EX7["rejected_new"]) < before


def test_04_6_is_the_jacobian_column_of_group_advantages():
    """The derived column equals central finite differences of group_advantages at the
    exercise's inputs."""
    from dpo_grpo.exercises.ch04 import EX6
    from dpo_grpo.reference.advantages import group_advantages

    r, k, eps, h = EX6["rewards"], EX6["k"], EX6["eps"], 1e-6
    bump = h * np.eye(r.size)[k]
    fd = (
        group_advantages((r + bump)[None], eps=eps)[0]
        - group_advantages((r - bump)[None], eps=eps)[0]
    ) / (2 * h)
    column = EXERCISES["04.6"].solution()
    np.testing.assert_allclose(column, fd, atol=1e-7)
    assert abs(column.sum()) < 1e-12 and column[0] > 0  # the worst answer rises too


def test_the_03_12_formula_matches_enumeration_where_it_can_be_enumerated():
    """The closed form the exercise asks for, (1 - 1/G) p * (r - p.r), is what
    enumerating every group gives."""
    from dpo_grpo.exercises.ch03 import EX12
    from dpo_grpo.reference.baselines import enumerate_group_gradients, true_gradient

    p, r = EX12["probs"], EX12["rewards"]
    for g in (2, 3, 5):
        centred = enumerate_group_gradients(p, r, g).centered
        np.testing.assert_allclose(
            centred, (1 - 1 / g) * true_gradient(p, r), atol=1e-12
        )
    with pytest.raises(ValueError, match="too many"):
        enumerate_group_gradients(p, r, EX12["group_size"])


def test_03_2_is_the_stationary_point_of_the_kl_regularised_objective():
    """The registered pi* sums to one, beats every policy nearby, and is the closed
    form computed by hand."""
    from dpo_grpo.exercises.ch03 import EX2
    from dpo_grpo.reference.dpo import kl_regularised_objective

    q, r, beta = EX2["ref_policy"], EX2["rewards"], EX2["beta"]
    pi = np.asarray(EXERCISES["03.2"].solution())
    w = q * np.exp(r / beta)
    np.testing.assert_allclose(pi, w / w.sum(), atol=1e-15)
    best = kl_regularised_objective(pi, r, q, beta)
    rng = np.random.default_rng(0)
    for _ in range(50):
        near = pi * np.exp(0.05 * rng.normal(size=3))
        assert kl_regularised_objective(near / near.sum(), r, q, beta) < best
    assert check("03.2", w / w.sum()) and not check("03.2", w)


def test_03_4_gives_the_third_answer_probability_one_half():
    """At the registered reward pi* gives the third answer exactly 1/2; at the rough
    scale beta log(1 / q) (a registered mistake) it does not."""
    from dpo_grpo.exercises.ch03 import EX4
    from dpo_grpo.reference.dpo import optimal_policy

    q, beta = EX4["ref_policy"], EX4["beta"]
    reward = EXERCISES["03.4"].solution()
    assert optimal_policy(q, [0.0, 0.0, reward], beta)[0][2] == pytest.approx(0.5)
    assert reward == pytest.approx(beta * np.log((1 - q[2]) / q[2]), abs=1e-12)
    rough = beta * np.log(1 / q[2])
    assert optimal_policy(q, [0.0, 0.0, rough], beta)[0][2] > 0.51
    assert not check("03.4", rough)


def test_level_is_validated():
    assert _level(None) is None and _level(3) == 3
    for bad in (0, 4, True, "3"):
        with pytest.raises(ValueError, match="level"):
            _level(bad)
