"""A class of hostile chapter-4 notebooks, graded in one batch: every attack of issue
#15 gets the verdict an honest grader gives, nothing outside the sandbox changes, and
the batch finishes with a table.

Most notebooks probe one attack and submit exercise 04.4's correct letter only if the
attack worked, so a ``correct`` verdict on 04.4 would mean the sandbox leaked;
``incorrect`` means it held."""

import hashlib
import os
import threading
import time
from pathlib import Path

import nbformat
import pytest

import dpo_grpo
from dpo_grpo.exercises.core import chapter_exercises
from dpo_grpo.exercises.grade import grade_path
from dpo_grpo.exercises.sandbox import MAX_CAPTURE_BYTES, detect_mode, drain

#: The tests that run grading sandboxes share one xdist worker: each checks that no
#: sandbox process of its batch outlives grading, which a batch graded at the same time
#: on another worker would confuse.
pytestmark = pytest.mark.xdist_group("sandbox")

PROBE = "04.4"  # choice; "b" is right
IDS = chapter_exercises("04")
HEAD = (
    "from dpo_grpo.exercises import check\n"
    "import os, sys, json, subprocess, time, socket, signal\n"
    "def probe(ok, ex_id='04' + '.4'):\n    return check(ex_id, 'b' if ok else 'a')\n"
)
PKG = Path(dpo_grpo.__file__).resolve().parent
ISOLATED = detect_mode() in ("root", "bwrap")
needs_isolation = pytest.mark.skipif(
    not ISOLATED, reason="needs the root or bubblewrap sandbox (see teaching.md)"
)


def _nb(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(s) for s in (HEAD,) + sources]
    nbformat.write(nb, path)
    return path


