"""Shared test settings and fixtures.

``scripts/`` (the build tooling: reader edition, set-up cells) is put on ``sys.path`` so
tests import its modules by name (``import reader_edition``); it is not part of the
installed package. So is ``tests/`` itself, for the helpers in ``testing_support.py``.
The tests mirror the package's layers (``tests/<layer>/test_<module>.py``); pytest runs
in importlib mode (pytest.ini), so two layers may each have a ``test_grpo.py``.
"""

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))

from testing_support import nbmake_runs, run_checked  # noqa: E402  (used below)

# derandomize: Hypothesis draws the same examples on every run (a seed derived from each
# test), so a run's verdict does not depend on the day's random draws
settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=100, deadline=None, derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_collection_modifyitems(config, items):
    """Order the run for two pytest-xdist workers: first the tests that only build a
    venv (marked ``builds_venv``, shared through ``fresh_venv``), then the tests that
    need nothing built, last the tests that read the book build (``built_book``). The
    first worker to reach the last group builds the book (in parallel,
    scripts/build_book.py) while the other finishes its unit tests; then both read the
    one build."""

    def rank(item):
        if item.get_closest_marker("builds_venv") is not None:
            return 0
        return 2 if "built_book" in item.fixturenames else 1

    items.sort(key=rank)  # stable: each group keeps its order


def pytest_terminal_summary(terminalreporter):
    """After the run: what the book build's one nbmake run executed (its JUnit report,
    ``_build/nbmake-report.xml``), so CI's log shows every chapter executed once."""
    report = ROOT / "_build" / "nbmake-report.xml"
    if not report.is_file():
        return
    runs = nbmake_runs(report)
    editions = sorted({key.split("/")[0] for key in runs})
    outcomes = [outcome for results in runs.values() for outcome in results]
    terminalreporter.write_line(
        f"the book build's nbmake run ({report.relative_to(ROOT)}): {len(runs)} "
        f"notebooks ({', '.join(editions)}), {len(outcomes)} executions, "
        f"{outcomes.count('passed')} passed"
    )


@pytest.fixture(autouse=True)
def _matplotlib_settings_restored():
    """A test that draws in Chinese puts the CJK font first in matplotlib's global
    ``font.sans-serif`` (as a notebook should); the next test on the same worker starts
    from the settings the one before it found."""
    import matplotlib

    with matplotlib.rc_context():
        yield


@pytest.fixture(autouse=True)
def _logging_switch_restored():
    """A script imported by a test may turn logging off for the whole process
    (``logging.disable``, as scripts/make_trl_fixtures.py does): the next test on the
    same worker starts with logging as the one before it found it."""
    import logging

    disabled = logging.root.manager.disable
    yield
    logging.disable(disabled)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny random Qwen2 saved to disk, as TRL's trainers load a model: (path,
    tokenizer). Built locally, no download (needs transformers)."""
    pytest.importorskip("transformers")
    from dpo_grpo.lab import hf

    path = tmp_path_factory.mktemp("tiny-qwen2")
    model, tok = hf.tiny_random_model(0)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path, tok


@pytest.fixture(scope="session")
def package_wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, as a reader's pip builds it (from a copy: setuptools
    writes build/ beside it)."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "code",
        src / "code",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    run_checked(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            base,
            src,
        ]
    )
    return next(base.glob("dpo_grpo-*.whl"))


@pytest.fixture(scope="session")
def fresh_venv(tmp_path_factory):
    """A factory: ``fresh_venv(name, *pip_args, python=..., setup=None)`` makes a new
    venv of ``python`` (default: this one's), pip-installs ``pip_args``, calls
    ``setup(venv_python)`` and returns the venv's python.

    One venv per arguments and test session, shared by the pytest-xdist workers: the
    first worker to ask builds it under a file lock, the others wait for it and reuse
    it.
    """
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "venvs"
    shared.mkdir(exist_ok=True)

    def make(name: str, *pip_args, python=sys.executable, setup=None) -> Path:
        key = repr(
            (str(python), [str(a) for a in pip_args], setup and setup.__qualname__)
        )
        venv = shared / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
        venv_python = venv / "bin" / "python"
        with open(f"{venv}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not (venv / "ready").exists():
                shutil.rmtree(venv, ignore_errors=True)  # a worker that failed half-way
                run_checked([python, "-m", "venv", venv])
                if pip_args:
                    run_checked(
                        [
                            venv_python,
                            "-m",
                            "pip",
                            "install",
                            "-q",
                            "--disable-pip-version-check",
                            # modules compile on first import: compiling all of torch at
                            # install time took 20 s against 6 s
                            "--no-compile",
                            *pip_args,
                        ]
                    )
                if setup is not None:
                    setup(venv_python)
                (venv / "ready").touch()
        return venv_python

    return make


# --------------------------------------------------------------------------------------
# The built book: one build per test run, shared by every test and worker that reads it
# (a file lock)
# --------------------------------------------------------------------------------------

BUILD = ROOT / "_build"


def _book_sources():
    # i18n/ and the generator: the Chinese edition that `make book` builds next to the
    # English one
    for pattern in (
        "book/**/*",
        "code/dpo_grpo/**/*.py",
        "i18n/**/*",
        "scripts/zh_edition.py",
        "scripts/build_book.py",
        "scripts/reader_edition.py",
    ):
        yield from (
            p
            for p in ROOT.glob(pattern)
            if p.is_file() and ".ipynb_checkpoints" not in p.parts
        )
    for name in ("_config.yml", "_toc.yml", "package-lock.json"):
        yield ROOT / name


def book_is_stale(page: str = "book/explorables.html") -> bool:
    """Whether ``_build/html`` or the Chinese edition in ``_build/html/zh`` is missing
    or older than any source."""
    newest = max(p.stat().st_mtime for p in _book_sources())
    return any(
        not built.exists() or newest > built.stat().st_mtime
        for built in (BUILD / "html" / page, BUILD / "html" / "zh" / page)
    )


@pytest.fixture(scope="session")
def built_book() -> Path:
    """``_build/`` after ``make book`` (run here when the build is missing or stale;
    otherwise reused): the English site in ``html/``, the Chinese one in ``html/zh/``
    with its executed notebooks in ``zh/_build/jupyter_execute``.

    One build per test run: the pytest-xdist workers take a file lock, so the first
    builds and the others wait for it and read the same build.
    ``DPO_GRPO_REUSE_BUILD=1`` takes an existing build as it is (while editing the tests
    of the built pages)."""
    BUILD.mkdir(exist_ok=True)
    with open(BUILD / ".book-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        reuse = os.environ.get("DPO_GRPO_REUSE_BUILD") and (BUILD / "html").exists()
        if book_is_stale() and not reuse:
            run = subprocess.run(
                ["make", "book"], cwd=ROOT, capture_output=True, text=True
            )
            if run.returncode != 0:
                if book_is_stale():
                    pytest.fail(
                        "make book failed:\n" + run.stdout[-3000:] + run.stderr[-3000:]
                    )
                warnings.warn(
                    "make book reported errors (the pages were written):\n"
                    + (run.stdout + run.stderr)[-1500:]
                )
    return BUILD


@pytest.fixture(scope="session")
def reader_notebooks(built_book, tmp_path_factory) -> Path:
    """The reader edition (``make notebooks``), made from the executed build's
    numbers."""
    import reader_edition

    out = tmp_path_factory.mktemp("reader-edition")
    reader_edition.build(out, built_book / "jupyter_execute", execute=False)
    return out
