"""The sandbox attacks of issue #31, each a notebook graded for real: ptrace of the
runner (and the escape it allowed, which hung the batch), a process that keeps the
output pipe open, memory spread over several processes, disk bytes and file count, and
two batches that shared sandbox uids.

A probe notebook submits exercise 04.4's right letter ("b") only when its attack worked,
so ``correct`` means the sandbox leaked."""

import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from dpo_grpo.exercises.grade import grade_path
from dpo_grpo.exercises.sandbox import Limits, detect_mode, run_sandboxed

#: The tests that run grading sandboxes share one xdist worker: each checks that no
#: sandbox process of its batch outlives grading, which a batch graded at the same time
#: on another worker would confuse.
pytestmark = pytest.mark.xdist_group("sandbox")

MODE = detect_mode()
HEAD = (
    "from dpo_grpo.exercises import check\nimport os, sys, time, subprocess, ctypes\n"
    "def probe(ok):\n    return check('04' + '.4', 'b' if ok else 'a')\n"
)
LIBC = (
    "libc = ctypes.CDLL(None, use_errno=True)\nlibc.ptrace.restype = ctypes.c_long\n"
    "libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, "
    "ctypes.c_void_p]\n"
)
X86_64 = sys.platform.startswith("linux") and platform.machine() == "x86_64"
# The runner (the kernel's parent) is attached, made to call setpgid(0, 0) and left
# stopped: what `gdb -p 1` did.
ESCAPE = (
    LIBC
    + """class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in ("r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi "
                                                   "orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs").split()]
pid = os.getppid()
attached = libc.ptrace(16, pid, None, None) == 0  # PTRACE_ATTACH
if attached:
    os.waitpid(pid, 0x40000000)  # __WALL
    regs = Regs()
    libc.ptrace(12, pid, None, ctypes.byref(regs))  # GETREGS: stopped in a system call, rip just after it
    call = Regs.from_buffer_copy(regs)
    call.rax, call.rdi, call.rsi, call.rip, call.orig_rax = 109, 0, 0, regs.rip - 2, (1 << 64) - 1
    libc.ptrace(13, pid, None, ctypes.byref(call))  # SETREGS: setpgid(0, 0)
    libc.ptrace(9, pid, None, None)  # SINGLESTEP
    os.waitpid(pid, 0x40000000)
    libc.ptrace(13, pid, None, ctypes.byref(regs))
    libc.ptrace(17, pid, None, ctypes.c_void_p(19))  # DETACH, leaving it SIGSTOPped in its own process group
probe(attached)
while True:
    time.sleep(1)
"""  # noqa: E501
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


def _processes_with(marker: bytes) -> list:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


#: Run first in a grading child process: it becomes the subreaper of what it starts, so
#: a sandbox process that outlives its parents stays its descendant.
SUBREAPER = (
    "import ctypes, os, sys, time\n"
    "ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER\n"
)
#: Run last: prints ``survivors: [...]``, the pids of the child's own descendants that
#: run a sandbox (``/sandbox/``, ``dpo_grpo_grade_`` in their command line), and kills
#: them. Another grader's sandboxes on the same machine are not its descendants.
SURVIVORS = """
time.sleep(1)
parent = {}
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        stat = open(f'/proc/{pid}/stat', 'rb').read()
        parent[int(pid)] = int(stat.rsplit(b')', 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        pass
mine, grown = {os.getpid()}, True
while grown:
    new = {p for p, pp in parent.items() if pp in mine} - mine
    mine, grown = mine | new, bool(new)
survivors = []
for pid in sorted(mine - {os.getpid()}):
    try:
        cmd = open(f'/proc/{pid}/cmdline', 'rb').read()
    except OSError:
        continue
    if b'/sandbox/' in cmd or b'dpo_grpo_grade_' in cmd:
        survivors.append(pid)
        os.kill(pid, 9)
print('survivors:', survivors)
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="ptrace and seccomp are Linux's"
)
def test_kernel_cannot_ptrace_its_runner(tmp_path):
    nb = _nb(
        tmp_path / "tracer.ipynb",
        LIBC
        + "pid = os.getppid()\nok = libc.ptrace(16, pid, None, None) == 0\nif ok:\n"
        "    os.waitpid(pid, 0x40000000)\n    libc.ptrace(17, pid, None, None)\n"
        "probe(ok)",
    )
    (g,) = grade_path(nb, chapter="04", timeout=30)
    assert g.verdicts["04.4"] == "incorrect", g.note


#: add_key and keyctl, per machine (the kernel's keyrings outlive a sandbox's processes:
#: a key planted under a leased uid was read by the next student given that uid)
KEY_CALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.machine() not in KEY_CALLS,
    reason="the keyring system calls are Linux's, numbered here for two machines",
)
def test_kernel_cannot_plant_a_key_for_the_next_student(tmp_path):
    add_key, keyctl = KEY_CALLS[platform.machine()]
    nb = _nb(
        tmp_path / "keys.ipynb",
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.syscall.restype = ctypes.c_long\n"
        # add_key("user", "answers", "04.4=b", 6, KEY_SPEC_USER_KEYRING)
        f"added = libc.syscall({add_key}, b'user', b'answers', b'04.4=b', 6, -4)\n"
        # keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0)
        f"found = libc.syscall({keyctl}, 0, -4, 0)\n"
        "probe(added >= 0 or found >= 0)",
    )
    (g,) = grade_path(nb, chapter="04", timeout=30)
    assert g.verdicts["04.4"] == "incorrect", g.note


@pytest.mark.skipif(
    not X86_64, reason="the register-level attack is written for x86_64 Linux"
)
def test_ptrace_escape_cannot_hang_the_batch(tmp_path):
    """The escape of issue #31, then an honest classmate: the batch ends in time with
    both rows."""
    sub = tmp_path / "sub"
    sub.mkdir()
    _nb(sub / "a_escape.ipynb", ESCAPE)
    _nb(sub / "b_honest.ipynb", "check('04.4', 'b')")
    code = (
        f"{SUBREAPER}from dpo_grpo.exercises.grade import grade_path\n"
        f"for g in grade_path({str(sub)!r}, chapter='04', timeout=10):\n"
        "    print(g.notebook, g.verdicts['04.4'], g.note)\n"
        f"{SURVIVORS}"
    )
    start = time.monotonic()
    try:
        # in a child process, so that a grader which hangs fails this test instead of
        # hanging the suite
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=150
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the batch did not finish in 150 s")
    assert out.returncode == 0, out.stderr[-2000:]
    assert time.monotonic() - start < 2 * (10 + 30) + 30
    rows = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert rows["b_honest.ipynb"].startswith("correct")
    assert rows["a_escape.ipynb"].startswith(("incorrect", "timeout", "not reached"))
    assert rows["survivors:"] == "[]"  # runner, kernel


def test_process_holding_the_output_pipe_cannot_hang_the_grader(tmp_path):
    """Even with no PID namespace (``basic``), a detached process that keeps stdout open
    is not waited for."""
    marker = f"holder{os.getpid()}"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            # ipykernel keeps a copy of the runner's stdout: the pipe to the grader
            "import subprocess, sys\n"
            "out = getattr(sys.stdout, '_original_stdstream_copy', None) or 1\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(90)', "
            f"{marker!r}], start_new_session=True, stdout=out, stderr=out)"
        )
    ]
    start = time.monotonic()
    result = {}
    worker = threading.Thread(
        target=lambda: result.update(
            r=run_sandboxed(nbformat.writes(nb), {}, 20, mode="basic")
        ),
        daemon=True,
    )
    worker.start()
    worker.join(75)
    seconds = time.monotonic() - start
    for pid in _processes_with(
        marker.encode()
    ):  # basic mode does not kill it: documented
        os.kill(pid, 9)
    assert not worker.is_alive(), "run_sandboxed still waits for the detached process"
    assert seconds < 20 + 30 + 15 and not result["r"].timed_out


@pytest.mark.skipif(
    MODE != "root",
    reason="total memory, disk and file caps need the root sandbox (teaching.md)",
)
class TestTotalCaps:
    def test_memory_spread_over_processes_is_capped(self, tmp_path):
        nb = _nb(
            tmp_path / "spread.ipynb",
            "kids = [subprocess.Popen([sys.executable, '-c', 'b = bytearray(600 << "
            "20); import time; time.sleep(30)']) for _ in range(3)]\ntime.sleep(5)\n"
            "probe(all(k.poll() is None for k in kids))",
        )
        (g,) = grade_path(nb, chapter="04", timeout=40, limits=Limits(memory_mb=1024))
        assert g.verdicts["04.4"] != "correct", g.note

    def test_disk_bytes_are_capped(self, tmp_path):
        nb = _nb(
            tmp_path / "filler.ipynb",
            "n = 0\ntry:\n    for i in range(11):\n"
            "        with open(f'big{i}', 'wb') as fh:\n"
            "            fh.write(b'x' * (60 << 20))\n        n += 1\n"
            "except OSError:\n    pass\nprobe(n == 11)",
        )
        (g,) = grade_path(nb, chapter="04", timeout=60)
        assert g.verdicts["04.4"] == "incorrect", g.note

    def test_file_count_is_capped(self, tmp_path):
        nb = _nb(
            tmp_path / "many.ipynb",
            "n = 0\ntry:\n    for i in range(30000):\n"
            "        open(f'f{i}', 'w').close()\n        n += 1\nexcept OSError:\n"
            "    pass\nprobe(n == 30000)",
        )
        (g,) = grade_path(nb, chapter="04", timeout=60)
        assert g.verdicts["04.4"] == "incorrect", g.note

    def test_two_batches_never_share_a_uid(self):
        nb = nbformat.v4.new_notebook()
        nb.cells = [
            nbformat.v4.new_code_cell(
                "import os, time\nfrom dpo_grpo.exercises import check\n"
                "check('04.1', float(os.getuid()))\ntime.sleep(3)"
            )
        ]
        text, uids = nbformat.writes(nb), []

        def one():
            rec = run_sandboxed(text, {}, 30, slot=0).answers
            uids.append(rec[0]["answer"]["data"][0] if rec else None)

        threads = [threading.Thread(target=one) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        assert None not in uids and len(set(uids)) == 2, uids


def test_the_guarantees_table_states_the_sandbox_sizes():
    """Every size in MiB that book/teaching.md's table of guarantees states for the
    root sandbox is one of :class:`Limits`' defaults (its /tmp is on the one scratch
    tmpfs of ``disk_mb``)."""
    import re

    text = (Path(__file__).resolve().parents[2] / "book" / "teaching.md").read_text(
        encoding="utf-8"
    )
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    root_column = [row.split(" | ")[1] for row in rows if row.count(" | ") >= 3]
    stated = {int(n) for cell in root_column for n in re.findall(r"(\d+) MiB", cell)}
    defaults = Limits()
    assert stated and stated <= {defaults.memory_mb, defaults.file_mb, defaults.disk_mb}


# --- issue #40: the key stays out, the envelope is whole, the submission is private ---

needs_own_root = pytest.mark.skipif(
    MODE == "basic", reason="a sandbox with its own root (root or bwrap mode)"
)
#: Reads the key from wherever the sandbox shows it: every folder it can see is walked.
KEY_READER = """
found = []
for folder, dirs, files in os.walk('/'):
    if folder in ('/proc', '/sys', '/dev'):
        dirs[:] = []
        continue
    if folder.endswith('dpo_grpo/exercises'):
        found += [os.path.join(folder, f) for f in files
                  if f.startswith(('ch04', '_selfcheck_key'))]