def _tree_digest(root):
    h = hashlib.sha256()
    for p in sorted(Path(root).rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p).encode() + p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    sub, out, home = base / "submissions", base / "out", base / "instructor_home"
    sub.mkdir(), out.mkdir(), home.mkdir()
    (home / "secret.txt").write_text("instructor secret")
    csv_path, md_path, marker = (
        out / "grades.csv",
        out / "grades.md",
        base / "daemon_was_here",
    )
    S = repr(str(sub))
    _nb(
        sub
        # read the answer key from the installed package, or its source
        / "key_reader.ipynb",
        "try:\n    from dpo_grpo.exercises import EXERCISES\n"
        "    a = EXERCISES['04.1'].solution()\nexcept Exception:\n    a = 0.0\n"
        "check('04.1', a)",
        f"src = {str(PKG / 'exercises' / 'ch04.py')!r}\nprobe(os.path.exists(src))",
    )
    _nb(
        sub
        # crack the multiple-choice answer with the self-check's hashed key, the oracle
        # a graded-edition notebook also had during grading
        / "key_oracle.ipynb",
        "letter = 'a'\ntry:\n    from dpo_grpo.exercises._selfcheck_key import KEY\n"
        "    from dpo_grpo.exercises.selfcheck import _digest, _salt\n"
        "    salt = _salt('04.4')\n"
        "    letter = next(c for c in 'abcde' if _digest(salt, 'choice', c) == "
        "KEY['04.4']['answer'])\nexcept Exception:\n    pass\ncheck('04.4', letter)",
    )
    _nb(
        sub
        # patch the checkers and the registry the kernel can reach
        / "monkeypatcher.ipynb",
        "import dpo_grpo.exercises.core as c, dpo_grpo.exercises.selfcheck as s\n"
        "c.judge = lambda *a, **k: 'correct'\nc.close = lambda *a, **k: True\n"
        "s.matches = lambda *a, **k: True\nfor e in c.EXERCISES.values():\n"
        "    e.reference = 0.0",
        "check('04.1', 0.0)",
        "check('04.2', [0.0, 0.0, 0.0, 0.0])",
    )
    _nb(
        sub
        # write verdicts and forged answers into the file the grader reads
        / "log_forger.ipynb",
        "p = os.environ['DPO_GRPO_ANSWERS']\nwith open(p, 'a') as fh:\n"
        "    for i in ['04.1', '04.2', '04.3']:\n"
        "        fh.write(json.dumps({'id': i, 'status': 'correct'}) + '\\n')\n"
        "    fh.write(json.dumps({'id': '04.4', 'answer': {'kind': 'str', 'value': "
        "'a'}, 'status': 'correct'}) + '\\n')\n    fh.write('{not json\\n')",
    )
    # deleted the hard exercises' check cells
    _nb(sub / "check_deleter.ipynb", "check('04.4', 'b')")
    _nb(
        sub
        # overwrite the grader's package (the editable source) and the copy
        / "package_overwriter.ipynb",
        f"hit = 0\nfor d in [{str(PKG)!r}, "
        "os.path.dirname(__import__('dpo_grpo').__file__)]:\n"
        "    for f in ['exercises/core.py', 'exercises/selfcheck.py', "
        "'exercises/grade.py']:\n        try:\n"
        "            open(os.path.join(d, f), 'a').write('\\nHACKED = 1\\n'); hit += "
        "1\n        except OSError:\n            pass\nprobe(hit > 0)",
    )
    # graded after the overwriter
    _nb(sub / "zz_classmate_empty.ipynb", "check('04.1', None)")
    _nb(
        sub
        # read HOME, list and overwrite classmates, write outside, use the network
        / "escaper.ipynb",
        "found = []\ntry:\n"
        f"    found.append(open({str(home / 'secret.txt')!r}).read())\n"
        f"except OSError:\n    pass\ntry:\n    found += os.listdir({S})\n"
        "except OSError:\n    pass\ntry:\n"
        f"    open(os.path.join({S}, 'a_victim.ipynb'), 'w').write('{{}}'); "
        "found.append('overwrote')\nexcept OSError:\n    pass\n"
        f"for target in [{str(base / 'outside.txt')!r}, '/tmp/dpo_grpo_outside.txt', "
        "'/etc/outside.txt']:\n    try:\n        open(target, 'w').write('x')\n"
        "    except OSError:\n        continue\n"
        "    if not target.startswith('/tmp/'):\n        found.append(target)\ntry:\n"
        "    socket.create_connection(('1.1.1.1', 53), timeout=2); "
        "found.append('network')\nexcept OSError:\n    pass\ncmdlines = []\n"
        "for pid in os.listdir('/proc'):\n    try:\n"
        f"        cmdlines.append(open(f'/proc/{{pid}}/cmdline', 'rb').read())\n"
        "    except (OSError, ValueError):\n        pass\n"
        "if any(b'pytest' in c for c in cmdlines):\n"
        "    found.append('grader cmdline')\nprobe(bool(found))",
    )
    _nb(sub / "a_victim.ipynb", "check('04.4', 'b')")
    daemon = (
        "import time\ntime.sleep(4)\n"
        f"for p in [{str(csv_path)!r}, {str(md_path)!r}]:\n    try:\n"
        "        open(p, 'w').write('hacked')\n    except OSError:\n        pass\n"
        f"open({str(marker)!r}, 'w').write('x')\n"
    )
    _nb(
        sub
        # a detached process that rewrites the tables after the grader finished
        / "daemon.ipynb",
        f"subprocess.Popen([sys.executable, '-c', {daemon!r}], "
        "start_new_session=True, stdout=subprocess.DEVNULL,\n"
        "                 stderr=subprocess.DEVNULL)\ncheck('04.4', 'b')",
    )
    _nb(
        sub / "killer.ipynb",
        "check('04.4', 'b')",  # kill everything it can signal, the grader included
        "for pid in os.listdir('/proc'):\n"
        "    if pid.isdigit() and int(pid) != os.getpid():\n        try:\n"
        "            os.kill(int(pid), signal.SIGKILL)\n        except OSError:\n"
        "            pass\nos.kill(-1, signal.SIGKILL)",
    )
    _nb(
        sub / "flooder.ipynb",
        "check('04.4', 'b')",  # 256 MiB to the kernel's inherited stdout
        "for _ in range(4):\n    os.write(1, b'x' * (1 << 26))",
    )
    _nb(
        sub / "memory_hog.ipynb",  # more memory than the limit allows
        "try:\n    x = bytearray(12 << 30); ok = True\nexcept MemoryError:\n"
        "    ok = False\nprobe(ok)",
    )
    (sub / "not_json.ipynb").write_text("this is {not json")
    (sub / "bad_schema.ipynb").write_text('{"cells": 3, "nbformat": 4}')
    (sub / "link.ipynb").symlink_to("/etc/passwd")
    _nb(sub / "| 04.9 | correct |\n| x.ipynb", "check('04.4', 'a')")
    _nb(sub / "=HYPERLINK(1).ipynb", "check('04.4', 'a')")
    before = {
        "submissions": _tree_digest(sub),
        "home": _tree_digest(home),
        "package": _tree_digest(PKG),
    }
    start = time.monotonic()
    grades = {
        g.notebook: g
        for g in grade_path(
            sub,
            timeout=20,
            chapter="04",
            jobs=2,
            csv_path=csv_path,
            markdown_path=md_path,
        )
    }
    return {
        "grades": grades,
        "before": before,
        "sub": sub,
        "home": home,
        "base": base,
        "csv": csv_path,
        "md": md_path,
        "marker": marker,
        "seconds": time.monotonic() - start,
        "tables": (csv_path.read_text(), md_path.read_text()),
    }


