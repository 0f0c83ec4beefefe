"""Untrusted bytes parsed under limits (issue #40): the grader parses a submitted
notebook and the answers file a sandboxed kernel wrote in a limited child process, so a
hostile file costs the grader's own process neither memory nor time, and only what the
verdict needs is kept across a batch.

The grader's memory is measured in a fresh Python process (how far its peak resident
size rises during the call), since the test process's own is noisy."""

import ast
import inspect
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from dpo_grpo.exercises import reading
from dpo_grpo.exercises.grade import grade_path, last_answers
from dpo_grpo.exercises.sandbox import read_answers

#: Peak growth of the grader's process allowed while it reads a hostile file (MiB): the
#: child's parse costs it nothing; a few MiB go to the reply.
GROWTH_MIB = 24
#: 31.5 MB: just under the answers file's and the parsed notebook's caps.
BIG = 31_500_000
RIGHT = '{"id": "04.4", "answer": {"kind": "str", "value": "b"}}\n'
UNTOUCHED = '{"id": "04.1", "answer": {"kind": "none"}}\n'


def _peak(setup: str, call: str, timeout: float = 120) -> dict:
    """Run ``setup`` then ``call`` (Python statements; ``call`` sets ``out``) in a
    fresh interpreter; return ``out`` with ``grew_mib``, how far its resident size
    rose above where it stood before ``call`` (Linux: the peak is reset first, so that
    what the imports took and freed does not count)."""
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("measures the peak resident size through Linux's /proc")
    code = (
        f"import json\n{setup}\n"
        "def status(key):\n"
        "    with open('/proc/self/status') as fh:\n"
        "        found = [s.split()[1] for s in fh if s.startswith(key)]\n"
        "    return int(found[0]) / 1024\n"
        "with open('/proc/self/clear_refs', 'w') as fh:\n"
        "    fh.write('5')\n"
        "before = status('VmRSS:')\n"
        f"{call}\n"
        "out['grew_mib'] = status('VmHWM:') - before\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def _answers_file(path: Path, attack: str) -> Path:
    with open(path, "w") as fh:
        fh.write(RIGHT)
        if attack == "line":  # one JSON value of ten million objects
            fh.write("[" + "{}," * ((BIG - 2) // 3) + "{}]\n")
        elif attack == "nested":
            fh.write("[" * (BIG // 2) + "]" * (BIG // 2) + "\n")
        elif attack == "number":
            fh.write('{"id": "04.2", "answer": {"kind": "float", "value": ')
            fh.write("9" * BIG + "}}\n")
        else:  # 200,000 tiny records
            fh.write(UNTOUCHED * 200_000)
        fh.write(UNTOUCHED)
    return path


@pytest.mark.parametrize("attack", ["line", "nested", "number", "records"])
def test_a_hostile_answers_file_costs_the_grader_nothing(tmp_path, attack):
    """The answers file is read as the sandbox reads it (``sandbox.read_answers``): its
    honest records still count, and the grader's process does not grow."""
    path = _answers_file(tmp_path / "answers.jsonl", attack)
    out = _peak(
        "from dpo_grpo.exercises.sandbox import read_answers",
        f"out = {{'recs': read_answers({str(path)!r})}}",
    )
    assert out["grew_mib"] < GROWTH_MIB, out["grew_mib"]
    answers, untouched = last_answers(out["recs"])
    expected = {"04.4": {"kind": "str", "value": "b"}}
    if attack == "number":  # its start names the exercise: an answer too large
        expected["04.2"] = {"kind": "other", "type": "too large"}
    assert answers == expected
    assert untouched == {"04.1"}
    assert len(out["recs"]) == len(expected) + 1  # one per exercise


def test_a_record_past_the_line_cap_is_an_answer_too_large(tmp_path):
    """A check of a huge array is recorded, then read as ``too large`` (marked
    incorrect), not parsed; records past the cap on their number are ignored."""
    huge = {"kind": "array", "shape": [4000], "data": [0.5] * 4000}
    path = tmp_path / "answers.jsonl"
    path.write_text(RIGHT + json.dumps({"id": "04.1", "answer": huge}) + "\n")
    assert read_answers(path)[1] == {
        "id": "04.1",
        "answer": {"kind": "other", "type": "too large"},
    }


def _notebook(path: Path, cells: int, source: str = "", metadata=None) -> Path:
    """A notebook of ``cells`` code cells of ``source`` (the first checks 04.4),
    written compactly, as a hostile one would be."""
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}}
    nb = {
        "cells": [
            dict(cell, id=f"{i:x}", outputs=[], source=source) for i in range(cells)
        ],
        "metadata": metadata or {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    nb["cells"][0]["source"] = (
        "from dpo_grpo.exercises import check\ncheck('04.4', 'b')"
    )
    path.write_text(json.dumps(nb, separators=(",", ":")))
    return path


@pytest.fixture(scope="module")
def many_cells(tmp_path_factory):
    """31.5 MB: 330,000 empty code cells."""
    path = _notebook(tmp_path_factory.mktemp("cells") / "cells.ipynb", 330_000)
    assert 31_000_000 < path.stat().st_size < reading.MAX_NOTEBOOK_BYTES
    return path


def test_a_notebook_of_300k_cells_is_refused_quickly_and_cheaply(many_cells):
    start = time.monotonic()
    out = _peak(
        "from dpo_grpo.exercises.reading import load_notebook",
        "try:\n"
        f"    load_notebook({str(many_cells)!r})\n"
        "    out = {'error': None}\n"
        "except ValueError as exc:\n"
        "    out = {'error': str(exc)}",
        timeout=60,
    )
    assert out["grew_mib"] < GROWTH_MIB, out["grew_mib"]
    assert time.monotonic() - start < 20
    assert out["error"] == "more than 10000 cells"


def test_nesting_and_bad_arguments_are_refused(tmp_path):
    deep = {"a": None}
    for _ in range(200):
        deep = {"a": deep}
    path = _notebook(tmp_path / "deep.ipynb", 2, metadata={"deep": deep})
    with pytest.raises(ValueError, match="nested deeper than 64"):
        reading.load_notebook(path)
    with pytest.raises(TypeError, match="path"):
        reading.load_notebook(3)
    with pytest.raises(TypeError, match="path"):
        read_answers(None)
    with pytest.raises(TypeError, match="nb"):
        reading.ids_in_source(None)


def test_the_parser_imports_nothing_of_the_package():
    """It runs by its path in isolated mode: the standard library and nbformat only
    (no NumPy, no torch, nothing a notebook's bytes could reach in the package)."""
    src = Path(reading.__file__).with_name("_parse.py").read_text(encoding="utf-8")
    names = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, "relative import in _parse.py"
            names.add(node.module.split(".")[0])
    assert names <= set(sys.stdlib_module_names) | {"nbformat", "__future__"}, names


def test_the_chapter_vote_keeps_no_notebook(tmp_path):
    """Without ``--chapter``, the batch keeps each notebook's checked ids, not the
    notebook: grading two 7.5 MB notebooks (no sandbox: it is replaced by one that
    records nothing) raises the grader's peak by the text of the one it grades and its
    copies while it is read (about 30 MiB), not by parsed notebooks (260 MiB when the
    vote kept them)."""
    for name in ("a", "b"):
        _notebook(tmp_path / f"{name}.ipynb", 5000, "x = 1\n" * 200)
    kw = (
        "unisolated=True"
        if "unisolated" in inspect.signature(grade_path).parameters
        else ""
    )
    out = _peak(
        "from dpo_grpo.exercises import grade, sandbox",
        "grade.run_sandboxed = lambda *a, **k: sandbox.RunResult()\n"
        f"grades = grade.grade_path({str(tmp_path)!r}, timeout=30, {kw})\n"
        "out = {'chapters': [g.chapter for g in grades]}",
    )
    assert out["chapters"] == ["04", "04"]
    assert out["grew_mib"] < 64, out


@pytest.mark.xdist_group("sandbox")
def test_the_time_bound_holds_for_hostile_files(tmp_path, many_cells):
    """A batch without ``--chapter`` of the 300k-cell notebook and of one that writes a
    31.5 MB answer line ends within ``(timeout + 35 s) × notebooks / jobs``, parsing
    included (the chapter vote runs ``jobs`` at a time too)."""
    shutil.copyfile(many_cells, tmp_path / "cells.ipynb")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import os\nfrom dpo_grpo.exercises import check\ncheck('04.4', 'b')\n"
            "with open(os.environ['DPO_GRPO_ANSWERS'], 'a') as fh:\n"
            f"    fh.write('[' + '{{}},' * {BIG // 3 - 1} + '{{}}]\\n')"
        )
    ]
    nbformat.write(nb, tmp_path / "line.ipynb")
    timeout, jobs, kw = 15, 2, {}
    if "unisolated" in inspect.signature(grade_path).parameters:
        kw["unisolated"] = True
    start = time.monotonic()
    cells, line = grade_path(tmp_path, timeout=timeout, jobs=jobs, **kw)
    took = time.monotonic() - start
    assert took < (timeout + 35) * 2 / jobs, took
    assert line.seconds < timeout + 35, line.seconds
    assert cells.note == "invalid notebook: more than 10000 cells"
    assert line.verdicts["04.4"] == "correct", line.note
