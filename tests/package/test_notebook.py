"""dpo_grpo.notebook: glue outside a build, and the source listings chapters print under
their equations."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path

import dpo_grpo as dg
import pytest
from dpo_grpo.notebook import SourceListing, glue, show_source
from dpo_grpo.reference import grpo
from testing_support import ImportAliases, parse_cell, resolve_dotted

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "book").glob("*.ipynb"))


def test_show_source_is_the_installed_source():
    listing = show_source(grpo.grpo_loss)
    assert listing.text == inspect.getsource(grpo.grpo_loss)
    md = listing._repr_markdown_()
    assert md.startswith(
        "`dpo_grpo.reference.grpo.grpo_loss` (dpo_grpo/reference/grpo.py, lines "
    )
    assert "```python\ndef grpo_loss(" in md and md.rstrip().endswith("```")
    first, last = (int(x) for x in listing.where.split("lines ")[1].split("–"))
    assert last - first + 1 == len(listing.text.splitlines())


def test_show_source_rejects_non_functions():
    with pytest.raises(TypeError, match="fn must be a function"):
        show_source(3)
    assert isinstance(show_source(dg.BanditRun._advance), SourceListing)


def test_glue_returns_plain_values_outside_a_build():
    import numpy as np

    assert glue("k", np.float64(1.5)) == 1.5 and type(glue("k", np.int64(2))) is int
    with pytest.raises(TypeError, match="name"):
        glue("", 1)


@pytest.mark.parametrize("display", [False, True])
@pytest.mark.parametrize("value", [1.5, 7, "GRPO", [0.1, 0.2]])
def test_glue_publishes_myst_nbs_bundle(value, display, monkeypatch):
    """The bundle glue() displays is the one myst-nb's own glue displays (the build's
    {glue} roles read it), without importing Sphinx into every kernel."""
    import dpo_grpo.notebook
    import IPython.display

    myst_glue = pytest.importorskip("myst_nb.ext.glue")
    shown = []

    def record(*args, **kwargs):
        shown.append((args, kwargs))

    monkeypatch.setattr(myst_glue, "ipy_display", record)
    monkeypatch.setattr(IPython.display, "display", record)
    myst_glue.glue("k", value, display)
    assert glue("k", value, display) == value
    assert len(shown) == 2 and shown[0] == shown[1]
    assert dpo_grpo.notebook.GLUE_PREFIX == myst_glue.GLUE_PREFIX


def _listings():
    """(notebook, expression, the other code cells, the object the expression names
    through the notebook's own imports) for every ``show_source(...)`` cell of the
    book."""
    for path in CHAPTERS:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        aliases = ImportAliases()
        for src in code:
            tree = parse_cell(src)
            if tree is not None:
                aliases.learn(tree)
        for src in code:
            for node in ast.walk(ast.parse(src)) if "show_source(" in src else ():
                if (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "id", None) == "show_source"
                ):
                    expr = ast.unparse(node.args[0])
                    dotted = aliases.path(expr)
                    yield (
                        path.name,
                        expr,
                        [s for s in code if s is not src],
                        resolve_dotted(dotted) if dotted else None,
                    )


LISTINGS = list(_listings())


def test_chapters_3_to_5_show_their_code():
    shown = {(nb, expr) for nb, expr, _, _ in LISTINGS}
    assert {nb for nb, _ in shown} >= {
        "03_derivations.ipynb",
        "04_code.ipynb",
        "05_production.ipynb",
    }
    assert len([1 for nb, _ in shown if nb == "04_code.ipynb"]) >= 5


def _reachable(chapter_code: str) -> set:
    """Package functions the chapter's code can run: names it uses, then (transitively)
    the names in their sources, resolved in their modules; a class brings its
    methods."""
    import re
    import sys

    from dpo_grpo import reference

    def resolve(name, namespaces):
        return [ns[name] for ns in namespaces if name in ns]

    roots = [vars(dg)] + [
        vars(m)
        for n, m in sys.modules.items()
        if n.startswith(("dpo_grpo.reference.", "dpo_grpo.chapters."))
        or n == "dpo_grpo.torch_ops.readable"
    ]
    seen, todo = set(), []
    for name in set(re.findall(r"[A-Za-z_]\w*", chapter_code)):
        todo += resolve(name, roots)
    while todo:
        obj = todo.pop()
        if id(obj) in seen or not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        if not getattr(obj, "__module__", "").startswith("dpo_grpo"):
            continue
        seen.add(id(obj))
        members = list(vars(obj).values()) if inspect.isclass(obj) else []
        module_ns = vars(sys.modules[obj.__module__])
        try:
            source = inspect.getsource(obj)
        except (OSError, TypeError):  # made at run time (a NamedTuple's __new__)
            continue
        names = set(re.findall(r"[A-Za-z_]\w*", source))
        todo += members + [x for n in names for x in resolve(n, [module_ns])]
    # the reference layer is imported, so its modules are in sys.modules
    assert reference
    return seen


@pytest.mark.parametrize(
    "notebook, expr, others, fn",
    LISTINGS,
    ids=[f"{n}:{e}" for n, e, _, _ in LISTINGS],
)
def test_every_listing_is_a_reference_function_the_chapter_runs(
    notebook, expr, others, fn
):
    assert fn is not None, f"{notebook}: show_source({expr}) names nothing it imports"
    target = inspect.unwrap(fn)
    module = target.__module__
    if notebook == "lab_tiny_grpo.ipynb" and module.startswith("dpo_grpo.lab."):
        # the lab page reads the sweep's committed results: the method code it shows
        # is what a lab algorithm's step calls (run.ALGORITHM_STEPS), not page code
        from dpo_grpo.lab.run import ALGORITHM_STEPS

        steps = "\n".join(
            inspect.getsource(inspect.getmodule(cls))
            for cls in set(ALGORITHM_STEPS.values())
        ).replace(f"def {target.__name__}(", "")
        assert f"{target.__name__}(" in steps, (
            f"{notebook} shows {expr}, which no lab algorithm's step calls"
        )
        return
    # the readable layers, or a chapter's own experiment code (issue #44: a helper a
    # chapter is about, kept in the package because tests or other pages share it)
    assert module.startswith(("dpo_grpo.reference.", "dpo_grpo.chapters.")) or (
        module == "dpo_grpo.torch_ops.readable"
    ), f"{notebook} shows {expr} from {module}: listings show the readable layers"
    # the function shown is the one that runs: the chapter's other code cells reach it
    assert id(target) in _reachable("\n".join(others)), (
        f"{notebook} shows {expr} but never runs it"
    )


def test_reachability_is_not_vacuous():
    assert id(dg.reference.dpo.log_sigmoid) in _reachable(
        "dg.reference.dpo.dpo_loss(a, b, c, d)"
    )
    assert id(dg.reference.dpo.log_sigmoid) not in _reachable("dg.group_advantages(r)")
