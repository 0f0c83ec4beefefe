"""Progress bars for the lab's long runs (``run_lab``, the sweep): ``tqdm``'s bar with
the time left, ``tqdm.auto``'s widget in a notebook, and nothing where nobody watches.

``progress=None`` (the default everywhere) decides by itself: the environment variable
``DPO_GRPO_PROGRESS`` wins when set (``0``/``1``); under pytest there is no bar; in a
Jupyter kernel there is one when the cell was run from a frontend that can answer
``input()`` (JupyterLab, Notebook, VS Code, Colab), and none when a notebook is executed
unattended (``nbclient``: the book build, ``nbconvert --execute``, the tests), which
sends its cells with ``allow_stdin`` false; elsewhere there is one when standard error
is a terminal (a log file or a pipe gets none). ``True`` or ``False`` forces it.
Without ``tqdm`` installed there is no bar.
"""

from __future__ import annotations

import os
import sys

from .. import _validation as v

#: the environment variable that turns the bars on (``1``) or off (``0``)
ENV = "DPO_GRPO_PROGRESS"
_ON, _OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def kernel():
    """The Jupyter kernel this code runs in, or None."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return getattr(shell, "kernel", None)


def someone_watches(k) -> bool:
    """Whether kernel ``k``'s current cell came from an interactive frontend: its
    execute request allows input (``allow_stdin``), which an unattended run does not."""
    try:
        parent = k.get_parent()
    except Exception:  # noqa: BLE001 - a kernel without ipykernel's API: assume no one
        return False
    return bool((parent or {}).get("content", {}).get("allow_stdin", False))


def wanted(progress=None) -> bool:
    """Whether a long run should draw a bar (see the module for ``None``)."""
    if progress is not None:
        return v.boolean(progress, "progress")
    env = os.environ.get(ENV, "").strip().lower()
    if env in _ON or env in _OFF:
        return env in _ON
    if env:
        raise ValueError(f"{ENV} must be one of {_ON + _OFF}, got {env!r}")
    if "PYTEST_CURRENT_TEST" in os.environ:
        return False
    k = kernel()
    if k is not None:
        return someone_watches(k)
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


class _Silent:
    """The bar's interface, doing nothing."""

    disable = True

    def update(self, n: int = 1):
        pass

    def set_postfix_str(self, s: str = "", refresh: bool = True):
        pass

    def close(self):
        pass


def bar(total: int, desc: str, progress=None, unit: str = "step"):
    """A ``tqdm.auto`` bar of ``total`` items (``update``, ``set_postfix_str``,
    ``close``), or an object with the same methods that draws nothing."""
    total = v.integer(total, "total", minimum=0)
    if not wanted(progress):
        return _Silent()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _Silent()
    return tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True, leave=False)
