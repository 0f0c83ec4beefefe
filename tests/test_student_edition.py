"""The student edition (solution cells removed) of every chapter still executes from top to bottom."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from dpo_grpo.exercises.student import strip_solutions

BOOK = Path(__file__).resolve().parents[1] / "book"
WITH_EXERCISES = [p for p in sorted(BOOK.glob("*.ipynb"))
                  if any("solution" in c.metadata.get("tags", []) for c in nbformat.read(p, as_version=4).cells)]


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.name)
def test_student_notebook_executes(path):
    student = strip_solutions(nbformat.read(path, as_version=4))
    client = NotebookClient(student, timeout=300, kernel_name="python3", allow_errors=False,
                            resources={"metadata": {"path": str(BOOK)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    outputs = [o for c in student.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
