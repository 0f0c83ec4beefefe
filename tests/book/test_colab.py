"""Colab in CI: a reader notebook runs as a Colab reader would meet it.

Once per session: build the wheel of this checkout (the ``package_wheel`` fixture), make
fresh venvs with Colab's package versions (``tests/colab/requirements-colab.txt``) and a
fake ``google.colab`` module imported by ``sitecustomize`` (so the set-up branch and
plotly's Colab renderer are taken), and take the reader edition
(``scripts/reader_edition.py``; glue values from the test run's one book build: the
``reader_notebooks`` fixture of tests/conftest.py). Then each notebook of ``EXECUTED``
is copied alone into an empty folder and executed in a kernel of such a venv, with no
repository on the path; its set-up cell installs the package from the wheel
(``DPO_GRPO_SOURCE``). A notebook fails on any cell error, any MyST left in its
Markdown, and any output saying "not found", "no results", "Set-up failed" or showing a
traceback.

Two Pythons, as Colab has moved from 3.11 to 3.12: the chapters whose cells use torch
run on Python 3.11 with the CPU build of the pinned torch (the only torch wheel on this
machine's disk; Colab ships a CUDA build); the others run on Python 3.12 without torch,
so their set-up cell must not ask for it (``python3.12`` from the machine; where it is
missing they run on 3.11 and ``test_python_312_is_simulated`` is skipped with the
reason). The wheel's dependencies must already be in the venv (``PIP_NO_INDEX``), except
on the TRL scale-out page, whose own cell pip-installs transformers and TRL from PyPI as
it does in Colab (``ONLINE``); it runs last.

Which notebooks run here. Every chapter is executed once per edition, by the book
build. Executing each a third time here made this module take 217 CPU-s on a 2-core VM
(measured with four of the 20 notebooks stopping early at an import error: their full
runs take longer), against 134 CPU-s with the three below (2026-12-05, the build
reused; the two Colab venvs are 63 of them). Here run the notebooks of ``EXECUTED``, one
per way a reader's session installs and runs the package: a NumPy chapter on Python
3.12 without torch, a torch chapter on Python 3.11 offline, and the TRL page with its
own install from PyPI (``test_python_312_is_simulated`` and
``test_the_executed_notebooks_stand_for_what_they_were_chosen_for`` fail if a
chapter's edit moves one of them off its runtime or takes away what it was chosen
for). What the other chapters' runs here checked is checked as follows:

- every cell of every chapter runs without error: the book build,
  tests/book/test_executed.py (in ``make test`` the build's kernels take the package
  from the wheel, which the Makefile puts first on their path);
- no failure words in any output: ``test_no_executed_output_says_it_failed`` below,
  on the executed build of both editions;
- no MyST left, with the build's real glue values:
  ``test_no_myst_in_any_reader_notebook`` below (and tests/book/test_built_pages.py,
  test_reader_edition.py for every construct); solution cells run silently:
  test_reader_edition.py (``test_every_chapter_converts_with_no_myst_left`` checks each
  starts with ``%%capture``, ``test_run_all_prints_no_solution`` runs that in a kernel);
- the set-up cell: every chapter's is the one template (tests/book/test_notebooks.py,
  ``test_first_code_cell_is_the_colab_setup_rendered_from_config``), whose branches
  tests/book/test_setup_cell.py runs, and which runs here on both runtimes;
- Colab's versions: ``test_every_chapters_imports_resolve_with_colabs_versions`` below
  imports what every chapter imports, from the wheel, in the venv of its runtime; the
  explorables page runs cell by cell with Colab's kernel packages in
  tests/browser/test_live_widgets.py (``lab3-colab-kernel``).

Not checked any more: a call that fails only at run time with Colab's older packages
(NumPy 2.0, plotly 5, ipywidgets 7, IPython 7) in a chapter not in ``EXECUTED``.

Marker ``colab``: the one place the reader edition is executed (the book build and
``--nbmake`` execute the originals); deselect with ``-m "not colab"``.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
import reader_edition  # scripts/ (tests/conftest.py puts it on sys.path)
import sync_colab_cells

from testing_support import read_pins, run_checked

nbclient = pytest.importorskip("nbclient")
pytestmark = pytest.mark.colab

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "tests" / "colab" / "requirements-colab.txt"
PINS = read_pins(REQUIREMENTS)
#: Pages whose Colab branch installs packages Colab does not ship, from PyPI: their
#: kernel may use the index.
ONLINE = {
    "lab_trl_scale_out": (
        "pip-installs transformers==5.24.0 and trl==1.16.0 (and their dependencies)"
    )
}
STEMS = sorted(p.stem for p in (ROOT / "book").glob("*.ipynb"))
#: The reader notebooks executed here (see the module's docstring), each for the way a
#: reader's session installs and runs the package that it stands for; the online page
#: runs last.
EXECUTED = {
    "07_papers": (
        "NumPy only, on Python 3.12 without torch, offline: figures, self-checks and "
        "solution cells"
    ),
    "05_production": "torch, on Python 3.11 with the CPU torch wheel, offline",
    **ONLINE,
}


def _python_312() -> str | None:
    """A working Python 3.12: on PATH, or one that pyenv installed (whose shim may not
    be active)."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    for candidate in [
        shutil.which("python3.12"),
        *sorted(pyenv.glob("versions/3.12*/bin/python3.12")),
    ]:
        if (
            candidate
            and subprocess.run(
                [
                    candidate,
                    "-c",
                    "import venv, sys; assert sys.version_info[:2] == (3, 12)",
                ],
                capture_output=True,
            ).returncode
            == 0
        ):
            return str(candidate)
    return None


