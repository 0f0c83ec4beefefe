"""Helpers for the chapter notebooks: publish computed numbers with myst-nb's ``glue``;
show a function's source."""

from __future__ import annotations

import importlib.util
import inspect
import numbers
from pathlib import Path

import numpy as np


def _plain(value):
    """numpy scalars -> Python scalars (myst-nb formats ``{glue:text}`key:.4f``` from
    the plain-text repr)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return value


#: the mimetype prefix of a value glued without being displayed (myst-nb's
#: ``GLUE_PREFIX``, papermill's record format)
GLUE_PREFIX = "application/papermill.record/"


def glue(name: str, value, display: bool = False):
    """Store ``value`` under ``name`` for ``{glue:text}`name:.4f``` in the page, and
    return it.

    The display bundle is myst-nb's ``glue`` format (``tests/package/test_notebook.py``
    checks it equal): importing ``myst_nb.ext.glue`` imports Sphinx, 2 s per kernel.
    Where myst-nb is not installed (Colab, a reader's Jupyter) this only returns the
    value, so notebooks run anywhere.
    """
    if not isinstance(name, str) or not name:
        raise TypeError("name must be a non-empty string")
    value = _plain(value)
    if importlib.util.find_spec("myst_nb") is None:
        return value
    from IPython.core.formatters import format_display_data
    from IPython.display import display as ipy_display

    bundle, metadata = format_display_data(value)
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    ipy_display({prefix + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)
    return value


def runtime_summary(suggest_gpu: bool = False) -> str:
    """What this kernel runs on: Python and NumPy, torch and its device (CPU, or the
    CUDA device's name).

    With ``suggest_gpu=True`` (chapters whose torch cells run faster on a GPU) and no
    CUDA device, a second line says how to get one (in Colab: Runtime > Change runtime
    type > a GPU)."""
    if not isinstance(suggest_gpu, bool):
        raise TypeError(f"suggest_gpu must be a bool, got {type(suggest_gpu).__name__}")
    import platform

    parts = [f"dpo_grpo on Python {platform.python_version()}, NumPy {np.__version__}"]
    cuda = False
    try:
        import torch
    except ImportError:
        parts.append("torch not installed (the NumPy chapters do not need it)")
    else:
        cuda = torch.cuda.is_available()
        device = (
            "GPU: cuda (" + torch.cuda.get_device_name(0) + ")"
            if cuda
            else "CPU (no CUDA device)"
        )
        parts.append(f"torch {torch.__version__} on {device}")
    text = "; ".join(parts)
    if suggest_gpu and not cuda:
        text += (
            "\nThis chapter's torch cells run faster on a GPU. In Colab: Runtime > "
            "Change runtime type > a GPU (e.g. T4), then run the notebook again from "
            "the top. On a CPU it still runs."
        )
    return text


class SourceListing:
    """The source of one package function, displayed as a highlighted code block
    (Jupyter, Colab, the built book).

    ``text`` is exactly ``inspect.getsource(fn)``: the code that runs when the chapter
    calls ``fn``.
    """

    def __init__(self, fn):
        target = inspect.unwrap(fn)
        if not (
            inspect.isfunction(target)
            or inspect.isclass(target)
            or inspect.ismethod(target)
        ):
            raise TypeError(
                f"fn must be a function, method or class, got {type(fn).__name__}"
            )
        self.text = inspect.getsource(target)
        lines, first = inspect.getsourcelines(target)
        package_root = Path(__file__).resolve().parent.parent
        path = Path(inspect.getsourcefile(target)).resolve()
        try:
            shown = path.relative_to(package_root).as_posix()
        except ValueError:
            shown = path.name
        self.where = f"{shown}, lines {first}–{first + len(lines) - 1}"
        self.qualname = f"{target.__module__}.{target.__qualname__}"

    def _repr_markdown_(self):
        return (
            f"`{self.qualname}` "
            f"({self.where})\n\n```python\n{self.text.rstrip()}\n```\n"
        )

    def __repr__(self):
        return f"# {self.qualname} ({self.where})\n{self.text}"


def show_source(fn) -> SourceListing:
    """Display the installed source of ``fn`` (a function, method or class),
    highlighted; returns the listing.

    Chapters put it right under the equation a function implements, so the reader sees
    the code that runs.
    """
    return SourceListing(fn)
