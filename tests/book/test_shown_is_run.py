"""What a chapter shows is what it runs: after ``show_source(f)``, every later call of a
function named like ``f`` calls ``f`` itself, unless the call names another module
explicitly (``dg.trl_exact.grpo_loss``, ``torch_ops. grpo_loss``: the TRL-exact layer
and the fused kernel are called by their layer's name). A bare name or the top-level
package (``dg.grpo_loss``) must be the function the page printed.

The calls are resolved statically, from the notebook's own imports, against the
installed package."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import nbformat
import pytest
from testing_support import ImportAliases, dotted_name, parse_cell, resolve_dotted

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
PACKAGE = "dpo_grpo"


def violations(cells: list[str]) -> list[str]:
    """Calls, after a ``show_source(f)``, of a function named like f that is not f and
    whose qualifier is the bare name or the top-level package."""
    names, shown, found = ImportAliases(), {}, []
    for index, source in enumerate(cells):
        tree = parse_cell(source)
        if tree is None:
            continue
        names.learn(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and dotted_name(node.func)):
                continue
            dotted = dotted_name(node.func)
            if dotted == "show_source" and node.args and dotted_name(node.args[0]):
                target = names.path(dotted_name(node.args[0]))
                obj = resolve_dotted(target) if target else None
                if obj is not None:
                    shown[getattr(obj, "__name__", "")] = (inspect.unwrap(obj), target)
                continue
            name = dotted.rsplit(".", 1)[-1]
            if name not in shown:
                continue
            path = names.path(dotted)
            called = resolve_dotted(path) if path else None
            f, f_path = shown[name]
            if called is None or inspect.unwrap(called) is f:
                continue
            qualifier = path.rsplit(".", 1)[0] if "." in dotted else None
            if qualifier is None or qualifier == PACKAGE:
                found.append(
                    f"cell {index}: {dotted}(...) is {path}, but the page shows "
                    f"{f_path}"
                )
    return found


def _code_cells(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code"]


def test_a_top_level_alias_of_another_layer_is_caught():
    cells = [
        "import dpo_grpo as dg\nfrom dpo_grpo.reference import dpo\n"
        "from dpo_grpo.notebook import show_source",
        "show_source(dpo.dpo_loss)",
        "loss, logits = dpo.dpo_loss([0.], [0.], [0.], [0.])",
        "import dpo_grpo.trl_exact\n"
        "out = dg.trl_exact.dpo_loss([0.], [0.], [0.], [0.])",
        "from dpo_grpo.trl_exact import dpo_loss\n"
        "out = dpo_loss([0.], [0.], [0.], [0.])",
    ]
    found = violations(cells)
    assert len(found) == 1 and "cell 4: dpo_loss(...)" in found[0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_chapter_runs_the_function_it_shows(path):
    assert violations(_code_cells(path)) == []