PYTHON_312 = _python_312()
BAD_OUTPUT = re.compile(
    r"not found|no results|no benchmark results|set-up failed|traceback", re.I
)

FAKE_COLAB = '''"""Stands in for Colab's google.colab in tests/book/test_colab.py (only its presence matters)."""
'''  # noqa: E501


def _fake_google_colab(python: Path) -> None:
    """Put a fake ``google.colab`` in the venv of ``python``, imported at start-up as
    Colab does."""
    site = Path(
        run_checked(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )
    (site / "google" / "colab").mkdir(parents=True)
    (site / "google" / "colab" / "__init__.py").write_text(FAKE_COLAB)
    (site / "sitecustomize.py").write_text(
        "import google.colab  # noqa: F401 (Colab imports it at start-up)\n"
    )


#: Colab's packages that only the torch chapters use: the venv without torch leaves them
#: out.
WITH_TORCH = {"torch", "transformers", "tokenizers"}


def _colab_venv(fresh_venv, python: str, *, torch: bool) -> Path:
    """A venv of ``python`` with Colab's pins (without torch unless ``torch``) and a
    fake google.colab."""
    pins = [
        f"{name}=={version}"
        for name, version in PINS.items()
        if torch or name not in WITH_TORCH
    ]
    return fresh_venv("colab", *pins, python=python, setup=_fake_google_colab)


def _kernelspec(
    jupyter: Path, name: str, python: Path, wheel: Path, *, online: bool
) -> None:
    env = {"PYTHONPATH": "", "PLOTLY_RENDERER": "", "DPO_GRPO_SOURCE": wheel.as_uri()}
    if not online:
        env["PIP_NO_INDEX"] = "1"  # the wheel's dependencies must already be there
    (jupyter / "kernels" / name).mkdir(parents=True)
    (jupyter / "kernels" / name / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [
                    str(python),
                    "-m",
                    "ipykernel_launcher",
                    "-f",
                    "{connection_file}",
                ],
                "display_name": f"Colab (simulated, {name})",
                "language": "python",
                "env": env,
            }
        )
    )


@functools.cache  # needs_torch reads the notebook
def kernel_for(stem: str) -> str:
    if stem in ONLINE:
        return "colab-3.11-online"
    return (
        "colab-3.11"
        if sync_colab_cells.needs_torch(stem) or PYTHON_312 is None
        else "colab-3.12"
    )


@pytest.fixture(scope="session")
def colab_pythons(fresh_venv):
    """The Colab venvs by Python version (they need no book build: built early, on any
    xdist worker)."""
    pythons = {"3.11": _colab_venv(fresh_venv, sys.executable, torch=True)}
    if PYTHON_312:
        pythons["3.12"] = _colab_venv(fresh_venv, PYTHON_312, torch=False)
    return pythons


@pytest.fixture(scope="session")
def colab(tmp_path_factory, package_wheel, colab_pythons, reader_notebooks):
    base = tmp_path_factory.mktemp("colab")
    jupyter = base / "jupyter"
    for version, python in colab_pythons.items():
        _kernelspec(jupyter, f"colab-{version}", python, package_wheel, online=False)
    _kernelspec(
        jupyter, "colab-3.11-online", colab_pythons["3.11"], package_wheel, online=True
    )
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(jupyter) + (os.pathsep + old if old else "")
    yield {"pythons": colab_pythons, "reader": reader_notebooks}
    if old is None:
        os.environ.pop("JUPYTER_PATH", None)
    else:
        os.environ["JUPYTER_PATH"] = old


