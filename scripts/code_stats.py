"""How much code there is, by layer, and how much of what the chapters teach a reader
sees on the pages (issue #44): ``python scripts/code_stats.py [--json]``.

It reads the repository's sources only (no build needed):

1. **Lines of Python by layer**: every ``*.py`` file of each sub-package of
   ``code/dpo_grpo`` (``reference``, ``trl_exact``, ``torch_ops``, ``lab``,
   ``chapters``, ``interactive``, ``exercises``, ``data``), the package's top-level
   modules, ``bench/`` and ``scripts/``, each as its physical lines (``wc -l``) and its
   non-blank lines. The total "package + bench + scripts" leaves out the generated
   self-check key, ``code/dpo_grpo/exercises/_selfcheck_key.py``.
2. **Teaching code shown on the pages**: in the code cells of ``book/*.ipynb``, the
   functions and classes

   * printed by ``show_source(X)`` (``dpo_grpo.notebook.show_source``) in a cell whose
     output the reader sees (not tagged ``remove-cell``/``remove-output``, which the
     site drops, nor ``hide-output``/``hide-cell``, collapsed behind a toggle; the
     call's own input is usually ``remove-input``): ``X`` is read from the call's
     argument expression, resolved through the notebook's own imports (every code
     cell's, hidden ones included) and imported with ``code/`` first on ``sys.path``,
     so the listing is the repository's source;
   * defined on the page: each ``def``/``class`` statement, not inside another
     definition, of a cell whose input the reader sees (not tagged ``remove-cell``/
     ``remove-input``, nor ``hide-input``/``hide-cell``: exercise solutions and set-up
     are collapsed).

   Each counts its **non-blank lines** (decorators, docstring and comments included),
   once per page.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import re
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "code" / "dpo_grpo"
LAYERS = (
    "reference",
    "trl_exact",
    "torch_ops",
    "lab",
    "chapters",
    "interactive",
    "exercises",
    "data",
)
#: generated, not written: left out of every count
GENERATED = ("code/dpo_grpo/exercises/_selfcheck_key.py",)
#: code cells whose source the reader does not see on the page without a click
HIDDEN_INPUT = frozenset({"remove-cell", "remove-input", "hide-input", "hide-cell"})
#: code cells whose output (a ``show_source`` listing) the reader does not see
HIDDEN_OUTPUT = frozenset({"remove-cell", "remove-output", "hide-output", "hide-cell"})


# --------------------------------------------------------------------------------------
# 1. Lines by layer
# --------------------------------------------------------------------------------------


def _python_files(root: Path, folder: Path, recursive: bool = True) -> list[Path]:
    found = folder.rglob("*.py") if recursive else folder.glob("*.py")
    return sorted(
        p
        for p in found
        if p.relative_to(root).as_posix() not in GENERATED
        and "__pycache__" not in p.parts
    )


def _line_counts(files: list[Path]) -> tuple[int, int]:
    lines = nonblank = 0
    for path in files:
        text = path.read_text(encoding="utf-8").splitlines()
        lines += len(text)
        nonblank += sum(1 for line in text if line.strip())
    return lines, nonblank


def lines_by_layer(root: Path = ROOT) -> dict:
    """``{"layers": [{"layer", "files", "lines", "nonblank"}, ...], "total": {...}}``:
    the package's layers, its top-level modules, ``bench/``, ``scripts/``, and their
    total (the generated self-check key left out)."""
    package = root / "code" / "dpo_grpo"
    groups = [
        (f"dpo_grpo/{name}", _python_files(root, package / name)) for name in LAYERS
    ]
    groups.append(
        ("dpo_grpo top-level modules", _python_files(root, package, recursive=False))
    )
    groups.append(("bench/", _python_files(root, root / "bench")))
    groups.append(("scripts/", _python_files(root, root / "scripts")))
    rows = []
    for name, files in groups:
        lines, nonblank = _line_counts(files)
        rows.append(
            {"layer": name, "files": len(files), "lines": lines, "nonblank": nonblank}
        )
    total = {
        "layer": "package + bench + scripts",
        "files": sum(r["files"] for r in rows),
        "lines": sum(r["lines"] for r in rows),
        "nonblank": sum(r["nonblank"] for r in rows),
    }
    return {"layers": rows, "total": total}


# --------------------------------------------------------------------------------------
# 2. Teaching code shown on the pages
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shown:
    """One function or class a page shows: ``how`` is ``show_source`` (a package
    object, ``name`` its dotted path) or ``defined`` (a definition in a code cell)."""

    page: str
    how: str
    name: str
    lines: int


def _parse(source: str):
    """A code cell's syntax tree, its IPython magics and shell lines read as ``pass``
    (line numbers kept); None for a cell that is not Python."""
    try:
        return ast.parse(
            re.sub(r"^([ \t]*)[%!].*$", r"\1pass", source, flags=re.MULTILINE)
        )
    except SyntaxError:
        return None


def dotted_name(node) -> str | None:
    """``a.b.c`` for an ``ast`` Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _learn_imports(tree, alias: dict[str, str]) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    alias[a.asname] = a.name
                else:
                    head = a.name.split(".")[0]
                    alias[head] = head
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                alias[a.asname or a.name] = f"{node.module}.{a.name}"


