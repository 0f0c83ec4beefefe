"""Write the standard first cell ("set-up for Colab") into every chapter notebook, and
label the toggle of every solution cell.

The repository URL lives in one place, ``_config.yml`` (``repository.url``); this script
renders it into each notebook's first cell, and ``tests/book/test_notebooks.py`` fails
if a notebook's first cell differs from the rendering. Run after adding a chapter, an
exercise or changing the URL:  ``.venv/bin/python scripts/sync_colab_cells.py``.

On the site a solution cell (tag ``solution``, hidden by ``hide-cell``) sits behind a
toggle whose label myst-nb takes from the cell's metadata (``mystnb``:
``code_prompt_show``/``code_prompt_hide``; without it, "Show code cell content"): this
script sets "Show the solution"/"Hide the solution" there (the Chinese edition
translates them, ``scripts/zh_edition.py``), and the test fails on a solution cell
without them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
MARKER = "# Set-up: installs the book's package if missing (Colab, Jupyter)"
OLD_MARKERS = (
    MARKER,
    "# Set-up: installs the book's package where it is missing (Colab, a fresh "
    "Jupyter)",
    "# Set-up: in Colab, install the book's package",
)
# The set-up cell installs the package for Colab and Jupyter: the reader edition keeps
# it as its first cell, the site does not show it (a reader of the site needs no
# install).
TAGS = ["colab-setup", "remove-cell"]
#: The label of a solution cell's toggle on the site (myst-nb's cell-level settings)
SOLUTION_TAG = "solution"
SOLUTION_PROMPTS = {
    "code_prompt_show": "Show the solution",
    "code_prompt_hide": "Hide the solution",
}
# Chapters whose torch cells run noticeably faster on a GPU: their set-up cell says how
# to get one.
GPU_CHAPTERS = {"05_production", "lab_tiny_grpo"}
# A chapter needs torch when a code cell other than the set-up cell names torch,
# torch_ops or the lab (which runs on torch); the others install without it (on Linux,
# PyPI's torch is a CUDA build of several GB).
USES_TORCH = re.compile(r"\btorch|\bdpo_grpo\.lab\b|from dpo_grpo import[^\n]*\blab\b")

TEMPLATE = """{marker}; shows the runtime.
# A fork: put your fork's URL here (or set DPO_GRPO_SOURCE to any pip source).
REPO_URL = "{url}"
PACKAGE_VERSION = "{version}"
NEEDS_TORCH = {needs_torch}  # whether this chapter's cells use torch
import importlib.metadata, importlib.util, os, subprocess, sys

NO_NETWORK = (
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Failed to establish a new connection",
)
NOT_PUBLIC = (
    "Repository not found",
    "could not read Username",
    "Authentication failed",
    "does not appear to be a git repository",
)


def _installed_version():
    try:
        return importlib.metadata.version("dpo-grpo")
    except importlib.metadata.PackageNotFoundError:
        return None


# Skip when this version is installed (the book build, a second run). Colab's torch,
# ipywidgets and plotly satisfy the extras and stay; torch is added only if missing.
if _installed_version() != PACKAGE_VERSION:
    wants_torch = NEEDS_TORCH and not importlib.util.find_spec("torch")
    extras = "notebooks,torch" if wants_torch else "notebooks"
    source = os.environ.get("DPO_GRPO_SOURCE", "git+" + REPO_URL)
    print(f"Installing dpo-grpo {{PACKAGE_VERSION}} from {{source}} ...")
    requirement = f"dpo-grpo[{{extras}}] @ {{source}}"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", requirement],
        capture_output=True,
        text=True,
    )
    log = pip.stdout + pip.stderr
    if pip.returncode != 0:
        if any(s in log for s in NO_NETWORK):
            print("Set-up failed: no network. Check the connection and run it again.")
        elif any(s in log for s in NOT_PUBLIC):
            print(
                f"Set-up failed: {{REPO_URL}} is not a public repository. A fork? Set "
                "REPO_URL above to your fork's URL (or DPO_GRPO_SOURCE to a pip "
                "source) and run this cell again."
            )
        else:
            last_lines = "\\n".join(log.strip().splitlines()[-5:])
            print("Set-up failed: pip failed. Its last lines:\\n" + last_lines)
    else:
        importlib.invalidate_caches()
if _installed_version() is not None:
    from dpo_grpo.notebook import runtime_summary

    print(runtime_summary(suggest_gpu={gpu}))"""


def repository_url() -> str:
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return cfg["repository"]["url"].rstrip("/")


def package_version() -> str:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return re.search(r'^version\s*=\s*"([^"]+)"', text, re.M).group(1)


def needs_torch(stem: str) -> bool:
    """Whether ``book/<stem>.ipynb`` has a code cell, besides its set-up cell, that uses
    torch."""
    path = ROOT / "book" / f"{stem}.ipynb"
    if not path.exists():
        raise ValueError(f"stem: no notebook book/{stem}.ipynb")
    cells = nbformat.read(path, as_version=4).cells
    return any(
        USES_TORCH.search(c.source)
        for c in cells
        if c.cell_type == "code" and not c.source.startswith(OLD_MARKERS)
    )


def setup_cell_source(stem: str) -> str:
    return TEMPLATE.format(
        marker=MARKER,
        url=repository_url(),
        version=package_version(),
        gpu=stem in GPU_CHAPTERS,
        needs_torch=needs_torch(stem),
    )


def label_solutions(nb) -> bool:
    """Give every solution cell of ``nb`` its toggle's label (:data:`SOLUTION_PROMPTS`);
    return True if a cell changed."""
    changed = False
    for cell in nb.cells:
        if SOLUTION_TAG in cell.metadata.get("tags", []):
            mystnb = cell.metadata.setdefault("mystnb", {})
            if any(mystnb.get(k) != v for k, v in SOLUTION_PROMPTS.items()):
                mystnb.update(SOLUTION_PROMPTS)
                changed = True
    return changed


def sync(path: Path) -> bool:
    """Make the first cell of ``path`` the set-up cell and label its solution cells'
    toggles; return True if the file changed."""
    nb = nbformat.read(path, as_version=4)
    source = setup_cell_source(path.stem)
    labelled = label_solutions(nb)
    first_code = next(
        (i for i, c in enumerate(nb.cells) if c.cell_type == "code"), None
    )
    if first_code is not None and nb.cells[first_code].source.startswith(OLD_MARKERS):
        cell = nb.cells[first_code]
        unchanged = cell.source == source and cell.metadata.get("tags") == TAGS
        if unchanged and not labelled:
            return False
        cell.source = source
        cell.metadata["tags"] = list(TAGS)
    else:
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["tags"] = list(TAGS)
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
