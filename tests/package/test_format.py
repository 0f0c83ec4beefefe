"""One formatter for all code (ruff, pinned in requirements.txt, configured in pyproject.toml): 88 columns, the width
of the site's code column. The notebooks' code cells must also fit it where the formatter cannot wrap (long strings
and comments); the built pages are checked as a reader sees them in tests/book/test_built_pages.py."""

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


def test_notebook_code_fits_88_columns():
    notebooks = sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "book").glob("*.ipynb")
    )
    run = _ruff("check", "--select", "E501", "--output-format", "concise", *notebooks)
    assert run.returncode == 0, "code lines over 88 characters:\n" + run.stdout[-3000:]
