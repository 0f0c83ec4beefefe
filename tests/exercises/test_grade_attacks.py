"""The attacks of issue #31 on the grader, each checked against the defence that answers
it: spoofing file names, a record that cannot be parsed, a batch with a notebook of
another chapter, and a progress line that is not a terminal's. (The sandbox attacks,
which run notebooks, are in tests/exercises/test_sandbox.py.)"""

import subprocess

import nbformat
import pytest

from dpo_grpo.exercises.core import chapter_exercises
from dpo_grpo.exercises.grade import chapter_of, grade_path, to_markdown
from testing_support import grade_command

#: The tests that run grading sandboxes share one xdist worker: each checks that no
#: sandbox process of its batch outlives grading, which a batch graded at the same time
#: on another worker would confuse.
pytestmark = pytest.mark.xdist_group("sandbox")

VICTIM = "a_victim.ipynb"
LOOKALIKE = "a_v\u0456ctim.ipynb"  # CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I
ESCAPE = "\x1b[2K\rz_victim.ipynb"  # erase the line, back to column 0
# right-to-left override: reads as another student's name
RTL = "b_\u202ebynpi.mitciv_a.ipynb"
HIDDEN = "\x1b\r\u202e\u200b"


def _nb(*sources, path=None):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    if path is None:
        return nb
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def spoofed(tmp_path_factory):
    """Four files that are not notebooks (no sandbox needed), named to pass for one
    another."""
    folder = tmp_path_factory.mktemp("spoof")
    for name in (VICTIM, LOOKALIKE, ESCAPE, RTL):
        (folder / name).write_text("not a notebook")
    return folder


def test_names_are_escaped_in_every_report(spoofed, tmp_path):
    grades = grade_path(
        spoofed,
        chapter="04",
        csv_path=tmp_path / "g.csv",
        markdown_path=tmp_path / "g.md",
    )
    cli = subprocess.run(
        grade_command(spoofed, "--chapter", "04"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr
    for text in (
        to_markdown(grades),
        (tmp_path / "g.csv").read_text(),
        (tmp_path / "g.md").read_text(),
        cli.stdout,
        cli.stderr,
    ):
        assert not set(HIDDEN) & set(text)
        assert "\\x1b[2K\\x0dz_victim.ipynb" in text.replace("\\\\", "\\")
        assert "b_\\u202ebynpi" in text.replace("\\\\", "\\")


def test_lookalike_names_are_flagged(spoofed):
    notes = {g.notebook: g.note for g in grade_path(spoofed, chapter="04")}
    # the look-alike letter shown as its code
    assert "looks like a_v\\u0456ctim.ipynb" in notes[VICTIM]
    assert "name a_v\\u0456ctim.ipynb looks like a_victim.ipynb" in notes[LOOKALIKE]
    assert "looks like" not in notes[RTL]


def test_one_bad_record_loses_only_itself(tmp_path):
    """A 5,000-digit integer in the answers file (json raises ValueError on it): the
    other answers still count."""
    big = '{"id": "04.1", "answer": {"kind": "float", "value": ' + "9" * 5000 + "}}"
    path = _nb(
        "from dpo_grpo.exercises import check\nimport os\ncheck('04.4', 'b')",
        f"open(os.environ['DPO_GRPO_ANSWERS'], 'a').write({big!r} + '\\n')",
        path=tmp_path / "big.ipynb",
    )
    (g,) = grade_path(path, chapter="04", timeout=30)
    assert g.verdicts["04.4"] == "correct" and g.verdicts["04.1"] == "not attempted", (
        g.note
    )
    assert "grader error" not in g.note


def test_chapter_is_chosen_by_notebooks_not_by_checks():
    ch03 = chapter_exercises("03")
    class_nb = _nb("check('04.4', 'b')")
    # one notebook, many checks
    other = _nb("\n".join(f"check({i!r}, None)" for i in ch03))
    assert len(ch03) > 2
    assert chapter_of([class_nb, class_nb, other]) == "04"
    with pytest.raises(ValueError, match="--chapter"):
        chapter_of([class_nb, other])  # one notebook each: no majority
