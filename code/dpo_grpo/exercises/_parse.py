"""The grader's parser of untrusted bytes, run as a child process under limits
(:mod:`.reading` starts it; nothing here runs in the grader's own process).

``python -I _parse.py KIND SETTINGS`` reads a submitted notebook (``KIND`` is
``notebook``) or the answers file a sandboxed kernel wrote (``answers``) on its standard
input, a file the grader opened, and writes a small reply on its standard output: one
JSON header line, then, for a notebook asked with its text, the cleaned notebook
(compact JSON, code cells without outputs), or, for answers, one record per line.
``SETTINGS`` (JSON) holds the limits, all chosen by the grader: before it reads a byte
the child caps its own address space and CPU time and may write no file. It imports the
standard library and, for a notebook, ``nbformat``, never the package (run by its path
in isolated mode, its folder is not on ``sys.path``), so it starts in about 0.2 s.

The header: ``{"ok": true, "ids": [...], "cells": N, "bytes": B}`` for a notebook (the
exercise ids its code cells check, in order; its cells; the bytes of text that
follow), ``{"ok": true, "records": K, "lines": L}`` for answers, ``{"ok": false,
"reason": "..."}`` for a notebook the grader cannot grade, and ``{"fault": "..."}``
when the parser itself cannot work (nbformat missing): the grader's fault, not the
notebook's.
"""

from __future__ import annotations

import json
import re
import sys

#: ``check("id", ...)`` in a code cell; an id is at most 64 characters.
CHECK_CALL = re.compile(r"""check\(\s*["']([0-9A-Za-z_.\-]{1,64})["']""")
#: Skipping outputs: a JSON string, or a bracket.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_KEY = re.compile(rb"\s*:\s*")
#: The start of a record the selfcheck writes: what names a line too long to parse.
_RECORD_ID = re.compile(rb'\{\s*"id"\s*:\s*"([0-9A-Za-z_.\-]{1,64})"')
#: The answer a record too long to parse stands for (as the kernel records an array of
#: more than a million numbers).
TOO_LARGE = {"kind": "other", "type": "too large"}


def ids_in_source(nb, max_ids: int | None = None) -> list[str]:
    """Exercise ids checked in the code cells of notebook ``nb`` (a dict with a list of
    cells), in order of appearance; ValueError when there are more than ``max_ids``
    distinct ones."""
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise TypeError(f"nb must be a notebook (cells), got {type(nb).__name__}")
    ids, seen = [], set()
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(s for s in source if isinstance(s, str))
        for ex_id in CHECK_CALL.findall(source if isinstance(source, str) else ""):
            if ex_id not in seen:
                seen.add(ex_id)
                ids.append(ex_id)
                if max_ids is not None and len(ids) > max_ids:
                    raise ValueError(f"checks more than {max_ids} exercise ids")
    return ids


def _skip(raw, at: int, budget: list) -> int:
    """The index just past the JSON value whose bracket is at ``at``."""
    depth, pos = 0, at
    while True:
        m = _TOKEN.search(raw, pos)
        if m is None:
            return len(raw)
        budget[0] -= 1
        if budget[0] < 0:
            raise ValueError("too many JSON tokens")
        pos, token = m.end(), m.group()
        if token in (b"[", b"{"):
            depth += 1
        elif token in (b"]", b"}"):
            depth -= 1
            if depth == 0:
                return pos


