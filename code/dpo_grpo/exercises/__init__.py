"""Exercises for every chapter: ``check("03.2", answer)`` gives feedback without
revealing the solution.

``check`` (:mod:`.selfcheck`) reads only a hashed key; importing it loads no reference
answer. The registry with the full key (``EXERCISES``, built from the chapter modules
``chNN.py``) is loaded on first access, for instructors and tests.
``python -m dpo_grpo.exercises grade NOTEBOOK_OR_FOLDER`` grades student notebooks and
``python -m dpo_grpo.exercises student READER_DIR OUT_DIR [--graded]`` writes the
student (or graded) edition: the reader edition (``make notebooks``) with its solution
cells removed (:mod:`.student`).
"""

from .core import Exercise, Feedback, choice, code, numeric
from .selfcheck import check


def __getattr__(name):
    if name == "EXERCISES":
        from .core import registry

        return registry()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["EXERCISES", "Exercise", "Feedback", "check", "choice", "code", "numeric"]
