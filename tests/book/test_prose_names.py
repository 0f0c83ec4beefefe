"""Names and paths in the prose exist. A function or file that was renamed or moved
otherwise leaves the prose pointing at nothing, while the page still builds and runs.

- A code span such as `costs.cost_explorer()` whose head is a name the page imports
  from the package (``from dpo_grpo.chapters import costs``, ``import dpo_grpo as dg``)
  names an attribute that exists.
- A code span that is a path into this repository (it starts with one of its top-level
  folders, or with ``dpo_grpo/``, the package as installed) names a file or folder that
  exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from testing_support import ImportAliases, parse_cell, resolve_dotted

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
#: `a.b.c` or `a.b.c(...)` in a Markdown cell (single backticks)
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
DOTTED = re.compile(r"([A-Za-z_]\w*)((?:\.[A-Za-z_]\w*)+)(?:\(.*\))?")
#: the names every page may use without importing them
ALWAYS = {"dg": "dpo_grpo", "dpo_grpo": "dpo_grpo"}
#: a file name (`grpo_checks.py`, `ds_config.json`): a path, not an attribute
FILE_NAME = re.compile(r"[\w./-]+\.(?:py|ipynb|json|md|yml|yaml|toml|txt|sh|bib|po)")
#: a path pattern, not a path: `book/NN_name.ipynb`, `exercises/chNN.py`
PATTERN = re.compile(r"NN|[*<>]")
#: a path into the repository: its first folder, then the rest
REPO_PATH = re.compile(
    r"(book|code|tests|scripts|bench|i18n|dpo_grpo|\.ci|\.github)/[\w./-]*"
)


def unresolved_names(nb) -> list[str]:
    """The code spans of ``nb``'s Markdown whose head is a name the page binds to the
    package (or ``dg``) and whose attribute does not exist."""
    names = ImportAliases()
    names.alias |= ALWAYS
    for cell in nb.cells:
        tree = parse_cell(cell.source) if cell.cell_type == "code" else None
        if tree is not None:
            names.learn(tree)
    bad = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for span in SPAN.findall(cell.source):
            m = DOTTED.fullmatch(span.strip())
            if not m or FILE_NAME.fullmatch(span.strip()):
                continue
            path = names.path(m.group(1) + m.group(2))
            in_package = path is not None and path.split(".")[0] == "dpo_grpo"
            if in_package and resolve_dotted(path) is None:
                bad.append(span)
    return bad


def markdown_of(path: Path) -> str:
    if path.suffix == ".md":
        return path.read_text(encoding="utf-8")
    nb = nbformat.read(path, as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def missing_paths(markdown: str, root: Path = ROOT) -> list[str]:
    """The code spans of ``markdown`` that are paths into the repository (``dpo_grpo/``
    read under ``code/``) and name nothing there."""
    bad = []
    for span in SPAN.findall(markdown):
        if REPO_PATH.fullmatch(span.strip()) and not PATTERN.search(span):
            path = span.strip()
            if path.startswith("dpo_grpo/"):
                path = "code/" + path
            if not (root / path).exists():
                bad.append(span)
    return bad


def test_the_check_finds_a_name_that_moved():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "%matplotlib inline\nfrom dpo_grpo.chapters import costs"
        ),
        nbformat.v4.new_markdown_cell(
            "`costs.Workload`, `costs.memory_saving(w)`, `dg.grpo_loss`, "
            "`numpy.nothing`, `costs.cost_explorer()` and `dg.trl_exact.nowhere`"
        ),
    ]
    assert unresolved_names(nb) == ["costs.cost_explorer()", "dg.trl_exact.nowhere"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_package_names_in_the_prose_exist(path):
    assert unresolved_names(nbformat.read(path, as_version=4)) == [], path.name


def test_the_check_finds_a_path_that_moved(tmp_path):
    (tmp_path / "code" / "dpo_grpo" / "data").mkdir(parents=True)
    (tmp_path / "tests").mkdir()
    markdown = (
        "`dpo_grpo/data/`, `tests/`, `ds_config.json`, `exercises/chNN.py`, "
        "`tests/fixtures/`, `code/dpo_grpo/data/x.json`, `book/NN_name.ipynb`"
    )
    assert missing_paths(markdown, tmp_path) == [
        "tests/fixtures/",
        "code/dpo_grpo/data/x.json",
    ]


PAGES = NOTEBOOKS + sorted((ROOT / "book").glob("*.md")) + [ROOT / "README.md"]


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_paths_in_the_prose_exist(path):
    assert missing_paths(markdown_of(path)) == [], path.name
