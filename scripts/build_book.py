"""Build the book (``make book``): ``jupyter-book build`` with Sphinx reading, and so executing, the chapters in
parallel, one process per CPU (``BOOK_JOBS`` overrides).

Jupyter Book 1's command line has no ``--jobs``; its ``build_sphinx`` takes one, and myst-nb, sphinx-exercise,
sphinx-togglebutton, sphinxcontrib-bibtex and this book's extension are all parallel-read safe. Each chapter is
still executed exactly once, in a fresh kernel, as in a serial build.

    python scripts/build_book.py [jupyter-book build options, default: . --all -W -n --keep-going]
"""

from __future__ import annotations

import functools
import os
import sys

from jupyter_book import sphinx
from jupyter_book.cli import main as cli

DEFAULT_ARGS = [".", "--all", "-W", "-n", "--keep-going"]


def jobs() -> int:
    value = os.environ.get("BOOK_JOBS", "")
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"BOOK_JOBS: expected a positive integer, got {value!r}")
        return int(value)
    return os.cpu_count() or 1


def main(argv: list[str]) -> int:
    # the CLI imports build_sphinx from jupyter_book.sphinx when it runs: give it the jobs there
    sphinx.build_sphinx = functools.partial(sphinx.build_sphinx, jobs=jobs())
    return cli.main(["build", *(argv or DEFAULT_ARGS)], standalone_mode=False) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