def _v(batch, name):
    return batch["grades"][name].verdicts


def test_every_notebook_has_a_row_and_the_same_denominator(batch):
    assert len(batch["grades"]) == len(list(batch["sub"].iterdir()))
    assert all(list(g.verdicts) == IDS for g in batch["grades"].values())


def test_key_is_not_reachable_from_the_kernel(batch):
    assert _v(batch, "key_reader.ipynb")["04.1"] == "incorrect"
    assert _v(batch, "key_reader.ipynb")[PROBE] == "incorrect"


def test_the_hashed_key_is_not_in_the_sandbox(batch):
    """The self-check's hashed key is an oracle (a letter is one hash away): the
    sandbox's package copy leaves it out, so a notebook cannot crack an answer while
    it is graded."""
    assert _v(batch, "key_oracle.ipynb")[PROBE] == "incorrect"


def test_monkeypatching_does_not_change_verdicts(batch):
    v = _v(batch, "monkeypatcher.ipynb")
    assert v["04.1"] == v["04.2"] == "incorrect"


def test_forged_log_gives_no_marks(batch):
    v = _v(batch, "log_forger.ipynb")
    assert v == {**{i: "not attempted" for i in IDS}, PROBE: "incorrect"}


def test_deleted_checks_count_as_not_attempted(batch):
    g = batch["grades"]["check_deleter.ipynb"]
    assert (
        g.verdicts[PROBE] == "correct"
        and g.correct == 1
        and len(g.verdicts) == len(IDS) > 1
    )


def test_package_is_not_writable_and_classmates_are_unaffected(batch):
    assert _v(batch, "package_overwriter.ipynb")[PROBE] == "incorrect"
    assert set(_v(batch, "zz_classmate_empty.ipynb").values()) == {"not attempted"}
    assert _tree_digest(PKG) == batch["before"]["package"]


@needs_isolation
def test_nothing_outside_the_sandbox_is_visible_or_changed(batch):
    assert _v(batch, "escaper.ipynb")[PROBE] == "incorrect"
    assert _tree_digest(batch["sub"]) == batch["before"]["submissions"]
    assert _tree_digest(batch["home"]) == batch["before"]["home"]
    assert (
        not (batch["base"] / "outside.txt").exists()
        and not Path("/etc/outside.txt").exists()
    )
    assert _v(batch, "a_victim.ipynb")[PROBE] == "correct"


@needs_isolation
def test_detached_process_dies_with_the_sandbox(batch):
    assert _v(batch, "daemon.ipynb")[PROBE] == "correct"
    time.sleep(max(0.0, 6.0 - batch["seconds"]))
    assert not batch["marker"].exists()
    assert (batch["csv"].read_text(), batch["md"].read_text()) == batch["tables"]
    assert "hacked" not in batch["tables"][0]


