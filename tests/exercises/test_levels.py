"""Exercise levels (1 = recall/compute, 2 = apply, 3 = derive): every exercise of chapters 1-5 is levelled, each of
those chapters has at least three exercises, the derivations exist, and ``level`` is validated."""

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


def test_the_derivations_are_there():
    derivations = {k for k, e in EXERCISES.items() if e.level == 3}
    assert {
        "03.8",
        "03.9",
        "03.10",
        "03.11",
        "01.6",
        "01.7",
        "02.6",
        "05.6",
        "05.7",
    } <= derivations


def test_derivation_answers():
    assert check("03.9", 0.8)
    assert check("03.10", [0.4, 0.0, -0.4])
    assert check("01.6", 2 + 14 / 8) and not check("01.6", 16)
    assert check("01.7", 8 / 18) and not check("01.7", 8 / 20)
    assert check("05.7", 1.1848835) and not check("05.7", 1.0)
    assert check("02.6", 0.002 / (0.002 + 2e-4))
    assert check("03.11", "b") and not check("03.11", "a")


def test_level_is_validated():
    assert _level(None) is None and _level(3) == 3
    for bad in (0, 4, True, "3"):
        with pytest.raises(ValueError, match="level"):
            _level(bad)
