"""Grade filled student notebooks. Each notebook is untrusted: it runs in its own kernel, in its own process
group, under a wall-clock timeout, so a notebook that loops forever, raises, deletes variables or prints garbage
gets a clear verdict per exercise and the batch goes on.

Verdicts per exercise: ``correct``, ``incorrect``, ``error`` (the checked code raised), ``not attempted``,
``not reached`` (the notebook stopped or crashed before the check ran) and ``timeout``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .core import GRADE_LOG_ENV

CHECK_CALL = re.compile(r"""check\(\s*["']([0-9A-Za-z_.\-]+)["']""")


@dataclass
class NotebookGrade:
    notebook: str
    verdicts: dict  # exercise id -> verdict
    note: str = ""

    @property
    def score(self) -> float:
        return sum(v == "correct" for v in self.verdicts.values()) / max(len(self.verdicts), 1)


def exercises_in(nb_path) -> list[str]:
    """Exercise ids checked in a notebook, in order of appearance (from ``check("id", ...)`` calls)."""
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    ids = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            for ex_id in CHECK_CALL.findall(cell.source):
                if ex_id not in ids:
                    ids.append(ex_id)
    return ids


def _execute(nb_path: Path, log_path: Path, timeout: float) -> str:
    """Run the notebook in a child process (own kernel, own process group); return '' or a failure note."""
    env = dict(os.environ, **{GRADE_LOG_ENV: str(log_path)})
    cmd = [sys.executable, "-m", "dpo_grpo.exercises._run_notebook", str(nb_path), str(timeout)]
    proc = subprocess.Popen(cmd, env=env, cwd=nb_path.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout + 30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "timeout"
    text = out.decode("utf-8", "replace").strip()
    if proc.returncode == 3:
        return "timeout"
    if proc.returncode != 0:
        return "crashed: " + (text.splitlines()[-1][:200] if text else f"exit code {proc.returncode}")
    return ""


def grade_notebook(nb_path, timeout: float = 120.0) -> NotebookGrade:
    """Execute one notebook and return the verdict of every exercise it checks."""
    nb_path = Path(nb_path).resolve()
    ids = exercises_in(nb_path)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "checks.jsonl"
        log.touch()
        note = _execute(nb_path, log, timeout)
        results = {}
        for line in log.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:  # a notebook that wrote garbage into the log
                continue
            if isinstance(rec, dict) and rec.get("id") in ids and rec.get("status") in (
                    "correct", "incorrect", "error", "not attempted"):
                results[rec["id"]] = rec["status"]  # the last check of an exercise counts
    missing = "timeout" if note == "timeout" else "not reached"
    verdicts = {ex_id: results.get(ex_id, missing) for ex_id in ids}
    return NotebookGrade(nb_path.name, verdicts, note)


def grade_path(path, timeout: float = 120.0) -> list[NotebookGrade]:
    """Grade one notebook or every ``*.ipynb`` in a folder (sorted), one kernel each."""
    path = Path(path)
    if path.is_dir():
        notebooks = sorted(path.glob("*.ipynb"))
    elif path.suffix == ".ipynb" and path.exists():
        notebooks = [path]
    else:
        raise ValueError(f"path must be a notebook (.ipynb) or a folder of notebooks, got {path}")
    return [grade_notebook(nb, timeout=timeout) for nb in notebooks]


def to_rows(grades):
    rows = []
    for g in grades:
        for ex_id, verdict in g.verdicts.items():
            rows.append({"notebook": g.notebook, "exercise": ex_id, "verdict": verdict, "note": g.note})
        rows.append({"notebook": g.notebook, "exercise": "SCORE",
                     "verdict": f"{sum(v == 'correct' for v in g.verdicts.values())}/{len(g.verdicts)}",
                     "note": g.note})
    return rows


def to_csv(grades) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=["notebook", "exercise", "verdict", "note"])
    writer.writeheader()
    writer.writerows(to_rows(grades))
    return buf.getvalue()


def to_markdown(grades) -> str:
    lines = ["| notebook | exercise | verdict | note |", "|---|---|---|---|"]
    for r in to_rows(grades):
        lines.append(f"| {r['notebook']} | {r['exercise']} | {r['verdict']} | {r['note']} |")
    return "\n".join(lines) + "\n"
