"""The student edition: every notebook with its ``solution`` cells removed and outputs
cleared.

The *graded* edition (``graded=True``) also imports ``check`` from :mod:`.record`, which
records answers for the grader and gives no feedback: it consults no key, so it is no
oracle. Hand it out when marks count.
"""

from __future__ import annotations

from pathlib import Path

SOLUTION_TAG = "solution"
SELF_CHECK_IMPORT = "from dpo_grpo.exercises import check"
GRADED_IMPORT = "from dpo_grpo.exercises.record import check"


def strip_solutions(nb):
    """Return a copy of notebook ``nb`` (nbformat node) without solution cells and
    without outputs."""
    import copy

    out = copy.deepcopy(nb)
    out.cells = [
        c
        for c in out.cells
        if SOLUTION_TAG not in c.get("metadata", {}).get("tags", [])
    ]
    for c in out.cells:
        if c.cell_type == "code":
            c.outputs = []
            c.execution_count = None
    return out


def without_self_check(nb):
    """``nb`` (nbformat node, changed in place and returned) with every import of the
    self-check ``check`` replaced by the graded edition's (:mod:`.record`)."""
    for c in nb.cells:
        if c.cell_type == "code" and SELF_CHECK_IMPORT in c.source:
            lines = [
                GRADED_IMPORT if ln.strip() == SELF_CHECK_IMPORT else ln
                for ln in c.source.split("\n")
            ]
            c.source = "\n".join(lines)
            if SELF_CHECK_IMPORT in c.source:
                raise ValueError(
                    "cannot replace an import of check in this cell: "
                    f"{c.source[:200]!r}"
                )
    return nb


def write_student_edition(book_dir, out_dir, *, graded: bool = False) -> list[Path]:
    """Write the student edition of every ``*.ipynb`` in ``book_dir`` to ``out_dir``;
    return the written paths. ``graded``: the graded edition (no self-check key: see the
    module docstring)."""
    import nbformat

    if not isinstance(graded, bool):
        raise TypeError(f"graded must be a bool, got {type(graded).__name__}")
    book_dir, out_dir = Path(book_dir), Path(out_dir)
    if not book_dir.is_dir():
        raise ValueError(f"book_dir must be a folder of notebooks, got {book_dir}")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(book_dir.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        target = out_dir / path.name
        edition = strip_solutions(nb)
        nbformat.write(without_self_check(edition) if graded else edition, target)
        written.append(target)
    for extra in sorted(book_dir.glob("*.md")) + sorted(book_dir.glob("*.bib")):
        (out_dir / extra.name).write_text(
            extra.read_text(encoding="utf-8"), encoding="utf-8"
        )
    return written
