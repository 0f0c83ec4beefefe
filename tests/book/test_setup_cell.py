"""The set-up cell (scripts/sync_colab_cells.py renders it into every chapter): what it
runs and what it prints."""

import importlib.metadata
import importlib.util
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest

# imported here, not while the cell runs with find_spec faked
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
import sync_colab_cells as sync  # noqa: E402 (scripts/, put on sys.path by tests/conftest.py)
import zh_edition


def _run_cell(
    capsys,
    *,
    installed,
    pip_rc=0,
    pip_log="",
    has_torch=True,
    stem="04_code",
    env=None,
    zh=False,
):
    """Execute the rendered cell (the Chinese edition's with ``zh``) with the installed
    version, pip's result and torch's presence faked."""
    calls = []
    state = {"version": installed}

    def version(name):
        assert name == "dpo-grpo"
        if state["version"] is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return state["version"]

    def run(cmd, **kw):
        calls.append(cmd)
        if pip_rc == 0:
            state["version"] = sync.package_version()
        return SimpleNamespace(returncode=pip_rc, stdout="", stderr=pip_log)

    real_find_spec = importlib.util.find_spec
    # noqa: E731
    find_spec = lambda name, *a: (
        (object() if has_torch else None)
        if name == "torch"
        else real_find_spec(name, *a)
    )
    with (
        mock.patch.object(importlib.metadata, "version", version),
        mock.patch.object(subprocess, "run", run),
        mock.patch.object(importlib.util, "find_spec", find_spec),
        mock.patch.dict("os.environ", env or {}),
    ):
        source = sync.setup_cell_source(stem)
        if zh:
            source = zh_edition.setup_cell_zh(source)
        exec(compile(source, "<set-up>", "exec"), {})
    return calls, capsys.readouterr().out


def test_installed_at_this_version_skips_pip_and_prints_the_runtime(capsys):
    calls, out = _run_cell(capsys, installed=sync.package_version())
    assert calls == [] and "Installing" not in out
    assert (
        "dpo_grpo on Python" in out
        and "torch" in out
        and ("CPU" in out or "GPU: cuda" in out)
    )


def test_missing_package_is_installed_with_the_right_extras_and_source(capsys):
    calls, out = _run_cell(capsys, installed=None, has_torch=True)
    url = sync.repository_url()
    # Colab's torch/ipywidgets/plotly are kept
    assert calls[0][-1] == f"dpo-grpo[notebooks] @ git+{url}"
    assert "dpo_grpo on Python" in out
    calls, _ = _run_cell(
        capsys,
        installed="0.0.1",
        has_torch=False,
        env={"DPO_GRPO_SOURCE": "file:///w/x.whl"},
        stem="lab_tiny_grpo",
    )
    # torch only where it is missing and used
    assert calls[0][-1] == "dpo-grpo[notebooks,torch] @ file:///w/x.whl"
    calls, _ = _run_cell(capsys, installed=None, has_torch=False, stem="04_code")
    # a NumPy chapter does not pull in torch
    assert calls[0][-1] == f"dpo-grpo[notebooks] @ git+{url}"


def test_the_chinese_cell_installs_the_zh_extra_too(capsys):
    url = sync.repository_url()
    calls, _ = _run_cell(capsys, installed=None, has_torch=True, zh=True)
    assert calls[0][-1] == f"dpo-grpo[notebooks,zh] @ git+{url}"
    calls, _ = _run_cell(
        capsys, installed=None, has_torch=False, stem="lab_tiny_grpo", zh=True
    )
    assert calls[0][-1] == f"dpo-grpo[notebooks,zh,torch] @ git+{url}"
    # the extra brings the CJK font of the Chinese figures
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^zh = \[.*"mplfonts>=', pyproject, re.MULTILINE)


def test_the_chapters_that_use_torch_are_found_from_their_cells():
    torch_chapters = {
        p.stem for p in (ROOT / "book").glob("*.ipynb") if sync.needs_torch(p.stem)
    }
    assert {"05_production", "lab_tiny_grpo", "lab_trl_scale_out"} <= torch_chapters
    assert not torch_chapters & {
        "01_why",
        "02_minimal_understanding",
        "03_derivations",
        "04_code",
        "explorables",
    }
    assert sync.GPU_CHAPTERS <= torch_chapters
    with pytest.raises(ValueError, match="stem"):
        sync.needs_torch("no_such_chapter")


@pytest.mark.parametrize(
    "log, advice",
    [
        (
            "fatal: could not read Username for 'https://github.com': No such device",
            "A fork? Set REPO_URL",
        ),
        ("remote: Repository not found.", "A fork? Set REPO_URL"),
        ("fatal: unable to access: Could not resolve host: github.com", "no network"),
        (
            "ERROR: No matching distribution found for torch",
            "Its last lines:\nERROR: No matching distribution",
        ),
    ],
)
def test_a_failed_install_says_what_to_do_not_a_traceback(capsys, log, advice):
    calls, out = _run_cell(capsys, installed=None, pip_rc=1, pip_log=log)
    assert len(calls) == 1 and advice in out and "Traceback" not in out
    # nothing imported from a package that is not there
    assert "dpo_grpo on Python" not in out


def test_gpu_chapters_say_how_to_switch(capsys):
    from dpo_grpo.notebook import runtime_summary

    with mock.patch("torch.cuda.is_available", return_value=False):
        assert "Change runtime type" in runtime_summary(suggest_gpu=True)
        assert "Change runtime type" not in runtime_summary()
    with pytest.raises(TypeError, match="suggest_gpu"):
        runtime_summary(suggest_gpu="yes")
    assert sync.GPU_CHAPTERS <= {p.stem for p in (ROOT / "book").glob("*.ipynb")}
    assert "suggest_gpu=True" in sync.setup_cell_source("lab_tiny_grpo")
