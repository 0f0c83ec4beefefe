"""Reading a submitted notebook: bounded in what is read and parsed, lenient about what
the grader discards.

The grader never uses a notebook's outputs (its sandbox runs the code again and drops
what it prints), so :func:`load_notebook` clears them before the notebook is validated,
adds the ``outputs`` key a code cell lacks, and skips a large file's outputs without
parsing them (:func:`without_outputs`): an honest notebook is not failed for a plot of
40 MiB or for keys Jupyter itself does without. The limits stay: at most
:data:`MAX_FILE_BYTES` are read, at most :data:`MAX_TOKENS` strings and brackets are
scanned, and what is parsed (the notebook without its outputs) must fit in
:data:`MAX_NOTEBOOK_BYTES`.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

CHECK_CALL = re.compile(r"""check\(\s*["']([0-9A-Za-z_.\-]+)["']""")
#: What the grader parses: a notebook without its outputs.
MAX_NOTEBOOK_BYTES = 32 << 20
#: What it reads of a file: outputs included, skipped without being parsed.
MAX_FILE_BYTES = 256 << 20
#: Strings and brackets it scans past in a file over MAX_NOTEBOOK_BYTES.
MAX_TOKENS = 4_000_000
#: Skipping outputs: a JSON string, or a bracket.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_KEY = re.compile(rb"\s*:\s*")


def ids_in_source(nb) -> list[str]:
    """Exercise ids checked in the code cells of notebook ``nb``, in order of
    appearance."""
    ids = []
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            for ex_id in CHECK_CALL.findall(cell.get("source", "")):
                if ex_id not in ids:
                    ids.append(ex_id)
    return ids


def exercises_in(nb_path) -> list[str]:
    """Exercise ids checked in a notebook, in order of appearance (from
    ``check("id", ...)`` calls)."""
    return ids_in_source(load_notebook(nb_path))


def _skip(raw: bytes, at: int, budget: list) -> int:
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


def without_outputs(raw: bytes) -> bytes:
    """``raw``, a notebook's JSON text, with the value of every code cell's ``outputs``
    replaced by ``[]``: scanned (strings and brackets, at most :data:`MAX_TOKENS`), not
    parsed. Text that is not JSON comes back as broken as it was."""
    pieces, kept, pos, stack, budget = [], 0, 0, [], [MAX_TOKENS]
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
        elif token in (b"]", b"}"):
            if stack:
                stack.pop()
        elif stack and stack[-1][0] == b"{" and (key := _KEY.match(raw, pos)):
            stack[-1][1], pos = token, key.end()
            in_cell = [f[:1] for f in stack] == [[b"{"], [b"["], [b"{"]]
            outputs = token == b'"outputs"' and in_cell and stack[0][1] == b'"cells"'
            if outputs and raw[pos : pos + 1] in (b"[", b"{"):
                end = _skip(raw, pos, budget)
                pieces += [raw[kept:pos], b"[]"]
                kept = pos = end
    return b"".join(pieces) + raw[kept:]


def _mib(n: int) -> str:
    return f"{n >> 20} MiB"


def _read_limited(path: Path) -> bytes:
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise ValueError(f"cannot read the file ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("not a regular file")
    if st.st_size > MAX_FILE_BYTES:
        raise ValueError(f"larger than {_mib(MAX_FILE_BYTES)}")
    with open(path, "rb") as fh:
        raw = fh.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        raise ValueError(f"larger than {_mib(MAX_FILE_BYTES)}")
    return raw


def _without_code_outputs(data):
    """The parsed notebook ``data`` with every code cell's outputs and execution count
    cleared (added where missing)."""
    cells = data.get("cells") if isinstance(data, dict) else None
    for cell in cells if isinstance(cells, list) else []:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    return data


def load_notebook(path):
    """The validated notebook at ``path``, its code cells without outputs, or raise
    ValueError saying why it cannot be graded.

    At most :data:`MAX_FILE_BYTES` are read; a larger file than
    :data:`MAX_NOTEBOOK_BYTES` has its outputs skipped unparsed
    (:func:`without_outputs`), and what is parsed must fit in
    :data:`MAX_NOTEBOOK_BYTES`. Missing ``outputs`` keys are no fault: the grader
    discards outputs."""
    import nbformat

    raw = _read_limited(Path(path))
    if len(raw) > MAX_NOTEBOOK_BYTES:
        raw = without_outputs(raw)
    if len(raw) > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"larger than {_mib(MAX_NOTEBOOK_BYTES)} without its outputs")
    try:
        data = _without_code_outputs(json.loads(raw.decode("utf-8")))
        nb = nbformat.reads(json.dumps(data), as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # noqa: BLE001  (any parse or schema failure: the file is not a notebook)
        raise ValueError(f"{type(exc).__name__}") from None
    return nb
