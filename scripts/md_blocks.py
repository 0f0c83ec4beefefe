"""Split the book's Markdown into blocks, the unit of translation of the Chinese edition
(``i18n/README.md``).

A block is what a translator translates as one piece: a paragraph, a list item's
paragraph, a table, a heading, a code fence, or a whole MyST directive with its body
(``:::{exercise}``, ```` ```{glue:figure} ````), split on blank lines outside fences,
``$$`` math and directives. Some blocks hold nothing to translate and are copied as they
are: ``(label)=`` targets, display math, and directives that take no prose
(``{tableofcontents}``, ``{bibliography}``).

:func:`markup` lists what a translation must keep verbatim (roles with their keys and
labels, directive names and options, labels, inline code, inline math, link targets);
``tests/book/test_zh_edition.py`` compares it between an English block and its
translation.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,}|:{3,})(?P<info>.*)$")
HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")
TARGET = re.compile(r"^\((?P<label>[\w\-:.]+)\)=[ \t]*$")
MATH_OPEN = re.compile(r"^[ \t]*(\$\$|\\begin\{(?P<env>[\w*]+)\})")
#: Directives whose whole content is markup, never prose.
VERBATIM_DIRECTIVES = {"tableofcontents", "bibliography"}

ROLE = re.compile(r"\{(?P<name>[a-zA-Z][\w:\-]*)\}`(?P<body>[^`]*)`")
DIRECTIVE = re.compile(
    r"^[ \t]*(?:`{3,}|:{3,})\{(?P<name>[\w:\-]+)\}[ \t]*(?P<arg>.*)$", re.MULTILINE
)
OPTION = re.compile(
    r"^[ \t]*:(?P<key>name|label|class|nonumber|hidden|width|alt):[ \t]*(?P<value>.*)$",
    re.MULTILINE,
)
LINK_TARGET = re.compile(r"\]\((?P<href>[^)\s]+)\)")
# inline math may run over a line break (the English is wrapped, its translation need
# not be)
INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)(?P<body>[^$]+?)(?<!\\)\$")
INLINE_CODE = re.compile(r"(?<![`}])(?P<ticks>`+)(?P<body>[^`]+?)(?P=ticks)(?!`)")
#: Roles whose body may carry a translated title: ``{ref}`title <label>``` keeps only
#: its label.
TITLED_ROLES = {"ref", "numref", "doc", "term", "eq"}


@dataclass(frozen=True)
class Block:
    text: str
    #: False for blocks copied as they are (targets, display math, {tableofcontents}):
    #: not in the catalog
    translatable: bool
    #: the exact text between the previous block (or the start) and this one: blank
    #: lines kept as they were
    lead: str = ""


def _fence_end(lines: list[str], i: int) -> int:
    """Index of the line that closes the fence opened at ``lines[i]`` (nested fences of
    the same kind counted)."""
    m = FENCE_OPEN.match(lines[i])
    fence, char = m.group("fence"), m.group("fence")[0]
    is_directive = m.group("info").strip().startswith("{")
    close = re.compile(rf"^[ \t]*{re.escape(char)}{{{len(fence)},}}[ \t]*$")
    depth = 0
    for j in range(i + 1, len(lines)):
        inner = FENCE_OPEN.match(lines[j])
        if close.match(lines[j]):
            if depth == 0:
                return j
            depth -= 1
        elif (
            is_directive
            and inner
            and inner.group("fence") == fence
            and inner.group("info").strip()
        ):
            depth += 1
    return len(lines) - 1  # unclosed: to the end, as CommonMark does


def _math_end(lines: list[str], i: int) -> int:
    m = MATH_OPEN.match(lines[i])
    if m.group("env"):
        end = re.compile(rf"\\end\{{{re.escape(m.group('env'))}\}}")
        for j in range(i, len(lines)):
            if end.search(lines[j]):
                return j
        return len(lines) - 1
    rest = lines[i].strip()[2:]
    if re.search(r"\$\$[ \t]*(\([\w\-:.]+\))?[ \t]*$", rest):
        return i  # $$ ... $$ on one line
    for j in range(i + 1, len(lines)):
        if re.search(r"\$\$[ \t]*(\([\w\-:.]+\))?[ \t]*$", lines[j]):
            return j
    return len(lines) - 1


def _verbatim(text: str) -> bool:
    first = text.lstrip("\n").split("\n", 1)[0]
    if TARGET.match(first) or MATH_OPEN.match(first):
        return True
    m = FENCE_OPEN.match(first)
    if m and re.match(r"\{(?P<name>[\w:\-]+)\}", m.group("info").strip()):
        return m.group("info").strip()[1:].split("}")[0] in VERBATIM_DIRECTIVES
    return False


def split_blocks(text: str) -> list[Block]:
    """The blocks of a Markdown string, in order.
    ``join_blocks(blocks, [b.text for b in blocks], tail)`` with
    ``tail = trailing_text(text, blocks)`` gives ``text`` back exactly."""
    lines, spans, start = text.split("\n"), [], None

    def flush(end):
        nonlocal start
        if start is not None:
            spans.append((start, end))
            start = None

    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            flush(i - 1)
            i += 1
            continue
        if FENCE_OPEN.match(line) or MATH_OPEN.match(line):
            flush(i - 1)
            end = (_fence_end if FENCE_OPEN.match(line) else _math_end)(lines, i)
            spans.append((i, end))
            i = end + 1
            continue
        if TARGET.match(line) or HEADING.match(line):
            flush(i - 1)
            spans.append((i, i))
            i += 1
            continue
        if start is None:
            start = i
        i += 1
    flush(len(lines) - 1)
    blocks, previous_end = [], -1
    for s, e in spans:
        gap = lines[previous_end + 1 : s]
        lead = "\n".join(gap) + ("\n" if gap else "")
        if previous_end >= 0:
            lead = "\n" + lead
        body = "\n".join(lines[s : e + 1])
        blocks.append(Block(body, not _verbatim(body), lead))
        previous_end = e
    return blocks


def trailing_text(text: str, blocks: list[Block]) -> str:
    """What follows the last block of ``text`` (its final newlines)."""
    return text[len(join_blocks(blocks, [b.text for b in blocks])) :]


def join_blocks(blocks: list[Block], texts: list[str], tail: str = "") -> str:
    """The Markdown of ``blocks`` with each block's text replaced by ``texts`` (same
    length), separators kept."""
    if len(texts) != len(blocks):
        raise ValueError(f"texts: expected {len(blocks)} blocks, got {len(texts)}")
    return "".join(b.lead + t for b, t in zip(blocks, texts)) + tail


def _without_fenced_code(text: str) -> str:
    """``text`` without the content of plain code fences (directive fences keep
    theirs)."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if m and not m.group("info").strip().startswith("{"):
            i = _fence_end(lines, i) + 1
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def markup(text: str) -> Counter:
    """What a translation of ``text`` must keep verbatim, as a multiset of
    ``kind: value`` strings."""
    found: Counter = Counter()
    body = _without_fenced_code(text)
    for m in ROLE.finditer(body):
        name, role_body = m.group("name"), m.group("body")
        if name in TITLED_ROLES:
            target = re.search(r"<([^<>]+)>\s*$", role_body)
            role_body = target.group(1) if target else role_body
        found[f"role: {{{name}}}`{role_body}`"] += 1
    for m in DIRECTIVE.finditer(body):
        arg = m.group("arg").strip() if m.group("name").startswith("glue") else ""
        found[f"directive: {{{m.group('name')}}} {arg}".rstrip()] += 1
    for m in OPTION.finditer(body):
        if m.group("key") != "alt":
            found[f"option: :{m.group('key')}: {m.group('value').strip()}"] += 1
    for line in body.split("\n"):
        if TARGET.match(line):
            found[f"target: {line.strip()}"] += 1
    without_roles = ROLE.sub(" ", body)
    for m in LINK_TARGET.finditer(without_roles):
        found[f"link: {m.group('href')}"] += 1
    for m in INLINE_CODE.finditer(without_roles):
        found[f"code: {m.group('body')}"] += 1
    for m in INLINE_MATH.finditer(INLINE_CODE.sub(" ", without_roles)):
        found[f"math: {' '.join(m.group('body').split())}"] += 1
    return found