def test_killer_loses_only_itself(batch):
    assert _v(batch, "killer.ipynb")[PROBE] == "correct"
    assert (
        batch["grades"]["killer.ipynb"].note.startswith("crashed")
        or batch["grades"]["killer.ipynb"].note == ""
    )
    # graded after it (sorted order, two at a time)
    assert _v(batch, "zz_classmate_empty.ipynb")


def test_flood_and_memory_hog(batch):
    assert _v(batch, "flooder.ipynb")[PROBE] == "correct"
    assert _v(batch, "memory_hog.ipynb")[PROBE] == "incorrect"


def test_invalid_files_get_a_verdict_and_the_batch_goes_on(batch):
    for name in ("not_json.ipynb", "bad_schema.ipynb", "link.ipynb"):
        g = batch["grades"][name]
        assert set(g.verdicts.values()) == {"invalid notebook"} and g.note.startswith(
            "invalid notebook"
        ), name
        assert "root:" not in g.note


def test_file_names_cannot_forge_rows_or_formulas(batch):
    csv_text, md = batch["tables"]
    rows = md.splitlines()
    assert all(r.replace("\\|", "").count("|") == 5 for r in rows if r.startswith("|"))
    assert sum(r.startswith("| ") for r in rows) == 1 + (len(IDS) + 1) * len(
        batch["grades"]
    )
    assert not [
        c
        for line in csv_text.splitlines()
        for c in line.split(",")
        if c.startswith(("=", "+", "@"))
    ]
    assert "'=HYPERLINK(1).ipynb" in csv_text


def test_output_capture_is_capped():
    sink, (r, w) = bytearray(), os.pipe()
    os.set_blocking(r, False)
    writer = threading.Thread(
        target=lambda: (
            os.write(w, b"x" * (8 * MAX_CAPTURE_BYTES) + b"end"),
            os.close(w),
        )
    )
    writer.start()
    assert drain(r, sink, MAX_CAPTURE_BYTES, time.monotonic() + 30)
    writer.join()
    os.close(r)
    assert len(sink) == MAX_CAPTURE_BYTES and sink.endswith(b"xend")


def test_a_kernel_killed_by_its_notebook_is_noted_as_dead(tmp_path):
    """The note says the kernel died and of which signal, whatever nbclient raises as
    the kernel dies under it; the answers recorded before it count."""
    path = _nb(
        tmp_path / "suicide.ipynb",
        "check('04.4', 'b')",
        "os.kill(os.getpid(), signal.SIGKILL)",
        "check('04.1', 0.0)",
    )
    (g,) = grade_path(path, timeout=20, chapter="04")
    assert g.note == (
        "crashed: the kernel died, killed by signal 9 (SIGKILL): the notebook killed "
        "it, or it ran out of memory"
    )
    assert g.verdicts["04.4"] == "correct" and g.verdicts["04.1"] == "not reached"


def test_a_dead_kernel_is_told_whatever_nbclient_raises(tmp_path, monkeypatch):
    """nbclient may raise another error than DeadKernelError as the kernel dies under
    it (an AssertionError was seen): the runner still reports the death, from the
    kernel's exit status; the grader's note reads only numbers from that line."""
    import nbclient.client

    from dpo_grpo.exercises import _run_notebook

    class Raced(AssertionError):
        pass

    monkeypatch.setattr(nbclient.client, "DeadKernelError", Raced)
    path = _nb(tmp_path / "k.ipynb", "os.kill(os.getpid(), signal.SIGKILL)", "x = 1")
    assert _run_notebook.main(str(path), "20") == _run_notebook.KERNEL_DIED
    note = _run_notebook.crash_note
    assert note(4, "x\nkernel died: killed by signal 11\n") == (
        "crashed: the kernel died, killed by signal 11 (SIGSEGV)"
    )
    assert note(4, "kernel died: exited with code 1") == (
        "crashed: the kernel died, exited with code 1"
    )
    assert note(4, "kernel died: killed by signal 9 [img](x)") == (
        "crashed: the kernel died"
    )
    assert note(1, "Traceback\nValueError: x") == "crashed: ValueError: x"
    assert note(1, "") == "crashed: exit code 1"