def without_outputs(
    raw: bytes, max_tokens: int, max_bytes: int | None = None, max_cells: int = 0
) -> bytes:
    """``raw``, a notebook's JSON text, with the value of every code cell's ``outputs``
    replaced by ``[]``: scanned (strings and brackets, at most ``max_tokens``), not
    parsed. Text that is not JSON comes back as broken as it was. ValueError as soon as
    what is kept passes ``max_bytes`` or the cells pass ``max_cells`` (if given)."""
    pieces, kept, pos, stack, budget, size, cells = [], 0, 0, [], [max_tokens], 0, 0
    view = memoryview(raw)
    while True:
        m = _TOKEN.search(raw, pos)
        if m is None:
            break
        budget[0] -= 1
        if budget[0] < 0:
            raise ValueError("too many JSON tokens")
        pos, token = m.end(), m.group()
        if token in (b"[", b"{"):
            stack.append([token, None])
            if len(stack) == 3 and stack[0][1] == b'"cells"' and stack[1][0] == b"[":
                cells += 1
                if max_cells and cells > max_cells:
                    raise ValueError(f"more than {max_cells} cells")
        elif token in (b"]", b"}"):
            if stack:
                stack.pop()
        elif stack and stack[-1][0] == b"{" and (key := _KEY.match(raw, pos)):
            stack[-1][1], pos = token, key.end()
            in_cell = [f[:1] for f in stack] == [[b"{"], [b"["], [b"{"]]
            outputs = token == b'"outputs"' and in_cell and stack[0][1] == b'"cells"'
            if outputs and raw[pos : pos + 1] in (b"[", b"{"):
                end = _skip(raw, pos, budget)
                pieces += [view[kept:pos], b"[]"]
                size += pos - kept + 2
                kept = pos = end
        if max_bytes is not None and size + pos - kept > max_bytes:
            raise ValueError(f"larger than {max_bytes >> 20} MiB without its outputs")
    return b"".join(pieces) + raw[kept:]


def nested_deeper(value, limit: int) -> bool:
    """Whether the parsed JSON ``value`` nests lists and objects more than ``limit``
    deep (``{}`` is 1 deep)."""
    stack = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return False


def _without_code_outputs(data):
    """The parsed notebook ``data`` with every code cell's outputs and execution count
    cleared (added where missing)."""
    cells = data.get("cells") if isinstance(data, dict) else None
    for cell in cells if isinstance(cells, list) else []:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    return data


def clean_notebook(raw: bytes, limits: dict):
    """``(notebook, ids)``: the validated notebook of the JSON text ``raw`` (a dict,
    code cells without outputs) and the exercise ids its code cells check; or
    ValueError saying why it cannot be graded. ``limits``: ``max_notebook`` (bytes
    parsed, outputs skipped unparsed beyond it), ``max_tokens`` (scanned to skip them),
    ``max_cells``, ``max_depth`` (nesting, outputs dropped), ``max_ids``."""
    import nbformat
    from nbformat.reader import reads

    cap, cells = limits["max_notebook"], limits["max_cells"]
    # a large file, or one that may have too many cells: scanned first (its cells
    # counted, its outputs skipped), so that it is refused before it is parsed
    if len(raw) > cap or raw.count(b'"cell_type"') > cells:
        raw = without_outputs(raw, limits["max_tokens"], cap, cells)
    if len(raw) > cap:
        raise ValueError(f"larger than {cap >> 20} MiB without its outputs")
    try:
        data = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ValueError(f"nested deeper than {limits['max_depth']} levels") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(type(exc).__name__) from None
    del raw
    found = data.get("cells") if isinstance(data, dict) else None
    if isinstance(found, list) and len(found) > cells:
        raise ValueError(f"more than {cells} cells")
    data = _without_code_outputs(data)
    if nested_deeper(data, limits["max_depth"]):
        raise ValueError(f"nested deeper than {limits['max_depth']} levels")
    try:
        nb = nbformat.convert(reads(json.dumps(data)), 4)
        nbformat.validate(nb)
    except Exception as exc:  # noqa: BLE001  (any parse or schema failure: the file is not a notebook)
        raise ValueError(type(exc).__name__) from None
    return nb, ids_in_source(nb, limits["max_ids"])


def notebook_text(nb, max_bytes: int) -> bytes:
    """The notebook ``nb`` as compact UTF-8 JSON (ASCII where a string holds a lone
    surrogate); ValueError past ``max_bytes``."""
    try:
        text = json.dumps(nb, ensure_ascii=False, separators=(",", ":")).encode()
    except UnicodeEncodeError:
        text = json.dumps(nb, separators=(",", ":")).encode()
    if len(text) > max_bytes:
        raise ValueError(f"larger than {max_bytes >> 20} MiB once cleaned")
    return text


