"""The Chinese edition's terminology, ``i18n/zh/glossary.yml``, and the check that a
translation follows it.

Where an English block uses a glossary term (in its prose: code, math, roles and link
targets left out), the translation must contain the term's Chinese (one of them, when
the entry lists several), unless the English word sits in one of the entry's ``unless``
phrases. Terms listed under ``kept`` stay in English and must appear as they are; the
names under ``untranslated`` (TRL's and the package's) must appear verbatim wherever the
English has them in code (or, for names with ``_`` or capitals, anywhere). A
translation must not use a rendering listed under ``forbidden`` (a regular expression
over its Chinese prose, with what to write instead): calques, a second name for a term,
English glued into a Chinese sentence, italics on Chinese.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import md_blocks
import yaml

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "i18n" / "zh" / "glossary.yml"


@dataclass(frozen=True)
class Term:
    en: tuple[str, ...]
    zh: tuple[str, ...]
    unless: tuple[str, ...] = ()
    #: names kept in English (``kept``) match with their case: "ZeRO" is not "zero"
    case_sensitive: bool = False

    def pattern(self) -> re.Pattern:
        forms = "|".join(_words(f) for f in sorted(self.en, key=len, reverse=True))
        flags = 0 if self.case_sensitive else re.IGNORECASE
        return re.compile(rf"(?<!\w)(?:{forms})(?:s|es)?(?!\w)", flags)


@dataclass(frozen=True)
class Forbidden:
    #: a regular expression over Chinese prose
    zh: str
    #: what to write instead
    use: str


@dataclass(frozen=True)
class Glossary:
    terms: tuple[Term, ...]
    untranslated: tuple[str, ...]
    forbidden: tuple[Forbidden, ...] = ()


def _words(phrase: str) -> str:
    """A regex for ``phrase`` whose words may be separated by any whitespace (the
    English is wrapped)."""
    return r"\s+".join(re.escape(w) for w in phrase.split())


def _tuple(value) -> tuple[str, ...]:
    return tuple(value) if isinstance(value, list) else (value,)


def load(path: Path = GLOSSARY) -> Glossary:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    terms = [
        Term(_tuple(t["en"]), _tuple(t["zh"]), _tuple(t.get("unless", [])))
        for t in data.get("terms", [])
    ]
    # a kept word is a name, or {en: name, unless: [phrases]}
    terms += [
        Term((k["en"],), (k["en"],), _tuple(k.get("unless", [])), case_sensitive=True)
        if isinstance(k, dict)
        else Term((k,), (k,), case_sensitive=True)
        for k in data.get("kept", [])
    ]
    forbidden = tuple(Forbidden(f["zh"], f["use"]) for f in data.get("forbidden", []))
    return Glossary(tuple(terms), tuple(data.get("untranslated", [])), forbidden)


def forbidden_renderings(chinese: str, glossary: Glossary) -> list[str]:
    """The renderings of ``glossary.forbidden`` that the Chinese text ``chinese`` uses
    in its prose (code, math, roles and link targets left out)."""
    text = prose(chinese)
    return [
        f"{m.group(0)!r} is a forbidden rendering: use {rule.use}"
        for rule in glossary.forbidden
        if (m := re.search(rule.zh, text))
    ]


def prose(text: str) -> str:
    """The English words of a block: without code (fenced and inline), roles, math and
    link targets."""
    text = re.sub(
        r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?^[ \t]*\1[ \t]*$",
        " ",
        text,
        flags=re.MULTILINE | re.DOTALL,
    )
    text = md_blocks.ROLE.sub(" ", text)
    text = md_blocks.INLINE_CODE.sub(" ", text)
    text = md_blocks.INLINE_MATH.sub(" ", text)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.DOTALL)
    text = md_blocks.LINK_TARGET.sub("] ", text)
    return re.sub(
        r"^[ \t]*:[\w\-]+:.*$", " ", text, flags=re.MULTILINE
    )  # directive options


def _code_spans(text: str) -> str:
    """The inline code of ``text``; roles first, or the text between two roles reads as
    code."""
    without_roles = md_blocks.ROLE.sub(" ", text)
    return " ".join(
        m.group("body") for m in md_blocks.INLINE_CODE.finditer(without_roles)
    )


def violations(msgid: str, msgstr: str, glossary: Glossary) -> list[str]:
    """How the translation ``msgstr`` of the English block ``msgid`` departs from the
    glossary."""
    found = []
    english = prose(msgid)
    for term in glossary.terms:
        text = english
        for phrase in term.unless:
            text = re.sub(_words(phrase), " ", text, flags=re.IGNORECASE)
        m = term.pattern().search(text)
        if m and not any(
            (zh in msgstr) if term.case_sensitive else (zh.lower() in msgstr.lower())
            for zh in term.zh
        ):
            found.append(f"{m.group(0)!r} is translated without {' / '.join(term.zh)}")
    code = _code_spans(msgid)
    for name in glossary.untranslated:
        where = msgid if ("_" in name or name != name.lower()) else code
        if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", where) and name not in msgstr:
            found.append(
                f"the name {name!r} is missing (TRL/package names stay as they are)"
            )
    return found + forbidden_renderings(msgstr, glossary)
