"""Book hygiene: the TOC, notebook metadata, and no hand-typed outputs in committed
notebooks."""

from pathlib import Path

import nbformat
import pytest
import yaml
from testing_support import toc_files

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))


def test_toc_lists_existing_files_and_every_notebook():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = list(toc_files(toc))
    for f in files:
        assert any((ROOT / f).with_suffix(s).exists() for s in (".md", ".ipynb")), f
    for nb in NOTEBOOKS:
        assert str(nb.relative_to(ROOT).with_suffix("")) in files, (
            f"{nb.name} is not in _toc.yml"
        )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_metadata_and_no_committed_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs, (
                f"{path.name}: commit notebooks without outputs (the build executes "
                "them)"
            )


def test_first_code_cell_is_the_colab_setup_rendered_from_config():
    import sync_colab_cells as sync  # scripts/ (tests/conftest.py puts it on sys.path)

    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    for path in NOTEBOOKS:
        expected = sync.setup_cell_source(path.stem)
        assert (
            f'REPO_URL = "{url.rstrip("/")}"' in expected
            and expected.count("https://github.com") == 1
        )
        assert f"suggest_gpu={path.stem in sync.GPU_CHAPTERS}" in expected
        nb = nbformat.read(path, as_version=4)
        first = next(c for c in nb.cells if c.cell_type == "code")
        assert first.source == expected, f"{path.name}: run scripts/sync_colab_cells.py"


#: What a solution cell's toggle says on the site (myst-nb's cell-level settings, under
#: the cell metadata key ``mystnb``; its default says "Show code cell content").
SOLUTION_PROMPTS = {
    "code_prompt_show": "Show the solution",
    "code_prompt_hide": "Hide the solution",
}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_solution_toggle_says_it_is_a_solution(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if "solution" in cell.metadata.get("tags", []):
            assert cell.metadata.get("mystnb") == SOLUTION_PROMPTS, (
                f"{path.name}: run scripts/sync_colab_cells.py"
            )


def test_sync_labels_the_solution_toggles(tmp_path):
    import sync_colab_cells as sync

    nb = nbformat.read(ROOT / "book" / "04_code.ipynb", as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("mystnb", None)
    nbformat.write(nb, tmp_path / "04_code.ipynb")
    assert sync.sync(tmp_path / "04_code.ipynb")
    synced = nbformat.read(tmp_path / "04_code.ipynb", as_version=4)
    prompts = [
        c.metadata.get("mystnb")
        for c in synced.cells
        if "solution" in c.metadata.get("tags", [])
    ]
    assert prompts and all(p == SOLUTION_PROMPTS for p in prompts)
    others = [c for c in synced.cells if "solution" not in c.metadata.get("tags", [])]
    assert not [c.source[:80] for c in others if "mystnb" in c.metadata]
    assert not sync.sync(tmp_path / "04_code.ipynb")
