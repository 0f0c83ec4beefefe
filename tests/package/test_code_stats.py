"""scripts/code_stats.py: lines by layer, and the teaching code shown on the pages
(issue #44), counted on small fixture repositories in ``tmp_path``."""

from __future__ import annotations

import inspect
import json

import code_stats
import nbformat
from dpo_grpo.reference import dpo


def _notebook(path, cells):
    """A notebook of ``(source, tags)`` code cells and Markdown strings."""
    nb = nbformat.v4.new_notebook()
    for cell in cells:
        if isinstance(cell, str):
            nb.cells.append(nbformat.v4.new_markdown_cell(cell))
        else:
            source, tags = cell
            nb.cells.append(
                nbformat.v4.new_code_cell(source, metadata={"tags": list(tags)})
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def _nonblank(text):
    return sum(1 for line in text.splitlines() if line.strip())


def test_lines_by_layer_counts_each_layer_and_leaves_out_the_key(tmp_path):
    package = tmp_path / "code" / "dpo_grpo"
    files = {
        "reference/dpo.py": "a = 1\n\nb = 2\n",
        "chapters/x.py": "c = 3\n",
        "chapters/sub/y.py": "d = 4\ne = 5\n",
        "exercises/_selfcheck_key.py": "KEY = 1\n" * 50,
        "notebook.py": "f = 6\n\n\n",
    }
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "b.py").write_text("g = 7\n")
    (tmp_path / "scripts").mkdir()
    rows = code_stats.lines_by_layer(tmp_path)
    by = {r["layer"]: r for r in rows["layers"]}
    assert by["dpo_grpo/reference"] == {
        "layer": "dpo_grpo/reference",
        "files": 1,
        "lines": 3,
        "nonblank": 2,
    }
    assert by["dpo_grpo/chapters"]["lines"] == 3  # sub-folders included
    assert by["dpo_grpo/exercises"]["files"] == 0  # the generated key left out
    assert by["dpo_grpo top-level modules"]["lines"] == 3
    assert by["dpo_grpo top-level modules"]["nonblank"] == 1
    assert by["bench/"]["lines"] == 1 and by["scripts/"]["lines"] == 0
    assert rows["total"]["lines"] == 3 + 3 + 3 + 1
    assert rows["total"]["files"] == 5


def test_shown_code_counts_listings_and_visible_definitions(tmp_path):
    page = tmp_path / "book" / "01_page.ipynb"
    _notebook(
        page,
        [
            ("from dpo_grpo.notebook import show_source\nimport dpo_grpo as dg", []),
            ("from dpo_grpo.reference import dpo as d", ["remove-cell"]),
            "The loss:",
            ("show_source(d.dpo_loss)", ["remove-input"]),  # the listing is shown
            ("show_source(dg.reference.dpo.log_sigmoid)", ["remove-cell"]),
            (
                (
                    "%matplotlib inline\n@staticmethod\ndef shown(x):\n\n"
                    "    return x\n\n\nclass Box:\n    pass\n\nshown(1)"
                ),
                [],
            ),
            ("def hidden_answer():\n    return 42", ["hide-cell", "solution"]),
            ("def dropped():\n    return 0", ["remove-input"]),
            ("if True:\n    def inner_block(y):\n        return y", []),
            ("show_source(d.dpo_loss)", ["remove-input"]),  # once per page
            ("show_source(nowhere.f)", []),
        ],
    )
    warnings = []
    shown = code_stats.shown_on_page(page, warnings)
    got = {(s.how, s.name): s.lines for s in shown}
    assert got == {
        ("show_source", "dpo_grpo.reference.dpo.dpo_loss"): _nonblank(
            inspect.getsource(dpo.dpo_loss)
        ),
        ("defined", "shown"): 3,  # decorator, def, return; blank lines left out
        ("defined", "Box"): 2,
        ("defined", "inner_block"): 2,
    }
    assert warnings == ["01_page: show_source(nowhere.f) not resolved"]


def test_shown_code_totals_over_the_pages(tmp_path, capsys):
    _notebook(tmp_path / "book" / "a.ipynb", [("def f():\n    return 1", [])])
    _notebook(tmp_path / "book" / "b.ipynb", [("x = 1", [])])
    _notebook(tmp_path / "book" / "c.ipynb", [("class C:\n    a = 1\n    b = 2", [])])
    data = code_stats.shown_code(tmp_path)
    assert list(data["pages"]) == ["a", "c"]
    assert (data["functions"], data["lines"]) == (2, 5)
    assert data["by_how"]["defined"] == {"functions": 2, "lines": 5}
    assert data["by_how"]["show_source"] == {"functions": 0, "lines": 0}
    (tmp_path / "scripts").mkdir()
    assert code_stats.main(["--json", "--root", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["shown"]["lines"] == 5
    assert code_stats.main(["--root", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "2 functions and classes, 5 non-blank lines" in text
    assert "c: 1 (3 lines)" in text


def test_the_book_shows_its_teaching_code():
    """The repository's own count: issue #44's target, three times the 142 lines the
    chapters printed, holds; every show_source of the book resolves."""
    data = code_stats.shown_code()
    assert data["warnings"] == []
    assert data["lines"] >= 426
