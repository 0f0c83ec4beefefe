"""The self-check (hashed key) and the grader (full key) apply one tolerance rule,
exact to the tolerance each numeric exercise states: every answer within it passes,
every answer beyond it fails, both agree on every answer, and a message never claims a
tolerance the answer meets. Every correctly rounded answer of four or more significant
figures passes (the book asks for "at least four"). The rule is the one documented in
``dpo_grpo.exercises.selfcheck`` (a small re-implementation below applies it to the key
alone)."""

from __future__ import annotations

import functools
import hashlib
import math
import re

import numpy as np
import pytest
from dpo_grpo.exercises import EXERCISES, check
from dpo_grpo.exercises.core import judge
from hypothesis import given
from hypothesis import strategies as st

NUMERIC = sorted(k for k, e in EXERCISES.items() if e.kind == "numeric")
SOLUTIONS = {k: np.asarray(EXERCISES[k].solution(), dtype=float) for k in NUMERIC}
#: a hair inside or outside a tolerance: the rule compares in floating point
MARGIN = 1e-9


@pytest.fixture(autouse=True)
def _english(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)


def _record(x):
    x = np.asarray(x, dtype=float)
    return {"kind": "array", "shape": list(x.shape), "data": x.ravel().tolist()}


def _both(ex_id, x):
    """(the self-check's verdict, the grader's verdict) on answer ``x``."""
    fb = check(ex_id, x)
    return fb, judge(EXERCISES[ex_id], _record(x))


def _rounded(x, digits):
    """``x`` correctly rounded to ``digits`` significant figures."""
    return np.vectorize(lambda v: float(f"{v:.{digits}g}"))(x).reshape(np.shape(x))


def _fractions(size):
    return st.lists(
        st.floats(-1.0, 1.0, allow_nan=False), min_size=size, max_size=size
    ).map(np.array)


@pytest.mark.parametrize("digits", [4, 5, 6])
@pytest.mark.parametrize("ex_id", NUMERIC)
def test_a_correctly_rounded_answer_of_four_or_more_figures_passes(ex_id, digits):
    x = _rounded(SOLUTIONS[ex_id], digits)
    fb, verdict = _both(ex_id, x)
    assert fb and verdict == "correct", (ex_id, x.tolist(), fb.message)


@given(data=st.data())
def test_within_half_the_registered_tolerance_passes_and_beyond_it_fails(data):
    """In the exercise's own terms (``atol + rtol |ref|``): within half of it passes,
    beyond it fails (beyond twice it, all the more)."""
    ex_id = data.draw(st.sampled_from(NUMERIC))
    ex, sol = EXERCISES[ex_id], SOLUTIONS[ex_id]
    tol = ex.atol + ex.rtol * np.abs(sol)
    u = data.draw(_fractions(sol.size)).reshape(sol.shape)
    fb, verdict = _both(ex_id, sol + 0.5 * (1 - MARGIN) * u * tol)
    assert fb and verdict == "correct", (ex_id, fb.message)
    far = data.draw(st.sampled_from([1 + 1e-6, 2.0, 2.5, 100.0]))
    i = data.draw(st.integers(0, sol.size - 1))
    x = sol.ravel() + 0.5 * u.ravel() * tol.ravel()
    x[i] = sol.ravel()[i] + data.draw(st.sampled_from([-1, 1])) * far * tol.ravel()[i]
    fb, verdict = _both(ex_id, x.reshape(sol.shape))
    assert not fb and verdict == "incorrect", (ex_id, i, far)


@given(data=st.data())
def test_the_stated_tolerance_is_exact(data):
    """``Exercise.tolerance()`` is what the feedback states: every answer within it
    passes; an answer beyond it at some value fails, and the message names that value's
    tolerance and no value that is within its own."""
    ex_id = data.draw(st.sampled_from(NUMERIC))
    ex, sol = EXERCISES[ex_id], SOLUTIONS[ex_id]
    w = np.asarray(ex.tolerance(), dtype=float)
    assert w.shape == sol.shape
    u = data.draw(_fractions(sol.size)).reshape(sol.shape)
    fb, verdict = _both(ex_id, sol + (1 - MARGIN) * u * w)
    assert fb and verdict == "correct", (ex_id, fb.message)
    outside = data.draw(st.lists(st.integers(0, sol.size - 1), min_size=1, unique=True))
    x = (sol + (1 - MARGIN) * u * w).ravel()
    for i in outside:
        x[i] = sol.ravel()[i] + np.sign(u.ravel()[i] or 1) * (1 + 1e-6) * w.ravel()[i]
    fb, verdict = _both(ex_id, x.reshape(sol.shape))
    assert not fb and verdict == "incorrect", ex_id
    if "not quite" in fb.message:  # a registered mistake's hint, not a tolerance
        return
    assert any(f"±{w.ravel()[i]:.3g}" in fb.message for i in outside), fb.message
    listed = re.search(r"positions ([\d, ]+) of", fb.message)
    if listed:
        named = {int(p) - 1 for p in listed.group(1).split(",")}
        assert named == set(outside), (fb.message, outside)


