"""Tests of dpo_grpo.lab.progress: when the lab's long runs draw a progress bar."""

import pytest

torch = pytest.importorskip("torch")

from dpo_grpo.lab import progress, run_lab  # noqa: E402


def test_the_environment_variable_wins_and_pytest_is_silent(monkeypatch):
    monkeypatch.delenv(progress.ENV, raising=False)
    assert progress.wanted() is False  # PYTEST_CURRENT_TEST is set
    assert progress.wanted(True) is True and progress.wanted(False) is False
    monkeypatch.setenv(progress.ENV, "1")
    assert progress.wanted() is True
    monkeypatch.setenv(progress.ENV, "0")
    assert progress.wanted() is False
    monkeypatch.setenv(progress.ENV, "maybe")
    with pytest.raises(ValueError, match=progress.ENV):
        progress.wanted()


def test_bar_draws_nothing_unless_wanted(capsys):
    silent = progress.bar(5, "x", False)
    silent.update(1)
    silent.set_postfix_str("y")
    silent.close()
    assert silent.disable and capsys.readouterr() == ("", "")
    tqdm = pytest.importorskip("tqdm")
    shown = progress.bar(5, "x", True)
    try:
        assert isinstance(shown, tqdm.tqdm) and shown.total == 5
    finally:
        shown.close()


def test_progress_must_be_a_bool():
    with pytest.raises(TypeError, match="progress"):
        progress.wanted("yes")
    with pytest.raises(TypeError, match="progress"):
        run_lab(algorithm="grpo", progress="yes")


class _Kernel:
    def __init__(self, allow_stdin):
        self.parent = {"content": {"allow_stdin": allow_stdin}}

    def get_parent(self):
        return self.parent


def test_in_a_kernel_a_bar_only_for_an_interactive_frontend(monkeypatch):
    import types

    monkeypatch.delenv(progress.ENV, raising=False)
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    shell = types.SimpleNamespace(kernel=_Kernel(True))
    fake = types.SimpleNamespace(get_ipython=lambda: shell)
    monkeypatch.setitem(__import__("sys").modules, "IPython", fake)
    assert progress.wanted() is True  # JupyterLab, Colab: input() works
    shell.kernel = _Kernel(False)  # nbclient: the book build, nbconvert, tests
    assert progress.wanted() is False