def _texts(cell):
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            yield out.get("text", "")
        elif out.get("output_type") == "error":
            yield "Traceback: " + out.get("ename", "") + ": " + out.get("evalue", "")
        else:
            for mime in ("text/plain", "text/markdown", "text/html"):
                value = out.get("data", {}).get(mime)
                if value:
                    yield "".join(value) if isinstance(value, list) else value


@pytest.mark.builds_venv
def test_the_colab_venvs_keep_colab_versions(colab_pythons):
    for version, python in colab_pythons.items():
        got = run_checked(
            [
                python,
                "-c",
                "import ipywidgets, plotly, platform; print(ipywidgets.__version__, "
                "plotly.__version__, platform.python_version())",
            ]
        ).stdout.split()
        assert got[:2] == [PINS["ipywidgets"], PINS["plotly"]] and got[2].startswith(
            version
        ), got


@pytest.mark.builds_venv
def test_python_312_is_simulated(colab_pythons):
    if PYTHON_312 is None:
        pytest.skip(
            "python3.12 is not installed here: the NumPy chapters ran on Python 3.11 "
            "only"
        )
    # each kernel runs a notebook here, and each notebook on the runtime it was chosen
    # for (a chapter that starts using torch moves to 3.11: choose another)
    assert {s: kernel_for(s) for s in EXECUTED} == {
        "07_papers": "colab-3.12",
        "05_production": "colab-3.11",
        "lab_trl_scale_out": "colab-3.11-online",
    }
    assert ONLINE.keys() <= EXECUTED.keys() <= set(STEMS)
    assert {kernel_for(s) for s in STEMS} == {kernel_for(s) for s in EXECUTED}
    assert (
        subprocess.run(
            [colab_pythons["3.12"], "-c", "import torch"], capture_output=True
        ).returncode
        != 0
    )


@pytest.mark.parametrize("stem", sorted(EXECUTED, key=lambda s: (s in ONLINE, s)))
def test_reader_notebook_runs_alone_in_colab(colab, stem, tmp_path):
    content = (
        tmp_path / "content"
    )  # Colab's working folder: the notebook and nothing else
    content.mkdir()
    shutil.copy(colab["reader"] / f"{stem}.ipynb", content / f"{stem}.ipynb")
    nb = nbformat.read(content / f"{stem}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            assert reader_edition.leftover_myst(cell.source) == [], (
                f"{stem}: MyST left: {cell.source[:300]}"
            )
    client = nbclient.NotebookClient(
        nb,
        timeout=600,
        kernel_name=kernel_for(stem),
        resources={"metadata": {"path": str(content)}},
    )
    client.execute()
    setup = next(c for c in nb.cells if c.cell_type == "code")
    setup_text = "".join(_texts(setup))
    python_version = kernel_for(stem).split("-")[1]  # colab-<version>[-online]
    assert f"dpo_grpo on Python {python_version}" in setup_text, setup_text
    # 'Run all' runs the solution cells silently: their output is the answers
    shown = [
        i
        for i, cell in enumerate(nb.cells)
        if "solution" in cell.metadata.get("tags", []) and cell.outputs
    ]
    assert shown == [], f"{stem}: the solution cells {shown} show their output"
    for i, cell in enumerate(nb.cells):
        for text in _texts(cell):
            m = BAD_OUTPUT.search(text)
            assert m is None, (
                f"{stem}, cell {i}: {m.group(0)!r} in output: "
                f"{text[max(0, m.start() - 200) : m.end() + 200]}"
            )
    assert sorted(p.name for p in content.iterdir() if not p.name.startswith(".")) >= [
        f"{stem}.ipynb"
    ]


def test_the_executed_notebooks_stand_for_what_they_were_chosen_for():
    """The NumPy chapter has solution cells and a self-check to run silently and a
    figure to draw; the torch chapter uses torch; the online page runs here."""
    cells = nbformat.read(ROOT / "book" / "07_papers.ipynb", as_version=4).cells
    code = [c.source for c in cells if c.cell_type == "code"]
    assert not sync_colab_cells.needs_torch("07_papers")
    assert any("solution" in c.metadata.get("tags", []) for c in cells)
    assert any("from dpo_grpo.exercises import check" in s for s in code)
    assert any("plt." in s or "fig" in s for s in code)
    assert sync_colab_cells.needs_torch("05_production")
    assert "05_production" not in ONLINE
    assert ONLINE.keys() <= EXECUTED.keys()


