"""The handouts: the student and graded editions, made from the reader edition (no
MyST, numbers filled in) with the solution cells removed, only notebooks in their
folder, by the package's light install alone; and every chapter's student edition still
executes from top to bottom."""

import ast
import importlib.util
import json
import re
import subprocess
from collections import defaultdict
from pathlib import Path

import nbformat
import pytest
import reader_edition  # scripts/ (tests/conftest.py puts it on sys.path)

from dpo_grpo.exercises.student import strip_solutions, write_student_edition
from testing_support import run_checked

#: The tests that run grading sandboxes share one xdist worker: each checks that no
#: sandbox process of its batch outlives grading, which a batch graded at the same time
#: on another worker would confuse.
pytestmark = pytest.mark.xdist_group("sandbox")

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
WITH_EXERCISES = [
    p
    for p in sorted(BOOK.glob("*.ipynb"))
    if any(
        "solution" in c.metadata.get("tags", [])
        for c in nbformat.read(p, as_version=4).cells
    )
]


def _bound_and_loaded(source: str) -> tuple[set[str], set[str]]:
    """The names a cell binds at top level, and the names it reads before binding them
    itself."""
    tree = ast.parse(re.sub(r"^([ \t]*)[%!].*$", r"\1pass", source, flags=re.M))
    bound, loaded = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) else loaded).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return bound, loaded - bound


def needs_a_removed_solution(book_nb) -> list[str]:
    """Kept cells of the student edition that read a name only a removed solution cell
    defined.

    The book build executed every kept cell in the full notebook
    (tests/book/test_executed.py), so the student edition runs top to bottom unless a
    kept cell depends on a solution cell it no longer has."""
    kept = strip_solutions(book_nb)
    kept_sources = [c.source for c in kept.cells if c.cell_type == "code"]
    book_sources = [c.source for c in book_nb.cells if c.cell_type == "code"]
    assert all(s in book_sources for s in kept_sources), (
        "strip_solutions changed a cell"
    )
    only_in_solutions, problems = set(), []
    for cell in book_nb.cells:
        if cell.cell_type != "code":
            continue
        bound, loaded = _bound_and_loaded(cell.source)
        if "solution" in cell.metadata.get("tags", []):
            only_in_solutions |= bound
            continue
        missing = loaded & only_in_solutions
        if missing:
            problems.append(f"{sorted(missing)} in: {cell.source[:120]!r}")
        only_in_solutions -= bound
    return problems


def test_a_cell_that_needs_a_solution_is_found():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("x = None\ncheck('01.1', x)"),
        nbformat.v4.new_code_cell(
            "def f():\n    return 1", metadata={"tags": ["solution"]}
        ),
        nbformat.v4.new_code_cell("print(f())"),
    ]
    assert needs_a_removed_solution(nb) == ["['f'] in: 'print(f())'"]
    nb.cells.insert(2, nbformat.v4.new_code_cell("def f():\n    return None"))
    assert needs_a_removed_solution(nb) == []


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.name)
def test_student_edition_runs_without_its_solutions(path):
    assert needs_a_removed_solution(nbformat.read(path, as_version=4)) == []


