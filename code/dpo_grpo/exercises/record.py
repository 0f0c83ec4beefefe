"""``check`` of the graded edition: it records the answer for the grader and says
nothing about it.

It consults no key, hashed or full, so it cannot be used as an oracle (trying every
letter of a multiple-choice question, or every rounded number near a guess, gets the
same reply). Outside the grader's sandbox it records nothing at all. The self-check
(:func:`dpo_grpo.exercises.check`) is for practice;
``python -m dpo_grpo.exercises student READER_DIR OUT --graded`` writes notebooks that
import this ``check`` instead (``book/teaching.md``).
"""

from __future__ import annotations

import re

from ..i18n import N_, tr
from .core import Feedback
from .selfcheck import record_answer

EXERCISE_ID = re.compile(r"[0-9A-Za-z_.\-]{1,32}")
RECORDED = N_(
    "answer recorded; your teacher's grader will mark it (no feedback in the graded "
    "edition)."
)


def check(exercise_id: str, answer) -> Feedback:
    """Record ``answer`` for exercise ``exercise_id`` (e.g. ``"04.4"``) when graded; the
    reply never depends on whether the answer is right. ``None`` (or ``...``) means "not
    attempted yet": it is recorded as untouched, as the self-check records it, and never
    replaces an answer given before."""
    if not isinstance(exercise_id, str) or not EXERCISE_ID.fullmatch(exercise_id):
        raise ValueError(f"exercise_id must look like '04.4', got {exercise_id!r}")
    record_answer(exercise_id, answer)
    if answer is None or answer is Ellipsis:
        return Feedback(
            exercise_id,
            "not attempted",
            tr("replace None with your answer and run the cell again."),
        )
    return Feedback(exercise_id, "recorded", tr(RECORDED))