read = []
for path in found:
    try:
        read.append(len(open(path, 'rb').read()))
    except OSError:
        pass
print('key files read:', found, read)
probe(bool(read))
"""


def _wheel_environment(tmp_path, wheel) -> Path:
    """A fresh virtual environment with the package installed from ``wheel`` (not
    editable); its other dependencies come from this interpreter's site folders (a
    ``.pth`` file)."""
    import site

    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", env], check=True)
    (site_dir,) = env.glob("lib/python*/site-packages")
    subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "install"]
        + ["--no-deps", "--no-compile", "--target", site_dir, wheel],
        check=True,
    )
    (site_dir / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return env


@needs_own_root
def test_wheel_installed_grader_shows_no_key_to_a_notebook(tmp_path, package_wheel):
    """``pip install dpo-grpo`` (a wheel, not the Makefile's editable install) puts the
    chapter registries in site-packages; a notebook that walks the sandbox for them
    finds nothing to read, and an honest classmate still gets the mark."""
    env = _wheel_environment(tmp_path, package_wheel)
    where = subprocess.run(
        [env / "bin" / "python", "-c", "import dpo_grpo; print(dpo_grpo.__file__)"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        check=True,
    ).stdout
    assert where.startswith(str(env)), where  # the grader runs the wheel's package
    sub = tmp_path / "sub"
    sub.mkdir()
    _nb(sub / "a_reader.ipynb", KEY_READER)
    _nb(sub / "b_honest.ipynb", "check('04.4', 'b')")
    out = subprocess.run(
        [env / "bin" / "python", "-m", "dpo_grpo.exercises", "grade", sub]
        + ["--chapter", "04", "--timeout", "60", "--csv", tmp_path / "grades.csv"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    import csv

    with open(tmp_path / "grades.csv", encoding="utf-8") as fh:
        rows = {(r["notebook"], r["exercise"]): r for r in csv.DictReader(fh)}
    assert rows["b_honest.ipynb", "04.4"]["verdict"] == "correct", rows
    assert rows["a_reader.ipynb", "04.4"]["verdict"] == "incorrect", rows


@needs_own_root
def test_grader_refuses_a_sandbox_that_would_show_the_key(tmp_path, monkeypatch):
    """The start-up probe: a folder holding a chapter registry, bound into the sandbox
    beside the environment, stops the batch before any notebook runs, and says where
    the key is; ``unisolated`` grades anyway."""
    from dpo_grpo.exercises import allowlist, sandbox

    leak = tmp_path / "leak" / "dpo_grpo" / "exercises"
    leak.mkdir(parents=True)
    (leak / "ch04.py").write_text("ANSWER = 'b'\n")
    binds, packages = allowlist.environment_view()
    extra = [str(tmp_path / "leak")] * 2 + [True]
    monkeypatch.setattr(allowlist, "_VIEW", (binds + [extra], packages))
    monkeypatch.setattr(sandbox, "_PROBED", {})
    nb = _nb(tmp_path / "honest.ipynb", "check('04.4', 'b')")
    with pytest.raises(sandbox.KeyInSandbox, match=str(leak / "ch04.py")):
        grade_path(nb, chapter="04", timeout=30)
    (g,) = grade_path(nb, chapter="04", timeout=30, unisolated=True)
    assert g.verdicts["04.4"] == "correct", g.note


def test_basic_mode_refuses_to_grade_unless_told_unisolated(monkeypatch):
    """Without a root of its own the sandbox sees the installed package, key included:
    the probe says so, naming the files."""
    from dpo_grpo.exercises import sandbox

    monkeypatch.setattr(sandbox, "_PROBED", {})
    with pytest.raises(sandbox.KeyInSandbox, match=r"basic mode.*/dpo_grpo/exercises/"):
        sandbox.require_no_key("basic")


#: forty busy processes, each in a session of its own, for 18 s
SPINNERS = (
    "code = 'import time\\nend = time.time() + 18\\nwhile time.time() < end: pass'\n"
    "kids = [subprocess.Popen([sys.executable, '-c', code], start_new_session=True)\n"
    "        for _ in range(40)]\n"
    "for k in kids:\n    k.wait()"
)


@pytest.mark.skipif(MODE != "root", reason="the CPU quota is a control group's")
def test_a_busy_neighbour_cannot_starve_an_honest_notebook(tmp_path):
    """Graded beside a notebook that starts forty busy processes, at ``--jobs 2``, an
    honest notebook that needs a few seconds of CPU keeps its mark: each sandbox gets
    one CPU's worth of time, however many processes it starts."""
    sub = tmp_path / "sub"
    sub.mkdir()
    _nb(sub / "a_spinner.ipynb", SPINNERS)
    _nb(
        sub / "b_honest.ipynb",
        "time.sleep(3)\nx = sum(i * i for i in range(20_000_000))\ncheck('04.4', 'b')",
    )
    grades = {g.notebook: g for g in grade_path(sub, chapter="04", timeout=15, jobs=2)}
    honest = grades["b_honest.ipynb"]
    assert honest.verdicts["04.4"] == "correct", honest.note


def _readable_as(uid: int, paths) -> list:
    """Which of ``paths`` a process running as ``uid`` (no groups) can open."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.close(read_end)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            opened = []
            for i, path in enumerate(paths):
                try:
                    os.close(os.open(path, os.O_RDONLY))
                    opened.append(str(i))
                except OSError:
                    pass
            os.write(write_end, " ".join(opened).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        opened = fh.read().split()
    os.waitpid(pid, 0)
    return [str(paths[int(i)]) for i in opened]


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="switches to another uid"
)
def test_other_users_cannot_read_a_submission_while_it_is_graded(tmp_path):
    import tempfile

    marker = f"private{os.getpid()}"
    nb = _nb(tmp_path / "slow.ipynb", f"# {marker}\ntime.sleep(8)\nprobe(False)")
    worker = threading.Thread(target=lambda: grade_path(nb, chapter="04", timeout=40))
    worker.start()
    folder, deadline = None, time.monotonic() + 60
    while folder is None and time.monotonic() < deadline:
        for d in Path(tempfile.gettempdir()).glob("dpo_grpo_grade_*"):
            try:
                if marker in (d / "in" / "notebook.ipynb").read_text():
                    folder = d
            except OSError:
                pass
        time.sleep(0.2)
    assert folder is not None
    files = ["in/notebook.ipynb", "in/cases.json", "in/spec.json"]
    readable = _readable_as(
        65534, [folder / f for f in files + ["answers/answers.jsonl"]]
    )
    worker.join(90)
    assert readable == []


@pytest.mark.skipif(
    MODE != "root" or platform.machine() not in KEY_CALLS,
    reason="sandbox uids are leased in root mode; keys numbered for two machines",
)
def test_a_uid_left_unclean_by_its_last_tenant_is_not_leased_again(tmp_path):
    """A kernel key (planted here as that uid) or a file in /tmp owned by a sandbox uid
    makes the lease pass that uid over: checked, not assumed."""
    import ctypes
    import tempfile

    from dpo_grpo.exercises.uids import FIRST_SANDBOX_UID, UID_RANGE, UidLease, residue

    first = FIRST_SANDBOX_UID + UID_RANGE - 3  # leased last: burning it costs nothing
    add_key = KEY_CALLS[platform.machine()][0]
    libc = ctypes.CDLL(None, use_errno=True)
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.setgroups([])
            os.setresgid(first, first, first)
            os.setresuid(first, first, first)
            libc.syscall(add_key, b"user", b"left", b"04.4=b", 6, -4)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    left = Path(tempfile.gettempdir()) / f"dpo_grpo_test_left_by_{first + 1}"
    left.touch()
    os.chown(left, first + 1, first + 1)
    try:
        assert any("kernel key" in r for r in residue(first))
        assert any(str(left) in r for r in residue(first + 1))
        with UidLease(str(tmp_path / "locks"), uids=range(first, first + 3)) as lease:
            assert lease.uid == first + 2
    finally:
        left.unlink()
