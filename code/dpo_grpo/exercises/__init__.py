"""Exercises for every chapter: ``check("03.2", answer)`` gives feedback without revealing the solution.

Each chapter's exercises are registered in a module ``chNN.py`` (or ``labs.py``) of this package; they are all
imported here. ``python -m dpo_grpo.exercises grade NOTEBOOK_OR_FOLDER`` grades student notebooks and
``python -m dpo_grpo.exercises student BOOK_DIR OUT_DIR`` writes the student edition (solution cells removed).
"""

import importlib
import pkgutil

from .core import EXERCISES, Exercise, Feedback, check, choice, code, numeric

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _info.name.startswith("ch") or _info.name == "labs":
        importlib.import_module(f"{__name__}.{_info.name}")

__all__ = ["EXERCISES", "Exercise", "Feedback", "check", "choice", "code", "numeric"]
