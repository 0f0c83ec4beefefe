"""Fixtures of the browser tests: the built site served from 127.0.0.1, and one
headless Chromium per test module."""

from __future__ import annotations

import pytest
from testing_support import (
    CHROMIUM,
    CHROMIUM_FLAGS,
    serve_directory,
    skip_without_chromium,
)


@pytest.fixture(scope="module")
def site(built_book):
    """The built site of both editions (``_build/html``, the Chinese one in ``zh/``),
    served for the module; its base URL."""
    with serve_directory(built_book / "html") as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, headless, driven by Playwright for the module (the test is
    skipped where either is missing)."""
    sync_api = skip_without_chromium()
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True
        )
        yield chromium
        chromium.close()
