"""Where this machine offers only the ``basic`` sandbox, the grading tests grade
unisolated, as a teacher there must (``book/teaching.md``); the probe itself is tested
in test_sandbox.py."""

import pytest
from testing_support import unisolated_grading


@pytest.fixture(autouse=True)
def _grade_unisolated_without_a_sandbox_root(monkeypatch):
    if unisolated_grading():
        from dpo_grpo.exercises import grade

        monkeypatch.setattr(grade, "require_no_key", lambda **kw: None)
