"""Reading a submitted notebook and a sandbox's answers file: untrusted bytes, parsed in
a child process under limits, never in the grader's own process; lenient about what
the grader discards.

Each file is opened by the grader (a regular file, not followed through a link) and
handed to a fresh ``python -I`` running :mod:`._parse`, which caps its own address
space (:data:`PARSE_MEMORY_BYTES`) and CPU time before it reads a byte; the grader
kills it past a wall-clock limit (:data:`NOTEBOOK_SECONDS`, :data:`ANSWERS_SECONDS`)
and reads its reply with a size cap. What comes back is small: for a notebook, the
exercise ids its code cells check and, when asked, its cleaned text (code cells without
outputs) to run in the sandbox; for answers, one record per exercise.

A notebook: the grader never uses its outputs (its sandbox runs the code again and
drops what it prints), so they are cleared before the notebook is validated, the
``outputs`` key a code cell lacks is added, and a large file's outputs are skipped
without being parsed (:func:`without_outputs`): an honest notebook is not failed for a
plot of 40 MiB or for keys Jupyter itself does without. The limits: at most
:data:`MAX_FILE_BYTES` read, at most :data:`MAX_TOKENS` strings and brackets scanned,
what is parsed (the notebook without its outputs) at most :data:`MAX_NOTEBOOK_BYTES`,
at most :data:`MAX_CELLS` cells, nested at most :data:`MAX_JSON_DEPTH` deep (outputs
dropped), at most :data:`MAX_IDS` distinct exercise ids checked. One over a limit is
refused with the reason (``more than 10000 cells``).

The answers file (:func:`read_answers`): at most :data:`MAX_ANSWERS_BYTES` are read
(the rest is ignored), at most :data:`MAX_ANSWER_RECORDS` lines (lines past it are
ignored), each at most :data:`MAX_ANSWER_LINE_BYTES` (a longer record whose start names
its exercise is the answer ``too large``, marked incorrect; another is ignored) and
nested at most :data:`MAX_JSON_DEPTH` deep, records of at most :data:`MAX_ANSWER_IDS`
exercises. A bad record is that record's problem only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ._parse import ids_in_source, without_outputs  # noqa: F401  (re-exported)

#: What the grader parses: a notebook without its outputs.
MAX_NOTEBOOK_BYTES = 32 << 20
#: What it reads of a file: outputs included, skipped without being parsed.
MAX_FILE_BYTES = 256 << 20
#: Strings and brackets it scans past in a file over MAX_NOTEBOOK_BYTES.
MAX_TOKENS = 4_000_000
#: Cells of a notebook (the book's largest has 118).
MAX_CELLS = 10_000
#: Nesting of lists and objects, in a notebook without its outputs and in a record.
MAX_JSON_DEPTH = 64
#: Distinct exercise ids a notebook's code cells check (a chapter has at most 15).
MAX_IDS = 1000
#: What the grader reads of the answers file a sandbox wrote.
MAX_ANSWERS_BYTES = 32 << 20
#: One record of it (the largest right answer is about 1.3 KiB).
MAX_ANSWER_LINE_BYTES = 16 << 10
#: Its records (lines), and the exercises they name (the book has 65).
MAX_ANSWER_RECORDS = 100_000
MAX_ANSWER_IDS = 100
#: Address space of the parsing child.
PARSE_MEMORY_BYTES = 1 << 30
#: Wall-clock seconds to parse a notebook (CPU seconds: as many) and an answers file.
NOTEBOOK_SECONDS = 20
ANSWERS_SECONDS = 10

_PARSER = Path(__file__).with_name("_parse.py")


@dataclass(frozen=True)
class ParsedNotebook:
    """What the grader keeps of a notebook: the exercise ids its code cells check (in
    order), its number of cells, its cleaned text (compact JSON, code cells without
    outputs; None unless asked for) and the seconds parsing took."""

    ids: tuple
    cells: int
    text: str | None
    seconds: float


def _mib(n: int) -> str:
    return f"{n >> 20} MiB"


def _open_regular(path: Path, max_bytes: int | None):
    """A read-only descriptor of the regular file at ``path`` (a link is not
    followed), or ValueError saying why not; ``max_bytes``: its largest size."""
    try:
        fd = os.open(
            path,
            os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0),
        )
    except OSError as exc:
        if os.path.islink(path):
            raise ValueError("not a regular file") from None
        raise ValueError(f"cannot read the file ({exc.strerror})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ValueError("not a regular file")
    if max_bytes is not None and st.st_size > max_bytes:
        os.close(fd)
        raise ValueError(f"larger than {_mib(max_bytes)}")
    return fd


def _collect(proc, cap: int, deadline: float) -> bytearray | None:
    """The child's standard output, read until its end; None past ``deadline``
    (``time.monotonic()``) or past ``cap`` bytes."""
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    sink = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if not poller.poll(int(1000 * min(left, 0.5)) + 1):
            continue
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            continue
        if not chunk:
            return sink
        if len(sink) + len(chunk) > cap:
            return None
        sink += chunk


def _nbformat_folder() -> list:
    """The folder nbformat is installed in (the child runs in isolated mode: a user's
    or PYTHONPATH's site is not on its path), as a list; empty if not found."""
    spec = importlib.util.find_spec("nbformat")
    return [str(Path(spec.origin).parent.parent)] if spec and spec.origin else []


def _run_parser(kind: str, fd: int, settings: dict, seconds: int, cap: int):
    """``(header, body)``: the reply of :mod:`._parse` run on the open file ``fd``
    (closed here; ``kind``: ``notebook`` or ``answers``) with ``settings`` plus
    :data:`PARSE_MEMORY_BYTES` and ``seconds`` of CPU time, killed past ``seconds`` of
    wall-clock time or ``cap`` bytes of reply; ``body`` a memoryview. ValueError with
    the reason a file cannot be parsed, RuntimeError when the parser cannot run."""
    settings = dict(settings, memory=PARSE_MEMORY_BYTES, cpu=seconds)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", str(_PARSER), kind, json.dumps(settings)],
            stdin=fd,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={"PATH": os.defpath},
            start_new_session=True,
        )
    finally:
        os.close(fd)
    try:
        out = _collect(proc, cap, start + seconds)
        if out is not None:  # its output ended: it is exiting
            try:
                proc.wait(timeout=max(start + seconds - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                out = None
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.wait()
    if out is None:
        if time.monotonic() >= start + seconds:
            raise ValueError(f"parsing took more than {seconds} s")
        raise ValueError("parsing gave too large a reply")
    end = out.find(b"\n")
    try:
        header = json.loads(bytes(out[: end if end >= 0 else len(out)]))
    except ValueError:
        header = None
    if isinstance(header, dict) and "fault" in header:
        raise RuntimeError(f"the grader's parser cannot run: {header['fault']}")
    if not isinstance(header, dict) or "ok" not in header:
        if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
            raise ValueError(f"parsing took more than {int(seconds)} s of CPU time")
        code = proc.returncode
        how = f"signal {-code}" if code < 0 else f"exit code {code}"
        raise ValueError(f"parsing failed ({how})")
    if not header["ok"]:
        raise ValueError(header["reason"])
    return header, memoryview(out)[end + 1 :]


def parse_notebook(path, *, text: bool = True) -> ParsedNotebook:
    """The notebook at ``path`` parsed in a limited child process (the module's
    limits): its checked ids and, if ``text``, its cleaned text; or ValueError saying
    why it cannot be graded."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or a path, got {type(path).__name__}")
    start = time.monotonic()
    fd = _open_regular(Path(path), MAX_FILE_BYTES)
    settings = {
        "max_file": MAX_FILE_BYTES,
        "max_notebook": MAX_NOTEBOOK_BYTES,
        "max_tokens": MAX_TOKENS,
        "max_cells": MAX_CELLS,
        "max_depth": MAX_JSON_DEPTH,
        "max_ids": MAX_IDS,
        "max_text": 2 * MAX_NOTEBOOK_BYTES,
        "text": bool(text),
        "path": _nbformat_folder(),
    }
    cap = 2 * MAX_NOTEBOOK_BYTES + 80 * MAX_IDS + 4096
    header, body = _run_parser("notebook", fd, settings, NOTEBOOK_SECONDS, cap)
    if len(body) != header["bytes"]:
        raise ValueError("parsing gave a truncated reply")
    return ParsedNotebook(
        tuple(header["ids"]),
        header["cells"],
        str(body, "utf-8") if text else None,
        time.monotonic() - start,
    )


def load_notebook(path):
    """The validated notebook at ``path`` (an ``nbformat`` notebook), its code cells
    without outputs, or raise ValueError saying why it cannot be graded: parsed under
    the module's limits (:func:`parse_notebook`). Missing ``outputs`` keys are no fault:
    the grader discards outputs."""
    text = parse_notebook(path).text
    import nbformat

    return nbformat.from_dict(json.loads(text))


def exercises_in(nb_path) -> list[str]:
    """Exercise ids checked in a notebook, in order of appearance (from
    ``check("id", ...)`` calls); ValueError when it cannot be graded."""
    return list(parse_notebook(nb_path, text=False).ids)


def read_answers(path) -> list:
    """The answers file at ``path``, parsed in a limited child process: one record (a
    dict) per exercise, in order of its first record: the last that gives an answer, or
    else its last (so :func:`.grade.last_answers` reads it as it would the whole file).
    A link, a non-file, a file that cannot be parsed within the limits, and any line
    that does not parse or breaks a limit (the module's docstring) are ignored: a bad
    record is that record's problem only."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or a path, got {type(path).__name__}")
    try:
        fd = _open_regular(Path(path), None)
    except ValueError:
        return []
    settings = {
        "max_file": MAX_ANSWERS_BYTES,
        "max_line": MAX_ANSWER_LINE_BYTES,
        "max_records": MAX_ANSWER_RECORDS,
        "max_depth": MAX_JSON_DEPTH,
        "max_ids": MAX_ANSWER_IDS,
    }
    cap = (2 * MAX_ANSWER_LINE_BYTES + 1) * MAX_ANSWER_IDS + 4096
    try:
        _, body = _run_parser("answers", fd, settings, ANSWERS_SECONDS, cap)
    except ValueError:
        return []
    records = []
    for line in body.tobytes().splitlines():
        rec = json.loads(line)
        if isinstance(rec, dict):
            records.append(rec)
    return records
