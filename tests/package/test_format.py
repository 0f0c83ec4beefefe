"""One formatter for all code (ruff, pinned in requirements.txt, configured in
pyproject.toml): 88 columns, the width of the site's code column. The notebooks' code
cells must also fit it where the formatter cannot wrap (long strings and comments); the
built pages are checked as a reader sees them in tests/book/test_built_pages.py."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORMATTED = ["code", "scripts", "bench", "tests", "book"]


def _ruff(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True
    )


def test_code_is_formatted():
    run = _ruff("format", "--check", *FORMATTED)
    assert run.returncode == 0, (
        "run `.venv/bin/ruff format "
        + " ".join(FORMATTED)
        + "`:\n"
        + run.stdout[-3000:]
    )


#: Code held to 88 columns in docstrings, comments and strings too (``ruff format`` does
#: not wrap those). The list grows as the other layers are wrapped; once all are, the
#: test can check ``FORMATTED``.
WRAPPED = [
    "code/dpo_grpo/reference",
    "code/dpo_grpo/trl_exact",
    "code/dpo_grpo/torch_ops",
    "code/dpo_grpo/exercises",
    "code/dpo_grpo/data/*.py",
    "code/dpo_grpo/_validation.py",
    "code/dpo_grpo/notebook.py",
    "code/dpo_grpo/__init__.py",
    "code/dpo_grpo/interactive",
    "code/dpo_grpo/tables.py",
    "bench/*.py",
    "scripts/*.py",
    "book/_ext/**/*.py",
    "tests/reference",
    "tests/trl_exact",
    "code/dpo_grpo/lab",
    "code/dpo_grpo/i18n.py",
    "tests/conftest.py",
    "tests/testing_support.py",
    "tests/torch_support.py",
    "tests/data",
    "tests/package",
    "tests/chapters",
    "code/dpo_grpo/chapters",
    "tests/interactive",
    "tests/lab",
    "tests/exercises",
    "tests/torch_ops",
    "tests/book",
    "tests/browser",
]


def test_wrapped_code_fits_88_columns():
    paths = sorted(
        str(p.relative_to(ROOT)) for pattern in WRAPPED for p in ROOT.glob(pattern)
    )
    assert len(paths) >= len(WRAPPED)
    run = _ruff("check", "--select", "E501", "--output-format", "concise", *paths)
    assert run.returncode == 0, (
        "lines over 88 characters (wrap docstrings and comments by hand, split long "
        "strings into adjacent literals):\n" + run.stdout[-3000:]
    )


def test_notebook_code_fits_88_columns():
    notebooks = sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "book").glob("*.ipynb")
    )
    run = _ruff("check", "--select", "E501", "--output-format", "concise", *notebooks)
    assert run.returncode == 0, "code lines over 88 characters:\n" + run.stdout[-3000:]