def last_records(data: bytes, limits: dict) -> tuple[list, int]:
    """``(records, lines)``: of the answers file's bytes ``data``, one record per
    exercise as ASCII JSON text, in order of its first record: its last record that
    gives an answer (``answer`` not of kind ``none``), else its last record; and the
    lines read. ``limits``: ``max_line`` (a longer line, or a record whose text is
    more than twice as long, is the answer :data:`TOO_LARGE` when its start names the
    exercise, else ignored), ``max_records`` (lines past it are ignored),
    ``max_depth`` (a record nested deeper is ignored), ``max_ids`` (records of further
    exercises are ignored). Lines that are not a JSON object with a string ``id`` are
    ignored: a bad record is that record's problem only."""
    kept, pos, lines, cap = {}, 0, 0, limits["max_line"]
    while pos < len(data) and lines < limits["max_records"]:
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        start, pos = pos, end + 1
        if end - start > cap:
            m = _RECORD_ID.match(data, start, min(end, start + 256))
            rec = {"id": m.group(1).decode(), "answer": TOO_LARGE} if m else None
        else:
            line = data[start:end]
            if not line.strip():
                continue
            try:
                rec = json.loads(line.decode("utf-8", "replace"))
            except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
                lines += 1
                continue
        lines += 1
        if not isinstance(rec, dict) or not isinstance(rec.get("id"), str):
            continue
        if len(rec["id"]) > 64 or nested_deeper(rec, limits["max_depth"]):
            continue
        text = json.dumps(rec)
        if len(text) > 2 * cap:
            text = json.dumps({"id": rec["id"], "answer": TOO_LARGE})
        ex_id, answer = rec["id"], rec.get("answer")
        gives = isinstance(answer, dict) and answer.get("kind") != "none"
        if ex_id not in kept and len(kept) >= limits["max_ids"]:
            continue
        if ex_id not in kept or gives or not kept[ex_id][1]:
            kept[ex_id] = (text, gives)
    return [text for text, _ in kept.values()], lines


def _limit(memory: int, cpu: int) -> None:
    import resource

    for name, value in (
        ("RLIMIT_AS", memory),
        ("RLIMIT_CPU", cpu),
        ("RLIMIT_FSIZE", 0),
        ("RLIMIT_CORE", 0),
    ):
        which = getattr(resource, name, None)
        if which is None:
            continue
        hard = resource.getrlimit(which)[1]
        # CPU: SIGXCPU at the soft limit, SIGKILL a second later
        want = value + 1 if name == "RLIMIT_CPU" else value
        if hard != resource.RLIM_INFINITY:
            value, want = min(value, hard), min(want, hard)
        try:
            resource.setrlimit(which, (value, want))
        except (ValueError, OSError):  # macOS refuses some: the wall clock still holds
            pass


def _reply(kind: str, settings: dict, stdin) -> tuple[dict, list]:
    if kind == "answers":  # past its cap, the file is ignored
        records, lines = last_records(stdin.read(settings["max_file"]), settings)
        body = [text.encode() + b"\n" for text in records]
        return {"ok": True, "records": len(records), "lines": lines}, body
    raw = stdin.read(settings["max_file"] + 1)
    if len(raw) > settings["max_file"]:
        raise ValueError(f"larger than {settings['max_file'] >> 20} MiB")
    nb, ids = clean_notebook(raw, settings)
    del raw
    text = notebook_text(nb, settings["max_text"]) if settings["text"] else b""
    return {"ok": True, "ids": ids, "cells": len(nb.cells), "bytes": len(text)}, [text]


def main(argv) -> int:
    """Run as ``python -I _parse.py KIND SETTINGS``: the reply goes to stdout."""
    kind, settings = argv[1], json.loads(argv[2])
    _limit(settings["memory"], settings["cpu"])
    out = sys.stdout.buffer
    if kind == "notebook":
        # jsonschema builds an IRI grammar on import (1 s) that no notebook schema uses
        sys.modules.setdefault("rfc3987_syntax", None)
        sys.path += [p for p in settings.get("path", []) if p not in sys.path]
        try:
            import nbformat  # noqa: F401
        except Exception as exc:  # noqa: BLE001  (the grader's installation, not the notebook)
            out.write(json.dumps({"fault": f"{type(exc).__name__}: {exc}"}).encode())
            return 2
    body = []
    try:
        header, body = _reply(kind, settings, sys.stdin.buffer)
    except ValueError as exc:
        header = {"ok": False, "reason": str(exc)}
    except MemoryError:
        header = {
            "ok": False,
            "reason": f"needs more than {settings['memory'] >> 20} MiB",
        }
    except RecursionError:
        header = {"ok": False, "reason": "nested too deeply"}
    out.write(json.dumps(header).encode() + b"\n")
    for chunk in body:
        out.write(chunk)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
