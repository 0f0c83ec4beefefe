"""File names of submissions as the grader shows them: escaped so that a name cannot
rewrite the terminal or a report, and compared by how they look so that a name cannot
pass for a classmate's.

- :func:`display_name` escapes every control, format (bidirectional overrides,
  zero-width characters), separator and unassigned character as ``\\xNN``, ``\\uNNNN``
  or ``\\UNNNNNNNN`` (and a backslash as ``\\\\``): what is printed is plain visible
  text, one line, in logical order.
- :func:`ascii_name` escapes every non-ASCII character as well, to tell look-alikes
  apart.
- :func:`skeleton` maps a name to a form in which look-alike names coincide
  (compatibility forms, case, accents, invisible characters, common Cyrillic and Greek
  homoglyphs of Latin letters, ``0``/``o``, ``1``/``l``, ``rn``/``m``). It is a
  heuristic in the spirit of Unicode's confusable skeletons (UTS #39), not the full
  table.
- :func:`confusable_with` says, for each name, which other names of the batch look like
  it.
"""

from __future__ import annotations

import unicodedata

#: Non-Latin letters drawn like a Latin one (after case folding), beyond those whose
#: Unicode name already says "LETTER X" with a single Latin X (e.g. CYRILLIC SMALL
#: LETTER A).
HOMOGLYPHS = {
    "а": "a",
    "в": "b",
    "е": "e",
    "ё": "e",
    "һ": "h",
    "і": "i",
    "ї": "i",
    "ј": "j",
    "к": "k",
    "м": "m",
    "н": "h",
    "о": "o",
    "р": "p",
    "с": "c",
    "т": "t",
    "у": "y",
    "х": "x",
    "ѕ": "s",
    "ԁ": "d",
    "ԛ": "q",
    "ԝ": "w",
    "ӏ": "l",
    "ɡ": "g",
    "ı": "i",
    "ℓ": "l",
    "α": "a",
    "β": "b",
    "ε": "e",
    "η": "n",
    "ι": "i",
    "κ": "k",
    "ν": "v",
    "ο": "o",
    "ρ": "p",
    "τ": "t",
    "υ": "u",
    "χ": "x",
    "ω": "w",
    "0": "o",
    "1": "l",
    "|": "l",
    "ǀ": "l",
}
_SHOWN_AS_IS = {
    "Ll",
    "Lu",
    "Lt",
    "Lm",
    "Lo",
    "Mn",
    "Mc",
    "Me",
    "Nd",
    "Nl",
    "No",
    "Pc",
    "Pd",
    "Ps",
    "Pe",
    "Pi",
    "Pf",
    "Po",
    "Sm",
    "Sc",
    "Sk",
    "So",
}


def _text(name, arg="name") -> str:
    if not isinstance(name, str):
        raise TypeError(f"{arg} must be a str, got {type(name).__name__}")
    return name


def display_name(name: str) -> str:
    """``name`` with every character that is not plain visible text escaped (see the
    module docstring)."""
    out = []
    for ch in _text(name):
        if ch == "\\":
            out.append("\\\\")
        elif ch == " " or unicodedata.category(ch) in _SHOWN_AS_IS:
            out.append(ch)
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out)


def ascii_name(name: str) -> str:
    """:func:`display_name` with every non-ASCII character escaped too: how a look-alike
    is told apart."""
    return display_name(name).encode("ascii", "backslashreplace").decode("ascii")


def _latin_of(ch: str) -> str:
    if ch in HOMOGLYPHS:
        return HOMOGLYPHS[ch]
    if ch.isascii():
        return ch
    words = unicodedata.name(ch, "").split()
    if (
        len(words) >= 2
        and words[-2] == "LETTER"
        and len(words[-1]) == 1
        and words[-1].isalpha()
    ):
        return words[-1].lower()
    return ch


def skeleton(name: str) -> str:
    """The look of ``name``: two names with the same skeleton can pass for one
    another."""
    text = unicodedata.normalize("NFKD", _text(name)).casefold()
    kept = [
        ch
        for ch in text
        if unicodedata.category(ch) not in ("Mn", "Me", "Cf", "Cc", "Zs", "Zl", "Zp")
    ]
    return "".join(_latin_of(ch) for ch in kept).replace("rn", "m")


def confusable_with(names) -> dict:
    """``{name: [other names of the batch that look like it]}``, only for names that
    have such look-alikes."""
    names = [_text(n, "names[]") for n in names]
    groups = {}
    for n in names:
        groups.setdefault(skeleton(n), []).append(n)
    return {
        n: [m for m in group if m != n]
        for group in groups.values()
        if len(set(group)) > 1
        for n in group
        if any(m != n for m in group)
    }