@given(data=st.data())
def test_the_self_check_and_the_grader_agree_on_every_answer(data):
    """Answers on and next to the tolerance's edges, where rounding decides."""
    ex_id = data.draw(st.sampled_from(NUMERIC))
    ex, sol = EXERCISES[ex_id], SOLUTIONS[ex_id]
    tol = ex.atol + ex.rtol * np.abs(sol)
    scale = data.draw(st.sampled_from([0.25, 0.5, 1.0, 2.0]))
    edge = st.sampled_from([-1.0, -1 + 1e-16, 1 - 1e-16, 1.0, 0.5, -0.5])
    u = np.array(
        data.draw(
            st.lists(edge | st.floats(-1, 1), min_size=sol.size, max_size=sol.size)
        )
    )
    x = sol + scale * u.reshape(sol.shape) * tol
    fb, verdict = _both(ex_id, x)
    assert (fb.status == "correct") == (verdict == "correct"), (ex_id, x.tolist())


def _hash(salt, tier, index, cell):
    return hashlib.sha256(f"{salt}|{tier}|{index}|{cell}".encode()).hexdigest()[:16]


def documented_rule(fp, salt, tier, x):
    """The rule of the selfcheck module's docstring, applied to one fingerprint of the
    key with nothing but the standard library (what a web page's checker does)."""
    if list(np.shape(x)) != fp["shape"]:
        return False
    for i, value in enumerate(np.ravel(x).tolist()):
        y = (value - fp["o"][i]) / 2.0 ** fp["e"][i]
        if not math.isfinite(y) or abs(y) >= 2.0**52:
            return False
        f = math.floor(y)
        if not any(
            abs(y - k) <= 1 and _hash(salt, tier, i, k) == fp["h"][i]
            for k in range(f - 2, f + 3)
        ):
            return False
    return True


@functools.cache
def _mistakes(ex_id):
    """The values of an exercise's registered mistakes (09.1's run simulations)."""
    values = [v for v, _ in EXERCISES[ex_id].mistakes.values()]
    return [np.asarray(v() if callable(v) else v, dtype=float) for v in values]


def documented_reply(entry, salt, x) -> str:
    """The reply the docstring's rule gives a numeric answer: its first line of
    feedback."""
    if documented_rule(entry["exact"], salt, "exact", x):
        return "correct."
    for i, m in enumerate(entry["mistakes"]):
        if m["fp"] and documented_rule(m["fp"], salt, f"mistake{i}", x):
            return f"not quite. {m['hint']}"
    if documented_rule(entry["close"], salt, "close", x):
        return "close"
    return "not within"


@given(data=st.data())
def test_the_documented_rule_reproduces_check(data):
    from dpo_grpo.exercises._selfcheck_key import KEY

    ex_id = data.draw(st.sampled_from(NUMERIC))
    entry, sol = KEY[ex_id], SOLUTIONS[ex_id]
    salt = hashlib.sha256(f"dpo_grpo selfcheck {ex_id}".encode()).hexdigest()[:16]
    tol = EXERCISES[ex_id].atol + EXERCISES[ex_id].rtol * np.abs(sol)
    scale = data.draw(st.sampled_from([0.5, 1.0, 3.0, 30.0, 3000.0]))
    x = sol + scale * data.draw(_fractions(sol.size)).reshape(sol.shape) * tol
    if data.draw(st.booleans()) and _mistakes(ex_id):
        x = data.draw(st.sampled_from(_mistakes(ex_id)))
    assert check(ex_id, x).message.startswith(documented_reply(entry, salt, x)), ex_id


def test_the_key_stores_no_tolerance_finer_than_its_exponent():
    """A key entry holds, per value, the tolerance's exponent, the reference's offset
    below it and a hash: not ``atol + rtol |ref|`` itself, which would give ``|ref|``
    away."""
    from dpo_grpo.exercises._selfcheck_key import KEY

    for ex_id in NUMERIC:
        fp = KEY[ex_id]["exact"]
        assert set(fp) == {"shape", "e", "o", "h"}, ex_id
        w = np.asarray(EXERCISES[ex_id].tolerance(), dtype=float).ravel()
        assert np.array_equal(w, 2.0 ** np.asarray(fp["e"], dtype=float)), ex_id
        assert all(abs(o) < wi for o, wi in zip(fp["o"], w)), ex_id


def test_regenerating_the_key_leaves_the_shipped_key_alone(tmp_path, monkeypatch):
    """``python -m dpo_grpo.exercises selfcheck-key`` writes ``_selfcheck_key.py`` in
    the working directory; the package's key changes only when its path is named."""
    from pathlib import Path

    import dpo_grpo.exercises
    from dpo_grpo.exercises.__main__ import main
    from testing_support import files_kept

    shipped = Path(dpo_grpo.exercises.__file__).resolve().parent
    monkeypatch.chdir(tmp_path)
    with files_kept(shipped) as changed:
        assert main(["selfcheck-key"]) == 0
        assert changed() == []
    text = (tmp_path / "_selfcheck_key.py").read_text(encoding="utf-8")
    assert "KEY = {}" in text and "--out" in text.splitlines()[0]