@pytest.mark.parametrize("stem", STEMS)
def test_no_myst_in_any_reader_notebook(reader_notebooks, stem):
    """Every reader notebook, with the build's glue values, as the Colab run checks the
    ones it executes."""
    nb = nbformat.read(reader_notebooks / f"{stem}.ipynb", as_version=4)
    left = [
        (i, reader_edition.leftover_myst(cell.source))
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "markdown" and reader_edition.leftover_myst(cell.source)
    ]
    assert left == [], f"{stem}: MyST left (cell, constructs): {left}"


#: edition -> its executed notebooks below the build folder
#: (tests/book/test_executed.py)
BUILT = {"en": Path("jupyter_execute"), "zh": Path("zh") / "_build" / "jupyter_execute"}


@pytest.mark.parametrize("stem", STEMS)
@pytest.mark.parametrize("edition", sorted(BUILT))
def test_no_executed_output_says_it_failed(built_book, edition, stem):
    """What the Colab run asks of its notebooks' outputs, asked of every chapter's
    outputs in the build (where every chapter runs, the package from the wheel in
    ``make test``): no "not found", "no results", "Set-up failed" or traceback."""
    path = built_book / BUILT[edition] / "book" / f"{stem}.ipynb"
    assert path.is_file(), f"the {edition} build did not execute {stem}: {path}"
    nb = nbformat.read(path, as_version=4)
    bad = [
        f"cell {i}: {text[max(0, m.start() - 200) : m.end() + 200]!r}"
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        for text in _texts(cell)
        if (m := BAD_OUTPUT.search(text))
    ]
    assert bad == [], f"{edition}/{stem}: " + "\n".join(bad)


def _imports(stem: str) -> set[tuple[str, str | None]]:
    """``(module, name)`` for each absolute import in the chapter's code cells (``name``
    None for ``import module``), its set-up cell aside (it imports what it installs)."""
    from IPython.core.inputtransformer2 import TransformerManager

    found = set()
    nb = nbformat.read(ROOT / "book" / f"{stem}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code" or "colab-setup" in cell.metadata.get("tags", []):
            continue
        for node in ast.walk(
            ast.parse(TransformerManager().transform_cell(cell.source))
        ):
            if isinstance(node, ast.Import):
                found |= {(a.name, None) for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                found |= {(node.module, a.name) for a in node.names}
    return found


IMPORT_PROBE = """
import importlib, json, sys
failed = []
for module, name in json.loads(sys.argv[1]):
    try:
        m = importlib.import_module(module)
        if name is not None and not hasattr(m, name):
            importlib.import_module(module + "." + name)
    except Exception as e:
        failed.append(f"{module} {name or ''}: {type(e).__name__}: {e}")
print(json.dumps(failed))
"""


def test_every_chapters_imports_resolve_with_colabs_versions(
    colab_pythons, package_wheel, tmp_path
):
    """What every chapter imports (the package from the wheel, IPython, ipywidgets,
    matplotlib, ...) imports in the Colab venv of the chapter's runtime, with Colab's
    versions: the chapters not executed here meet those versions this far. (The
    online page is executed here in full; what it installs itself is not in the
    venv.)"""
    site = tmp_path / "wheel"  # the wheel unpacked, as pip would install it
    with zipfile.ZipFile(package_wheel) as wheel:
        wheel.extractall(site)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PLOTLY_RENDERER")
    }
    env["PYTHONPATH"] = str(site)
    probed = 0
    for version, python in colab_pythons.items():
        stems = [
            s for s in STEMS if s not in ONLINE and kernel_for(s) == f"colab-{version}"
        ]
        wanted = sorted(
            {i for s in stems for i in _imports(s)}, key=lambda i: (i[0], i[1] or "")
        )
        assert ("dpo_grpo", None) in wanted or any(
            m.startswith("dpo_grpo") for m, _ in wanted
        ), (version, stems)
        got = run_checked(
            [python, "-c", IMPORT_PROBE, json.dumps(wanted)], env=env, cwd=tmp_path
        )
        assert json.loads(got.stdout.strip().splitlines()[-1]) == [], (version, stems)
        probed += len(stems)
    assert probed == len(STEMS) - len(ONLINE)
