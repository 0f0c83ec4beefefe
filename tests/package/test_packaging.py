"""The student package: what the wheel holds, what it declares, and that `make test`
runs against it."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

import dpo_grpo

ROOT = Path(__file__).resolve().parents[2]


def test_make_test_imports_the_installed_wheel_not_the_checkout():
    if os.environ.get("DPO_GRPO_FROM_WHEEL") != "1":
        pytest.skip("run through `make test`, which installs the wheel first")
    here = Path(dpo_grpo.__file__).resolve()
    assert not here.is_relative_to(ROOT / "code"), (
        f"dpo_grpo imported from the checkout: {here}"
    )


@pytest.fixture(scope="module")
def wheel(package_wheel):
    """The names in the wheel of this checkout (built from a copy, so that parallel
    workers do not share build/) and its METADATA."""
    with zipfile.ZipFile(package_wheel) as zf:
        return zf.namelist(), zf.read(
            next(n for n in zf.namelist() if n.endswith("METADATA"))
        ).decode()


def test_wheel_ships_the_data_the_chapters_read(wheel):
    names, _ = wheel
    for folder in ("trl_fixtures", "bench_results", "i18n", "verl_fixtures"):
        shipped = {
            n
            for n in names
            if n.startswith(f"dpo_grpo/data/{folder}/") and n.endswith(".json")
        }
        on_disk = {
            f"dpo_grpo/data/{folder}/{p.name}"
            for p in (ROOT / "code/dpo_grpo/data" / folder).glob("*.json")
        }
        assert on_disk and shipped == on_disk


def test_wheel_holds_no_build_or_bench_tooling(wheel):
    names, _ = wheel
    assert not [
        n
        for n in names
        if n.startswith(("dpo_grpo_book", "bench/", "scripts/", "tests/"))
    ]
    assert {
        n.split("/")[1] for n in names if n.startswith("dpo_grpo/") and n.count("/") > 1
    } >= {
        "reference",
        "trl_exact",
        "torch_ops",
        "lab",
        "interactive",
        "chapters",
        "exercises",
        "data",
    }


def test_wheel_declares_its_extras(wheel):
    _, metadata = wheel
    extras = {
        line.split(": ")[1]
        for line in metadata.splitlines()
        if line.startswith("Provides-Extra")
    }
    assert {"torch", "widgets", "notebooks", "book", "dev"} <= extras
    assert "Requires-Dist: numpy" in metadata
