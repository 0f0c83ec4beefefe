"""Colab in CI: every reader notebook runs as a Colab reader would meet it.

Once per session: build the wheel of this repository (``pip wheel --no-deps .``), make a fresh venv with Colab's
package versions (``tests/colab/requirements-colab.txt``) and a fake ``google.colab`` module imported by
``sitecustomize`` (so the set-up branch and plotly's Colab renderer are taken), and build the reader edition
(``scripts/reader_edition.py``; glue values from ``_build/jupyter_execute`` when ``make book`` ran, else it executes
the chapters). Then each reader notebook is copied alone into an empty folder and executed in a kernel of that
venv, with no repository on the path; its set-up cell installs the package from the wheel
(``DPO_GRPO_SOURCE``). A notebook fails on any cell error, any MyST left in its Markdown, and any output saying
"not found", "no results", "Set-up failed" or showing a traceback.

Marker ``colab``: the one place the reader edition is executed (the book build and ``--nbmake`` execute the
originals); deselect with ``-m "not colab"``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

nbclient = pytest.importorskip("nbclient")
pytestmark = pytest.mark.colab

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "tests" / "colab" / "requirements-colab.txt"
#: Pages whose Colab branch installs packages Colab does not ship (the scale-out page pip-installs trl): the
#: simulation forbids the network mid-test (PIP_NO_INDEX), so they cannot run here as in Colab. Their code runs
#: under --nbmake and tests/test_lab_trl_scale.py; their reader edition is checked for MyST by
#: tests/test_reader_edition.py.
NEEDS_NETWORK_IN_COLAB = {"lab_trl_scale_out": "pip-installs trl==1.16.0 (and its pyarrow) from PyPI"}
STEMS = sorted(p.stem for p in (ROOT / "book").glob("*.ipynb") if p.stem not in NEEDS_NETWORK_IN_COLAB)
BAD_OUTPUT = re.compile(r"not found|no results|no benchmark results|set-up failed|traceback", re.I)

FAKE_COLAB = '''"""Stands in for Colab's google.colab in tests/test_colab.py (only its presence matters)."""
'''


def _run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode:
        raise AssertionError(f"{' '.join(map(str, cmd))} failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
    return result


def _load_reader_edition():
    import importlib.util

    spec = importlib.util.spec_from_file_location("reader_edition", ROOT / "scripts" / "reader_edition.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["reader_edition"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def colab(tmp_path_factory):
    base = tmp_path_factory.mktemp("colab")
    wheel_dir, src = base / "wheel", base / "src"  # built from a copy: setuptools writes build/ next to the source
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "code", src / "code", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheel_dir),
          str(src)])
    wheel = next(wheel_dir.glob("dpo_grpo-*.whl"))
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)])
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (site / "google" / "colab").mkdir(parents=True)
    (site / "google" / "colab" / "__init__.py").write_text(FAKE_COLAB)
    (site / "sitecustomize.py").write_text("import google.colab  # noqa: F401 (Colab imports it at start-up)\n")
    kernels = base / "jupyter" / "kernels" / "colab"
    kernels.mkdir(parents=True)
    env = {"PYTHONPATH": "", "PLOTLY_RENDERER": "", "DPO_GRPO_SOURCE": wheel.as_uri(),
           "PIP_NO_INDEX": "1"}  # the wheel's dependencies must already be there
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Colab (simulated)", "language": "python", "env": env}))
    reader = _load_reader_edition()
    out = base / "reader"
    reader.build(out, ROOT / "_build" / "jupyter_execute", execute=True)
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(base / "jupyter") + (os.pathsep + old if old else "")
    yield {"python": python, "reader": out, "base": base, "module": reader}
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


def test_the_colab_venv_keeps_colab_versions(colab):
    pins = dict(line.split("==") for line in REQUIREMENTS.read_text().splitlines() if "==" in line)
    got = _run([str(colab["python"]), "-c", "import ipywidgets, plotly; print(ipywidgets.__version__, "
                                            "plotly.__version__)"]).stdout.split()
    assert got == [pins["ipywidgets"], pins["plotly"]]


@pytest.mark.parametrize("stem", STEMS)
def test_reader_notebook_runs_alone_in_colab(colab, stem, tmp_path):
    content = tmp_path / "content"  # Colab's working folder: the notebook and nothing else
    content.mkdir()
    shutil.copy(colab["reader"] / f"{stem}.ipynb", content / f"{stem}.ipynb")
    nb = nbformat.read(content / f"{stem}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            assert colab["module"].leftover_myst(cell.source) == [], f"{stem}: MyST left: {cell.source[:300]}"
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="colab", resources={"metadata": {"path": str(content)}})
    client.execute()
    setup = next(c for c in nb.cells if c.cell_type == "code")
    setup_text = "".join(_texts(setup))
    assert "dpo_grpo on Python" in setup_text, setup_text
    for i, cell in enumerate(nb.cells):
        for text in _texts(cell):
            m = BAD_OUTPUT.search(text)
            assert m is None, f"{stem}, cell {i}: {m.group(0)!r} in output: {text[max(0, m.start() - 200):m.end() + 200]}"
    assert sorted(p.name for p in content.iterdir() if not p.name.startswith(".")) >= [f"{stem}.ipynb"]
