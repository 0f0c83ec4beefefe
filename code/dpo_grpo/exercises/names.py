"""File names of submissions as the grader shows them: escaped so that a name cannot
rewrite the terminal or a report, and compared by how they look so that a name cannot
pass for a classmate's.

- :func:`display_name` escapes every control, format (bidirectional overrides,
  zero-width characters), separator and unassigned character, and the Hangul fillers
  (letters drawn as nothing), as ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN`` (and a
  backslash as ``\\\\``): what is printed is plain visible text, one line, in logical
  order.
- :func:`ascii_name` escapes every non-ASCII character as well, to tell look-alikes
  apart.
- :func:`skeleton` maps a name to a form in which look-alike names coincide: the
  skeleton of Unicode's confusable detection (UTS #39), from its confusables data as
  the ``confusable-homoglyphs`` package ships it (``confusables.txt``), which replaces
  each character by the prototype it is drawn like (``0`` by ``O``, ``I`` by ``l``,
  Cyrillic ``а``, Latin alpha ``ɑ`` by ``a``, Cherokee ``ꮃ``, Armenian ``ա`` by ``w``,
  ``m`` by ``rn``). On top of UTS #39: compatibility forms are decomposed (NFKD),
  invisible characters (format, control, separator, Hangul fillers) and accents are
  dropped, case is folded between two passes of the replacement (so Cyrillic ``А``
  meets Latin ``a``), and ``w``/``vv`` and ``d``/``cl``, which the data leaves out,
  are added (:data:`EXTRA_PROTOTYPES`).
- :func:`confusable_with` says, for each name, which other names of the batch look like
  it: the same skeleton, or the same skeleton once case is folded (``Ivan``, ``ivan``).
- :func:`mixed_scripts` names the scripts of a name that mixes them within one word,
  by UTS #39's "highly restrictive" profile (script data of the same package): one
  script per word, or Latin with Han and Japanese kana, with Han and Bopomofo, or with
  Han and Hangul.

The Unicode data is loaded once, on first use.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import defaultdict

#: Look-alikes of several letters that Unicode's confusables data leaves out, added to
#: it: a character (and all that the data draws like it) -> the letters it looks like.
EXTRA_PROTOTYPES = {"w": "vv", "W": "VV", "d": "cl"}
#: Hangul fillers: letters (category Lo) that are drawn as nothing
INVISIBLE_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")
#: the script sets of one word that UTS #39's "highly restrictive" profile allows
#: besides a single script (Common and Inherited characters, such as digits, punctuation
#: and accents, belong to every script)
ALLOWED_SCRIPT_SETS = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)
_ANY_SCRIPT = frozenset({"COMMON", "INHERITED"})
#: what separates the words of a name: ``/ _ - .``, white space and digits
_WORD_BREAKS = re.compile(r"[/_\-.\s\d]+")
_DROPPED = frozenset({"Mn", "Me", "Cf", "Cc", "Zs", "Zl", "Zp"})
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


def display_name(name: str, *, escape_backslash: bool = True) -> str:
    """``name`` with every character that is not plain visible text escaped (see the
    module docstring). ``escape_backslash=False`` leaves a backslash as it is, for text
    shown as written (a Markdown code span), where an escape such as ``\\x1b`` then
    reads the same as those four characters typed."""
    if not isinstance(escape_backslash, bool):
        raise TypeError(
            f"escape_backslash must be a bool, got {type(escape_backslash).__name__}"
        )
    out = []
    for ch in _text(name):
        if ch == "\\":
            out.append("\\\\" if escape_backslash else ch)
        elif ch == " " or (
            unicodedata.category(ch) in _SHOWN_AS_IS and ch not in INVISIBLE_LETTERS
        ):
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


@functools.cache
def _prototypes() -> dict:
    """``{character: its prototype}`` from Unicode's confusables data, which the package
    stores undirected (each ``source → prototype`` line both ways, with left-to-right
    marks around right-to-left text): in each connected group the prototype is the
    string of several characters or the one linked to several others; of two single
    characters, either stands for both (the lower code point)."""
    from confusable_homoglyphs.utils import load

    linked = defaultdict(set)
    for key, entries in load("confusables.json").items():
        a = key.replace("\u200e", "")
        for entry in entries:
            b = entry["c"].replace("\u200e", "")
            if a and b and a != b:
                linked[a].add(b)
                linked[b].add(a)
    prototype, seen = {}, set()
    for start in linked:
        if start in seen:
            continue
        group, todo = {start}, [start]
        while todo:
            for other in linked[todo.pop()] - group:
                group.add(other)
                todo.append(other)
        seen |= group
        hub = max(group, key=lambda s: (len(s) > 1, len(linked[s]), -ord(s[0])))
        prototype.update((ch, hub) for ch in group if len(ch) == 1 and ch != hub)
    for ch, hub in list(prototype.items()):
        prototype[ch] = EXTRA_PROTOTYPES.get(hub, hub)
    prototype.update(EXTRA_PROTOTYPES)
    return prototype


def _visible(text: str) -> str:
    """NFKD of ``text`` without invisible characters and accents."""
    return "".join(
        ch
        for ch in unicodedata.normalize("NFKD", text)
        if unicodedata.category(ch) not in _DROPPED and ch not in INVISIBLE_LETTERS
    )


def skeleton(name: str) -> str:
    """The look of ``name`` (see the module docstring): two names with the same skeleton
    can pass for one another."""
    prototype = _prototypes()

    def drawn(text):
        return _visible("".join(prototype.get(ch, ch) for ch in _visible(text)))

    return drawn(drawn(_text(name)).casefold())


def confusable_with(names) -> dict:
    """``{name: [other names of the batch that look like it]}``, only for names that
    have such look-alikes: names with the same :func:`skeleton`, or the same skeleton of
    their case-folded forms. The others are listed in the order of ``names``."""
    names = list(dict.fromkeys(_text(n, "names[]") for n in names))
    keys = {n: (skeleton(n), "\0" + skeleton(n.casefold())) for n in names}
    groups = defaultdict(set)
    for n, ks in keys.items():
        for k in ks:
            groups[k].add(n)
    out = {}
    for n in names:
        others = set().union(*(groups[k] for k in keys[n])) - {n}
        if others:
            out[n] = [m for m in names if m in others]
    return out


def mixed_scripts(name: str) -> list[str]:
    """The scripts (``["Cyrillic", "Latin"]``) of the words of ``name`` (split at
    ``/ _ - .``, white space and digits) that mix scripts beyond UTS #39's "highly
    restrictive" profile (:data:`ALLOWED_SCRIPT_SETS`), sorted; ``[]`` when no word
    does."""
    from confusable_homoglyphs.categories import alias

    mixed = set()
    for word in _WORD_BREAKS.split(_text(name)):
        scripts = {alias(ch) for ch in word} - _ANY_SCRIPT
        if len(scripts) > 1 and not any(scripts <= ok for ok in ALLOWED_SCRIPT_SETS):
            mixed |= scripts
    return sorted(s.replace("_", " ").title() for s in mixed)
