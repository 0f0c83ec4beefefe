"""Write the standard first cell ("set-up for Colab") into every chapter notebook.

The repository URL lives in one place, ``_config.yml`` (``repository.url``); this script renders it into each
notebook's first cell, and ``tests/test_book.py`` fails if a notebook's first cell differs from the rendering.
Run after adding a chapter or changing the URL:  ``.venv/bin/python scripts/sync_colab_cells.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
MARKER = "# Set-up: in Colab, install the book's package"

TEMPLATE = '''{marker} (elsewhere this cell does nothing).
import sys
if "google.colab" in sys.modules:
    import subprocess
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "dpo-grpo[widgets] @ git+{url}"], check=True)
from dpo_grpo.notebook import runtime_summary
print(runtime_summary())  # NumPy core always; the torch path uses CUDA when a GPU is present'''


def repository_url() -> str:
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return cfg["repository"]["url"].rstrip("/")


def setup_cell_source() -> str:
    return TEMPLATE.format(marker=MARKER, url=repository_url())


def sync(path: Path) -> bool:
    """Make the first cell of ``path`` the set-up cell; return True if the file changed."""
    nb = nbformat.read(path, as_version=4)
    source = setup_cell_source()
    first_code = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), None)
    if first_code is not None and nb.cells[first_code].source.startswith(MARKER):
        if nb.cells[first_code].source == source:
            return False
        nb.cells[first_code].source = source
    else:
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["tags"] = ["colab-setup"]
        cell["id"] = "colab-setup"
        # after the title cell (markdown) if there is one
        at = 1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0
        nb.cells.insert(at, cell)
    nbformat.write(nb, path)
    return True


def main(argv) -> int:
    paths = [Path(p) for p in argv] or sorted((ROOT / "book").glob("*.ipynb"))
    for p in paths:
        if sync(p):
            print("updated", p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
