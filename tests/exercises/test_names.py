"""Look-alike file names (Unicode's confusables, UTS #39) and names that mix scripts:
what the grader flags in a submission's note, and what it must not flag."""

import pytest

from dpo_grpo.exercises.names import confusable_with, mixed_scripts, skeleton


@pytest.mark.parametrize(
    "name, other",
    [
        ("Ivan", "lvan"),  # capital I, small L
        ("Ivan", "ivan"),  # case
        ("alice", "Alice"),
        ("vvang", "wang"),
        ("clara", "dara"),
        ("\uab83ang", "wang"),  # CHEROKEE SMALL LETTER LA
        ("\u0561ang", "wang"),  # ARMENIAN SMALL LETTER AYB
        ("\u1d21ang", "wang"),  # LATIN LETTER SMALL CAPITAL W
        ("\u026avan", "ivan"),  # LATIN LETTER SMALL CAPITAL I
        ("\u0251lice", "alice"),  # LATIN SMALL LETTER ALPHA
        ("\u0430lice", "alice"),  # CYRILLIC SMALL LETTER A
        ("\u0410lice", "alice"),  # CYRILLIC CAPITAL LETTER A
        ("a_v\u0456ctim.ipynb", "a_victim.ipynb"),
        ("bob_03.ipynb", "b0b_O3.ipynb"),
        ("ma\u200bry", "mary"),  # a zero-width space
        ("jos\u00e9", "jose"),  # an accent
        ("\uff41lice", "alice"),  # FULLWIDTH LATIN SMALL LETTER A
        ("\u202eecila", "ecila"),  # a bidirectional override
    ],
)
def test_look_alike_names_are_flagged(name, other):
    assert confusable_with([name, other, "bob"]) == {name: [other], other: [name]}


@pytest.mark.parametrize(
    "name, other",
    [("alice", "bob"), ("张三", "李四"), ("anna", "anne"), ("ivan", "lvan")],
)
def test_different_names_are_not_flagged(name, other):
    assert confusable_with([name, other]) == {}
    assert skeleton(name) != skeleton(other)


def test_a_skeleton_is_one_form_of_each_look():
    # Cyrillic capitals A and I: ALICE's look; once case is folded, alice's
    assert skeleton("\u0410L\u0406CE") == skeleton("ALICE") != skeleton("alice")
    assert confusable_with(["\u0410L\u0406CE", "alice"])["alice"] == ["\u0410L\u0406CE"]
    assert skeleton("rn") == skeleton("m")
    with pytest.raises(TypeError, match="name"):
        skeleton(3)
    with pytest.raises(TypeError, match="names"):
        confusable_with(["a", None])


@pytest.mark.parametrize(
    "name, scripts",
    [
        ("\u0430lice", ["Cyrillic", "Latin"]),
        ("bob/\u0430lice_03.ipynb", ["Cyrillic", "Latin"]),
        ("\u03b1lice", ["Greek", "Latin"]),
        ("alice", []),
        ("Alice Smith 03b.ipynb", []),
        ("张三", []),
        ("Zhang张三", []),  # Latin with Han
        ("山田タロウ", []),  # Han with Katakana
        ("Kim김민", []),  # Latin with Hangul
        ("alice_张三.ipynb", []),
        ("иван/ivan.ipynb", []),  # one script per token
        ("ivanиван", ["Cyrillic", "Latin"]),
        ("김タロウ", ["Hangul", "Katakana"]),
    ],
)
def test_mixed_scripts_follow_the_highly_restrictive_profile(name, scripts):
    assert mixed_scripts(name) == scripts


def test_mixed_scripts_names_a_bad_argument():
    with pytest.raises(TypeError, match="name"):
        mixed_scripts(b"alice")
