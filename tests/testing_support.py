"""Helpers the tests import by name (``from testing_support import run_checked``): tests/conftest.py puts tests/ on
``sys.path`` (pytest runs in importlib mode, so test files may share a basename across the layer folders)."""

import os
import subprocess
from pathlib import Path

import pytest

#: Headless Chromium for the browser tests (tests/browser/): Debian's package, which .ci/run installs, started with
#: the flags that keep it from reaching the network by itself (no QUIC, component updates, sync or background requests).
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def skip_without_chromium():
    """Skip the calling test module when Chromium or Playwright is missing; return ``playwright.sync_api``."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"Chromium is not installed at {CHROMIUM} (.ci/run installs it)",
            allow_module_level=True,
        )
    return pytest.importorskip("playwright.sync_api")


def run_checked(cmd, **kw) -> subprocess.CompletedProcess:
    """Run ``cmd`` without this session's ``PYTHONPATH`` (``make test`` puts the checkout's wheel there, and a pip in
    another venv would take it for an installed package); on failure raise with the tail of its output."""
    kw.setdefault("env", {k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if result.returncode:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
        )
    return result


def read_pins(path) -> dict[str, str]:
    """``{name: version}`` of the ``name==version`` lines of a requirements file."""
    return dict(
        line.split("==")
        for line in Path(path).read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