def test_check_loads_no_answer_key():
    """The student-facing check path imports no chapter registry (they hold the
    reference answers)."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom dpo_grpo.exercises import check\n"
        "print(check('04.1', 0.5).status, check('04.4', 'b').status)\n"
        "print(sorted(m for m in sys.modules if m.startswith('dpo_grpo.exercises.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    status, modules = out.stdout.splitlines()
    assert status == "incorrect correct"
    assert not [
        m
        for m in eval(modules)
        if m.rsplit(".", 1)[1].startswith(("ch", "labs", "grade"))
    ]


def test_hashed_key_matches_the_registry_and_holds_no_answer():
    """Every exercise has a key entry; the key's text holds no reference value
    (solutions, letters' answers)."""
    import numpy as np

    from dpo_grpo.exercises import EXERCISES
    from dpo_grpo.exercises._selfcheck_key import KEY
    from dpo_grpo.exercises.selfcheck import KEY_MODULE

    assert sorted(KEY) == sorted(EXERCISES), (
        "run: python -m dpo_grpo.exercises selfcheck-key --out " + KEY_MODULE
    )

    # the public test inputs of code exercises ("cases") are not answers; a
    # fingerprint's offset o = fmod(ref, 2**e) is smaller than its tolerance, so its
    # digits are the reference's digits below the tolerance, never its leading ones
    # (03.4's answer 1.0986 and a mistake's offset 1.0986e-05 agree by chance): scan
    # everything else
    def fingerprints(node):
        if isinstance(node, dict):
            if {"e", "o", "h"} <= set(node):
                yield node
            for x in node.values():
                yield from fingerprints(x)
        elif isinstance(node, list):
            for x in node:
                yield from fingerprints(x)

    def without_offsets(node):
        if isinstance(node, dict):
            return {f: without_offsets(x) for f, x in node.items() if f != "o"}
        if isinstance(node, list):
            return [without_offsets(x) for x in node]
        return node

    for fp in fingerprints(KEY):
        assert all(abs(o) < 2.0**e for o, e in zip(fp["o"], fp["e"])), fp
    text = json.dumps(
        {
            k: without_offsets({f: x for f, x in entry.items() if f != "cases"})
            for k, entry in KEY.items()
        }
    )
    for ex_id, ex in EXERCISES.items():
        assert KEY[ex_id]["kind"] == ex.kind
        if ex.kind == "numeric":
            for v in np.atleast_1d(np.asarray(ex.solution(), dtype=float)):
                shown = f"{v:.5g}"
                significant = shown.lstrip("-").replace(".", "").lstrip("0")
                if (
                    len(significant) >= 3
                ):  # "0.4" appears in any hint; "0.47265" would be a leak
                    assert shown not in text, (ex_id, v)
        if ex.kind == "choice":
            assert f'"answer": "{ex.reference}"' not in json.dumps(KEY[ex_id])


def test_self_check_is_never_looser_than_the_grader():
    """An answer the self-check accepts is within the grader's tolerance; one within an
    eighth of it passes."""
    import numpy as np

    from dpo_grpo.exercises import EXERCISES, check
    from dpo_grpo.exercises.core import close

    rng = np.random.default_rng(15)
    for ex_id, ex in EXERCISES.items():
        if ex.kind != "numeric":
            continue
        sol = np.asarray(ex.solution(), dtype=float)
        tol = ex.atol + ex.rtol * np.abs(sol)
        for scale in (0.12, 0.9, 1.5, 3.0):
            for _ in range(5):
                ans = sol + scale * tol * rng.uniform(-1, 1, sol.shape)
                passed = bool(check(ex_id, ans))
                assert not passed or close(ans, sol, ex.rtol, ex.atol), (ex_id, scale)
                if scale <= 0.12:
                    assert passed, (ex_id, scale)


def test_graded_edition_has_no_answer_oracle(standin_reader_edition, tmp_path):
    """The graded edition's check consults no key: a right and a wrong answer get the
    same reply, and the grader still marks the recorded answers."""
    import sys

    from dpo_grpo.exercises.grade import grade_path

    (out,) = write_student_edition(
        standin_reader_edition, tmp_path / "graded", graded=True
    )
    sources = [
        c.source
        for c in nbformat.read(out, as_version=4).cells
        if c.cell_type == "code"
    ]
    assert not [s for s in sources if "from dpo_grpo.exercises import check" in s]
    assert [s for s in sources if "from dpo_grpo.exercises.record import check" in s]
    code = (
        "import sys\nfrom dpo_grpo.exercises.record import check\n"
        "right, wrong = check('04.4', 'b'), check('04.4', 'a')\n"
        "print(right.status, wrong.status, repr(right) == repr(wrong))\n"
        "print(sorted(m for m in sys.modules if m.startswith('dpo_grpo.exercises.')))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    replies, modules = run.stdout.splitlines()
    assert replies == "recorded recorded True"
    assert not [
        m
        for m in eval(modules)
        if m.rsplit(".", 1)[1].startswith(("_selfcheck_key", "ch", "labs"))
    ]
    graded = nbformat.v4.new_notebook()
    graded.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    graded.cells = [
        nbformat.v4.new_code_cell(
            "from dpo_grpo.exercises.record import check\ncheck('04.4', 'b')"
        )
    ]
    nbformat.write(graded, tmp_path / "filled.ipynb")
    (g,) = grade_path(tmp_path / "filled.ipynb", chapter="04", timeout=60)
    assert g.verdicts["04.4"] == "correct", g.note


# --------------------------------------------------------------------------------------
# The handouts are made from the reader edition
# --------------------------------------------------------------------------------------


def _built_pages_checks():
    """tests/book/test_built_pages.py (its raw-MyST check: one definition of raw MyST
    for the site, the reader edition and the handouts)."""
    spec = importlib.util.spec_from_file_location(
        "built_pages_checks", ROOT / "tests" / "book" / "test_built_pages.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RAW_MYST = _built_pages_checks().raw_myst


_DOT_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJ"
    "RU5ErkJggg=="
)


@pytest.fixture(scope="module")
def standin_reader_edition(tmp_path_factory) -> Path:
    """The reader edition of chapter 4 without a book build: its glued values are
    stand-ins (the tests that use it are about code cells, which are the real ones)."""

    class AnyKey(defaultdict):
        def __contains__(self, key):
            return True

    out = tmp_path_factory.mktemp("standin-reader")
    ctx = reader_edition.Context(
        "04_code",
        # a glued figure needs an image: a 1x1 PNG stands in
        AnyKey(
            lambda: {"text/plain": "1.5", "text/markdown": "md", "image/png": _DOT_PNG}
        ),
        reader_edition.parse_bib((BOOK / "references.bib").read_text("utf-8")),
        reader_edition.collect_labels(),
        reader_edition.Urls.from_config(),
        notebooks={p.stem for p in BOOK.glob("*.ipynb")},
    )
    nb = reader_edition.convert_notebook(
        nbformat.read(BOOK / "04_code.ipynb", as_version=4), ctx
    )
    (out / "04_code.ipynb").write_text(json.dumps(nb, indent=1), encoding="utf-8")
    return out


def _cells(path: Path, kind: str) -> list[dict]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [c for c in nb["cells"] if c["cell_type"] == kind]


def _text(cell: dict) -> str:
    return "".join(cell["source"])


@pytest.mark.parametrize("graded", [False, True], ids=["student", "graded"])
def test_handouts_have_no_myst_and_no_solution(
    reader_notebooks, built_book, tmp_path, graded
):
    """From the reader edition: the numbers filled in (exercise 04.4 asks about the
    ratio itself), no MyST, no solution cell, no output; the graded edition imports the
    recording check, never the self-check's key; the folder holds notebooks only."""
    out = tmp_path / "handout"
    written = write_student_edition(reader_notebooks, out, graded=graded)
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in written)
    assert {p.name for p in written} == {p.name for p in BOOK.glob("*.ipynb")}
    for path in written:
        markdown = "\n".join(_text(c) for c in _cells(path, "markdown"))
        assert RAW_MYST(markdown) == [], path.name
        assert markdown.startswith(
            "Graded edition of" if graded else "Student edition of"
        ), path.name
        code = _cells(path, "code")
        assert not [
            _text(c)[:80]
            for c in code
            if "solution" in c["metadata"].get("tags", [])
            or _text(c).startswith("%%capture")
        ], path.name
        assert not [c for c in code if c["outputs"] or c["execution_count"]]
        imports = "\n".join(_text(c) for c in code)
        if graded:
            assert "from dpo_grpo.exercises import check" not in imports, path.name
        if path.stem == "04_code":
            assert "from dpo_grpo.exercises.record import check" in imports or (
                not graded and "from dpo_grpo.exercises import check" in imports
            )
            glue = reader_edition.load_glue(
                "04_code", built_book / "jupyter_execute", execute=False
            )
            ratio = reader_edition.glue_text(glue["ch04_ratio0"], ".4f")
            question = next(
                _text(c) for c in _cells(path, "markdown") if "04.4" in _text(c)
            )
            assert ratio in question, question[:400]


def test_a_folder_of_book_sources_is_refused(tmp_path):
    with pytest.raises(ValueError, match="run `make notebooks` first"):
        write_student_edition(BOOK, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_make_student_starts_from_the_reader_edition():
    """``make student`` writes the reader edition first (``make notebooks``) and removes
    the solutions from it, for both editions."""
    dry = subprocess.run(
        ["make", "-n", "student"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    handouts = [line for line in dry if "-m dpo_grpo.exercises student" in line]
    assert [line.split("student", 1)[1].split()[:2] for line in handouts] == [
        ["_build/notebooks", "_build/student"],
        ["_build/notebooks/zh", "_build/student/zh"],
    ], dry
    readers = [i for i, line in enumerate(dry) if "scripts/reader_edition.py" in line]
    assert len(readers) == 2 and max(readers) < dry.index(handouts[0]), dry


def test_handouts_need_only_the_light_install(
    fresh_venv, package_wheel, standin_reader_edition, tmp_path
):
    """``pip install dpo-grpo`` (numpy only) is enough to make both handouts; the
    command refuses the book's MyST sources and says what to run."""
    python = fresh_venv("light", package_wheel)
    installed = run_checked([python, "-m", "pip", "list", "--format=freeze"]).stdout
    packages = {line.split("==")[0].lower() for line in installed.split()}
    assert packages - {"pip", "setuptools"} == {"dpo-grpo", "numpy"}
    for flag, folder in (([], "student"), (["--graded"], "graded")):
        run_checked(
            [
                python,
                "-m",
                "dpo_grpo.exercises",
                "student",
                standin_reader_edition,
                tmp_path / folder,
                *flag,
            ],
            cwd=tmp_path,
        )
        assert [p.name for p in (tmp_path / folder).iterdir()] == ["04_code.ipynb"]
    imports = "\n".join(
        _text(c) for c in _cells(tmp_path / "graded" / "04_code.ipynb", "code")
    )
    assert "from dpo_grpo.exercises.record import check" in imports
    refused = subprocess.run(
        [python, "-m", "dpo_grpo.exercises", "student", BOOK, tmp_path / "from-book"],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert refused.returncode != 0
    assert "run `make notebooks` first" in refused.stderr, refused.stderr[-2000:]
