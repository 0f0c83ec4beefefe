"""One symbol, one meaning: book/notation.md lists each reserved symbol once, and the
chapters, figures, widgets and docstrings do not use a reserved symbol for something
else (issue 18, defect 5).

The reserved symbols and the misuses this test looks for:

- epsilon: LaTeX ``\\epsilon`` (label ``ϵ``) guards a standard deviation;
  ``\\varepsilon`` (label ``ε``) is the clip radius. A clip interval written with
  ``\\epsilon`` is a misuse.
- ``\\delta`` is TRL's two-sided clip cap only: a cell that uses it must be about the
  cap.
- ``s``: only PPO's state ``s_t``. The group's standard deviation is
  ``\\operatorname{std}``, a sampling distribution ``\\mu``, the score of an answer
  ``g_i``.
- ``u`` is DPO's margin (not ``m``); ``z`` is a vector of logits (not DPO's logit
  ``\\beta u``); the KL explorable's mix is ``\\tau`` (``t`` is a token position).
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
PACKAGE = ROOT / "code" / "dpo_grpo"

RESERVED = [
    r"$\epsilon$",
    r"$\varepsilon$",
    r"$\delta$",
    r"$\operatorname{std}$",
    r"$\mu$",
    r"$\tau$",
    r"$t$",
    r"$g_i$",
    r"$u$",
    r"$z$",
    r"$\kappa$",
    r"$\lambda$",
    r"$\rho_{i,t}$",
    r"$\Delta$",
    r"$\beta$",
    r"$G$",
]

#: (pattern, what is wrong) for the Markdown of every page
MISUSES = [
    (
        r"1\s*[-+]\s*\\epsilon(?![a-zA-Z_])",
        "a clip bound written with \\epsilon (the clip radius is \\varepsilon)",
    ),
    (r"\\mathrm\{clip\}\([^$]*\\epsilon(?![a-zA-Z_])", "a clip written with \\epsilon"),
    (r"(?<![\\\w])s_i(?![\w])", "s_i (the score of answer i is g_i)"),
    (
        r"\$s\$|(?<![\w\\])s\s*\+\s*\\epsilon|\\,s\s*\+",
        "s as a standard deviation (write \\operatorname{std})",
    ),
    (r"(?<![\w\\])s\s*=\s*\(1\s*-", "s as a sampling distribution (write \\mu)"),
    (r"\$m\s*=|margin \$m\$|\\beta m\)", "m as DPO's margin (write u)"),
    (r"z\s*=\s*\\beta\s*u", "z as DPO's logit (z is a vector of logits)"),
    (r"slider \$t\$|\(1-t\)", "t as the KL explorable's mix (write \\tau)"),
]

#: strings that must not appear in the interactive modules (figure and widget labels) or
#: the KL docstrings
LABEL_MISUSES = [
    "sampling s",
    "margin m",
    "β·m",
    "σ(β m)",
    "(1−t)",
    "E_s[",
    "p/s",
    "logit z",
    "``s = (1",
    "advantage d / (d + 2ε)",
    "std + ε",
]


def _pages():
    pages = sorted(BOOK.glob("*.ipynb")) + sorted(BOOK.glob("*.md"))
    assert len(pages) > 10
    return pages


def _markdown(path):
    if path.suffix == ".md":
        return [("file", path.read_text(encoding="utf-8"))]
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [
        (c.get("id"), "".join(c["source"]))
        for c in nb["cells"]
        if c["cell_type"] == "markdown"
    ]


def _symbols_of_notation():
    rows = [
        line
        for line in (BOOK / "notation.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| $")
    ]
    symbols = []
    for row in rows:
        first = row.split(" | ")[0].lstrip("| ").strip()
        symbols += [s.strip() for s in re.findall(r"\$[^$]+\$", first)]
    return symbols


def test_notation_lists_every_reserved_symbol_exactly_once():
    symbols = _symbols_of_notation()
    duplicates = sorted({s for s in symbols if symbols.count(s) > 1})
    assert not duplicates, f"listed twice in notation.md: {duplicates}"
    missing = [s for s in RESERVED if s not in symbols]
    assert not missing, f"reserved symbols missing from notation.md: {missing}"
    assert r"$s$" not in symbols and r"$m$" not in symbols


@pytest.mark.parametrize("path", _pages(), ids=lambda p: p.name)
def test_pages_use_reserved_symbols_for_their_meaning_only(path):
    problems = []
    for cell_id, text in _markdown(path):
        for pattern, what in MISUSES:
            for m in re.finditer(pattern, text):
                problems.append(
                    f"{cell_id}: {what}: "
                    f"...{text[max(0, m.start() - 30) : m.end() + 20]!r}"
                )
        if r"\delta" in text and "cap" not in text:
            problems.append(f"{cell_id}: \\delta outside the two-sided clip cap")
    assert not problems, "\n".join(problems)


def test_the_scan_finds_each_misuse():
    # the patterns are live: each catches the sentence it was written for
    samples = [
        r"$\mathrm{clip}(\rho,1-\epsilon,1+\epsilon)$",
        r"write $s_i=\nabla\log\pi$",
        r"$(r-\bar r)/(s+\epsilon/a)$",
        r"from $s=(1-t)\,\pi_\theta$",
        r"margin $m$",
        r"logit $z=\beta u$",
        r"the slider $t$",
    ]
    for sample in samples:
        assert any(re.search(p, sample) for p, _ in MISUSES), sample


def test_labels_and_docstrings_use_the_reserved_symbols():
    sources = list((PACKAGE / "interactive").glob("*.py")) + [
        PACKAGE / "reference" / "kl.py"
    ]
    problems = [
        f"{path.name}: {bad!r}"
        for path in sources
        for bad in LABEL_MISUSES
        if bad in path.read_text(encoding="utf-8")
    ]
    assert not problems, problems


def test_widget_labels_tell_the_two_epsilons_apart():
    pytest.importorskip("ipywidgets")
    from dpo_grpo.interactive import (
        bandit,
        clip_platform,
        difficulty,
        group_advantage,
        token_level,
        zero_std,
    )

    guard = [
        zero_std.zero_std_widget().controls["eps"],
        group_advantage.group_advantage_widget().controls["eps"],
        difficulty.difficulty_widget().controls["eps"],
    ]
    clip = [
        clip_platform.clip_platform_widget().controls["epsilon"],
        bandit.bandit_widget().controls["epsilon"],
        token_level.token_level_widget().controls["epsilon"],
    ]
    assert all("ϵ" in c.description and "ε" not in c.description for c in guard)
    assert all("ε" in c.description and "ϵ" not in c.description for c in clip)
    # the two glyphs look alike in most UI fonts: each label also says what it is
    assert all("std guard" in c.description for c in guard)
    assert all("clip radius" in c.description for c in clip)