def resolve_dotted(path: str):
    """The object at a dotted path (``dpo_grpo.reference.dpo.dpo_loss``), or None."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _nonblank(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def _definitions(tree):
    """The ``def``/``class`` statements of a cell that are not inside another
    definition (those inside ``if``/``for``/``with``/``try`` blocks included)."""
    stack = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            stack.extend(reversed(getattr(node, field, []) or []))


def _cells(notebook: dict) -> list[tuple[str, bool, bool]]:
    """``(source, input shown, output shown)`` of each code cell."""
    out = []
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(source)
        tags = set(cell.get("metadata", {}).get("tags", []))
        out.append((source, not tags & HIDDEN_INPUT, not tags & HIDDEN_OUTPUT))
    return out


def shown_on_page(path: Path, warnings: list[str] | None = None) -> list[Shown]:
    """What one notebook page shows of the code it teaches (see the module's
    docstring), in the order of the page; an unresolvable ``show_source`` argument is
    reported in ``warnings``."""
    warnings = [] if warnings is None else warnings
    page = path.stem
    notebook = json.loads(path.read_text(encoding="utf-8"))
    alias: dict[str, str] = {}
    found: dict[tuple[str, str], Shown] = {}
    for source, input_shown, output_shown in _cells(notebook):
        tree = _parse(source)
        if tree is None:
            continue
        _learn_imports(tree, alias)
        lines = source.splitlines()
        for node in _definitions(tree) if input_shown else ():
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            text = "\n".join(lines[first - 1 : node.end_lineno])
            key = ("defined", node.name)
            found.setdefault(key, Shown(page, "defined", node.name, _nonblank(text)))
        for node in ast.walk(tree) if output_shown else ():
            if not (isinstance(node, ast.Call) and node.args):
                continue
            callee = dotted_name(node.func)
            if callee is None or callee.rsplit(".", 1)[-1] != "show_source":
                continue
            argument = dotted_name(node.args[0])
            head = (argument or "").partition(".")[0]
            target = alias[head] + argument[len(head) :] if head in alias else None
            obj = resolve_dotted(target) if target else None
            if obj is None:
                warnings.append(
                    f"{page}: show_source({ast.unparse(node.args[0])}) not resolved"
                )
                continue
            obj = inspect.unwrap(obj)
            name = f"{obj.__module__}.{obj.__qualname__}"
            text = inspect.getsource(obj)
            found.setdefault(
                ("show_source", name), Shown(page, "show_source", name, _nonblank(text))
            )
    return list(found.values())


def shown_code(root: Path = ROOT) -> dict:
    """``{"pages": {stem: [Shown as dict, ...]}, "functions", "lines", "by_how",
    "warnings"}`` over ``book/*.ipynb``, the package imported from ``root/code``."""
    code = str(root / "code")
    added = (root / "code").is_dir() and sys.path[:1] != [code]
    if added:
        sys.path.insert(0, code)
    warnings: list[str] = []
    pages = {}
    try:
        for path in sorted((root / "book").glob("*.ipynb")):
            shown = shown_on_page(path, warnings)
            if shown:
                pages[path.stem] = [asdict(s) for s in shown]
    finally:
        if added:
            sys.path.remove(code)
    every = [s for items in pages.values() for s in items]
    by_how = {}
    for how in ("show_source", "defined"):
        items = [s for s in every if s["how"] == how]
        by_how[how] = {"functions": len(items), "lines": sum(s["lines"] for s in items)}
    return {
        "pages": pages,
        "functions": len(every),
        "lines": sum(s["lines"] for s in every),
        "by_how": by_how,
        "warnings": warnings,
    }


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------


def _commit(root: Path) -> str | None:
    try:
        run = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return run.stdout.strip() or None


def report(root: Path = ROOT) -> dict:
    return {
        "commit": _commit(root),
        "lines_by_layer": lines_by_layer(root),
        "shown": shown_code(root),
    }


def format_report(data: dict) -> str:
    out = [f"Lines of Python by layer (commit {data['commit'] or 'unknown'})", ""]
    layers = data["lines_by_layer"]
    out.append(f"{'layer':<30} {'files':>5} {'lines':>7} {'non-blank':>9}")
    for r in [*layers["layers"], layers["total"]]:
        out.append(
            f"{r['layer']:<30} {r['files']:>5} {r['lines']:>7,} {r['nonblank']:>9,}"
        )
    shown = data["shown"]
    out += [
        "",
        (
            f"Teaching code shown on the pages: {shown['functions']} functions and "
            f"classes, {shown['lines']:,} non-blank lines"
        ),
    ]
    for how, label in (
        ("show_source", "printed by show_source"),
        ("defined", "defined in the page's code cells"),
    ):
        n = shown["by_how"][how]
        out.append(f"  {label}: {n['functions']} ({n['lines']:,} lines)")
    for page, items in shown["pages"].items():
        total = sum(s["lines"] for s in items)
        out += ["", f"{page}: {len(items)} ({total} lines)"]
        for s in items:
            out.append(f"  {s['lines']:>4}  {s['how']:<11}  {s['name']}")
    for warning in shown["warnings"]:
        out.append(f"warning: {warning}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="write JSON to stdout")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    data = report(args.root)
    if args.json:
        json.dump(data, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(format_report(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
