"""Every chapter ran, once, in the book build, in both editions: the executed notebooks
in ``_build/jupyter_execute`` (the English site) and
``_build/zh/_build/jupyter_execute`` (the Chinese one, ``scripts/build_book.py --zh``;
the ``built_book`` fixture) hold every code cell the build runs, each with an execution
count and no error. The Chinese notebooks have the English code cells (same ids; the
set-up cell also sets ``DPO_GRPO_LANG=zh``), so both are compared with the English
source.

The build executes each chapter once, with nbmake (``scripts/build_book.py``: a failing
cell stops it), and these tests read what it produced. The cells tagged
``skip-execution`` (the live widgets) run headless in
tests/interactive/test_widgets_headless.py."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from testing_support import nbmake_runs

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "book").glob("*.ipynb"))
#: edition -> its executed notebooks, below the build folder
EXECUTED = {
    "en": Path("jupyter_execute"),
    "zh": Path("zh") / "_build" / "jupyter_execute",
}


def unexecuted_or_failed(source_nb, executed_nb) -> list[str]:
    """The code cells of ``source_nb`` that ``executed_nb`` did not run, or ran into an
    error."""
    executed = {c.get("id"): c for c in executed_nb.cells if c.cell_type == "code"}
    problems = []
    for cell in source_nb.cells:
        if cell.cell_type != "code" or "skip-execution" in cell.metadata.get(
            "tags", []
        ):
            continue
        ran = executed.get(cell.get("id"))
        if ran is None or ran.get("execution_count") is None:
            problems.append(f"cell {cell.get('id')} did not run")
        elif any(o.get("output_type") == "error" for o in ran.get("outputs", [])):
            problems.append(f"cell {cell.get('id')} raised an error")
    return problems


def test_a_cell_that_did_not_run_or_failed_is_reported():
    source = nbformat.v4.new_notebook()
    source.cells = [
        nbformat.v4.new_code_cell("1", id="a"),
        nbformat.v4.new_code_cell("2", id="b"),
    ]
    executed = nbformat.from_dict(nbformat.v4.new_notebook())
    ran = nbformat.v4.new_code_cell("1", id="a", execution_count=1)
    ran.outputs = [nbformat.v4.new_output("error", ename="E", evalue="x", traceback=[])]
    executed.cells = [ran]
    assert unexecuted_or_failed(source, executed) == [
        "cell a raised an error",
        "cell b did not run",
    ]


@pytest.mark.parametrize("stem", NOTEBOOKS)
@pytest.mark.parametrize("edition", sorted(EXECUTED))
def test_every_cell_ran_without_error_in_the_build(built_book, edition, stem):
    source = nbformat.read(ROOT / "book" / f"{stem}.ipynb", as_version=4)
    path = built_book / EXECUTED[edition] / "book" / f"{stem}.ipynb"
    assert path.is_file(), (
        f"the {edition} build did not execute {stem}: {path} is missing"
    )
    executed = nbformat.read(path, as_version=4)
    assert unexecuted_or_failed(source, executed) == []


def test_nbmake_executed_every_chapter_of_both_editions_once(built_book):
    report = built_book / "nbmake-report.xml"  # scripts/build_book.py: --junitxml
    assert report.is_file(), f"the build left no nbmake report: {report} is missing"
    expected = {f"{edition}/{stem}" for edition in EXECUTED for stem in NOTEBOOKS}
    assert nbmake_runs(report) == dict.fromkeys(sorted(expected), ["passed"])
