"""Colab in CI: every reader notebook runs as a Colab reader would meet it.

Once per session: build the wheel of this checkout (the ``package_wheel`` fixture), make
fresh venvs with Colab's package versions (``tests/colab/requirements-colab.txt``) and a
fake ``google.colab`` module imported by ``sitecustomize`` (so the set-up branch and
plotly's Colab renderer are taken), and build the reader edition
(``scripts/reader_edition.py``; glue values from the test run's one book build, the
``built_book`` fixture). Then each reader notebook is copied alone into an empty folder
and executed in a kernel of such a venv, with no repository on the path; its set-up cell
installs the package from the wheel (``DPO_GRPO_SOURCE``). A notebook fails on any cell
error, any MyST left in its Markdown, and any output saying "not found", "no results",
"Set-up failed" or showing a traceback.

Two Pythons, as Colab has moved from 3.11 to 3.12: the chapters whose cells use torch
run on Python 3.11 with the CPU build of the pinned torch (the only torch wheel on this
machine's disk; Colab ships a CUDA build); the others run on Python 3.12 without torch,
so their set-up cell must not ask for it (``python3.12`` from the machine; where it is
missing they run on 3.11 and ``test_python_312_is_simulated`` is skipped with the
reason). The wheel's dependencies must already be in the venv (``PIP_NO_INDEX``), except
on the TRL scale-out page, whose own cell pip-installs transformers and TRL from PyPI as
it does in Colab (``ONLINE``); it runs last.

Marker ``colab``: the one place the reader edition is executed (the book build and
``--nbmake`` execute the originals); deselect with ``-m "not colab"``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
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
STEMS = sorted(
    (p.stem for p in (ROOT / "book").glob("*.ipynb")), key=lambda s: (s in ONLINE, s)
)


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
def colab(tmp_path_factory, package_wheel, colab_pythons, built_book):
    base = tmp_path_factory.mktemp("colab")
    jupyter = base / "jupyter"
    for version, python in colab_pythons.items():
        _kernelspec(jupyter, f"colab-{version}", python, package_wheel, online=False)
    _kernelspec(
        jupyter, "colab-3.11-online", colab_pythons["3.11"], package_wheel, online=True
    )
    out = base / "reader"
    reader_edition.build(out, built_book / "jupyter_execute", execute=False)
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(jupyter) + (os.pathsep + old if old else "")
    yield {"pythons": colab_pythons, "reader": out}
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
    assert {kernel_for(s) for s in STEMS} == {
        "colab-3.11",
        "colab-3.12",
        "colab-3.11-online",
    }
    assert (
        subprocess.run(
            [colab_pythons["3.12"], "-c", "import torch"], capture_output=True
        ).returncode
        != 0
    )


@pytest.mark.parametrize("stem", STEMS)
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
