"""The student edition: every notebook with its ``solution`` cells removed and outputs cleared."""

from __future__ import annotations

from pathlib import Path

SOLUTION_TAG = "solution"


def strip_solutions(nb):
    """Return a copy of notebook ``nb`` (nbformat node) without solution cells and without outputs."""
    import copy

    out = copy.deepcopy(nb)
    out.cells = [c for c in out.cells if SOLUTION_TAG not in c.get("metadata", {}).get("tags", [])]
    for c in out.cells:
        if c.cell_type == "code":
            c.outputs = []
            c.execution_count = None
    return out


def write_student_edition(book_dir, out_dir) -> list[Path]:
    """Write the student edition of every ``*.ipynb`` in ``book_dir`` to ``out_dir``; return the written paths."""
    import nbformat

    book_dir, out_dir = Path(book_dir), Path(out_dir)
    if not book_dir.is_dir():
        raise ValueError(f"book_dir must be a folder of notebooks, got {book_dir}")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(book_dir.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        target = out_dir / path.name
        nbformat.write(strip_solutions(nb), target)
        written.append(target)
    for extra in sorted(book_dir.glob("*.md")) + sorted(book_dir.glob("*.bib")):
        (out_dir / extra.name).write_text(extra.read_text(encoding="utf-8"), encoding="utf-8")
    return written
