"""Run one untrusted notebook in a sandbox and hand back the answers its kernel recorded, as data.

What each platform gets (``book/teaching.md`` has the table):

- **Linux, grader running as root** (``mode="root"``): ``unshare`` gives the notebook new mount, network, PID, IPC
  and UTS namespaces (no network at all; it sees only its own processes, and all of them die with the runner);
  it runs chrooted into a root built from read-only, nosuid bind mounts of ``/usr``, ``/etc``, ... and the Python
  installation, plus its own folders; the grader's HOME, the submissions, the other notebooks and the package's
  source are not there. It runs as a dedicated unprivileged uid with no_new_privs.
- **Linux, not root, with bubblewrap** (``mode="bwrap"``): the same file-system view and namespaces through
  ``bwrap`` (user namespaces), as the grader's own uid mapped inside.
- **Anywhere else** (``mode="basic"``; macOS, Windows WSL without bubblewrap): its own temporary folder, scrubbed
  environment, empty HOME, read-only package copy and resource limits, but the grader's uid, the real file system
  and the network.

In every mode: a throwaway copy of the notebook; the package imported from a read-only copy that holds no answer
key (the chapter registries are left out); limits on address space, processes, file size, CPU time and open files;
a wall-clock deadline after which the whole process group is killed; captured output capped; the answers file read
only after the runner's process group is dead (and, in ``root``/``bwrap`` mode, its PID namespace).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .selfcheck import ANSWERS_ENV, CASES_ENV

MAX_ANSWERS_BYTES = 32 << 20
MAX_CAPTURE_BYTES = 64 << 10
FIRST_SANDBOX_UID = 61000
KEY_MODULES = ("ch", "labs")  # exercises/ modules left out of the sandbox's package copy (they hold the key)


@dataclass
class Limits:
    memory_mb: int = 4096  # address space per process (RLIMIT_AS)
    processes: int = 256  # tasks of the sandbox uid (RLIMIT_NPROC; threads count)
    file_mb: int = 64  # largest file the notebook may write (RLIMIT_FSIZE)
    open_files: int = 1024

    def rlimits(self, timeout: float) -> dict:
        return {"as": self.memory_mb << 20, "nproc": self.processes, "fsize": self.file_mb << 20,
                "cpu": int(2 * timeout) + 60, "nofile": self.open_files, "core": 0}


@dataclass
class RunResult:
    answers: list = field(default_factory=list)  # parsed JSON records, in file order
    timed_out: bool = False
    note: str = ""
    output_tail: str = ""
    seconds: float = 0.0


def _bwrap_works() -> bool:
    exe = shutil.which("bwrap")
    if not exe:
        return False
    try:
        return subprocess.run([exe, "--unshare-all", "--ro-bind", "/", "/", "true"], capture_output=True,
                              timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _unshare_works() -> bool:
    exe = shutil.which("unshare")
    if not exe:
        return False
    try:
        return subprocess.run([exe, "--mount", "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child",
                               "true"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


_MODE = None


def detect_mode() -> str:
    """``root``, ``bwrap`` or ``basic``: the strongest isolation this machine offers the grader (cached)."""
    global _MODE
    if _MODE is None:
        if sys.platform.startswith("linux") and os.geteuid() == 0 and _unshare_works():
            _MODE = "root"
        elif sys.platform.startswith("linux") and _bwrap_works():
            _MODE = "bwrap"
        else:
            _MODE = "basic"
    return _MODE


def free_uid(slot: int) -> int:
    """A uid with no account (so with no files or processes of its own), one per parallel slot."""
    uid = FIRST_SANDBOX_UID + 16 * slot
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
        uid += 1


def copy_package(dest: Path) -> Path:
    """A copy of the installed ``dpo_grpo`` without the answer key and without bytecode, made read-only."""
    import dpo_grpo

    src = Path(dpo_grpo.__file__).resolve().parent

    def ignore(folder, names):
        skip = {n for n in names if n == "__pycache__" or n.endswith((".pyc", ".pyo"))}
        if Path(folder).resolve() == src / "exercises":
            skip |= {n for n in names if n.endswith(".py") and n.startswith(KEY_MODULES)}
        return skip

    shutil.copytree(src, dest / "dpo_grpo", ignore=ignore)
    for root, dirs, files in os.walk(dest):
        for f in files:
            os.chmod(os.path.join(root, f), 0o444)
        os.chmod(root, 0o555)
    return dest


def _system_binds() -> list:
    binds = []
    for p in ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc"):
        if os.path.lexists(p):
            binds.append([p, p, True])
    seen = set()
    for p in (sys.base_prefix, sys.prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))):
        p = os.path.realpath(p)
        if p not in seen and not any(p == q or p.startswith(q + "/") for q in ("/usr", "/etc")):
            seen.add(p)
            binds.append([p, p, True])
            if os.path.realpath(p) != os.path.abspath(p):
                binds.append([os.path.abspath(p), os.path.abspath(p), True])
    return binds


def _drain(stream, sink: bytearray, cap: int):
    """Read ``stream`` to its end, keeping only its last ``cap`` bytes (a 2 GiB print costs no memory)."""
    while True:
        chunk = stream.read(65536)
        if not chunk:
            break
        sink.extend(chunk)
        if len(sink) > cap:
            del sink[:len(sink) - cap]


def read_answers(path: Path) -> list:
    """JSON records (dicts) of the answers file, one per line. A symlink, a non-file or anything past the size cap
    is ignored, and so is any line that does not parse (bad JSON, nesting too deep, an integer too long to
    convert): a bad record is that record's problem only."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return []
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return []
        data = fh.read(MAX_ANSWERS_BYTES)
    records = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError, MemoryError):  # JSONDecodeError is a ValueError
            continue
        if isinstance(rec, dict):
            records.append(rec)
    return records


def _kill_tree(proc: subprocess.Popen):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_sandboxed(notebook_json: str, cases: dict, timeout: float, *, slot: int = 0, limits: Limits = None,
                  mode: str = None) -> RunResult:
    """Execute ``notebook_json`` (a validated notebook's text) in a fresh sandbox; return the recorded answers."""
    mode = mode or detect_mode()
    limits = limits or Limits()
    tmp = Path(tempfile.mkdtemp(prefix="dpo_grpo_grade_"))
    try:
        return _run(tmp, notebook_json, cases, timeout, slot, limits, mode)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(tmp, notebook_json, cases, timeout, slot, limits, mode):
    (tmp / "in").mkdir()
    for sub in ("work", "home", "answers"):
        (tmp / sub).mkdir(mode=0o700)
    copy_package(tmp / "pkg")
    (tmp / "work" / "notebook.ipynb").write_text(notebook_json, encoding="utf-8")
    (tmp / "in" / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    (tmp / "answers" / "answers.jsonl").touch()
    inside = Path("/sandbox") if mode in ("root", "bwrap") else tmp
    if mode == "root":
        uid = free_uid(slot)
        os.chmod(tmp, 0o711)
        for sub in ("work", "home", "answers"):
            for root, dirs, files in os.walk(tmp / sub):
                os.chown(root, uid, uid)
                for f in files:
                    os.chown(os.path.join(root, f), uid, uid)
    os.chmod(tmp / "in" / "cases.json", 0o444)
    os.chmod(tmp / "in", 0o555)
    py = sys.executable
    env = {
        "PATH": f"{os.path.dirname(py)}:/usr/local/bin:/usr/bin:/bin", "HOME": f"{inside}/home",
        "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TMPDIR": "/tmp" if mode != "basic" else f"{inside}/home",
        "PYTHONPATH": f"{inside}/pkg", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
        "MPLBACKEND": "Agg", "MPLCONFIGDIR": f"{inside}/home/.matplotlib", "IPYTHONDIR": f"{inside}/home/.ipython",
        "JUPYTER_RUNTIME_DIR": f"{inside}/home/.jupyter_runtime", "PLOTLY_RENDERER": "plotly_mimetype",
        "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        ANSWERS_ENV: f"{inside}/answers/answers.jsonl", CASES_ENV: f"{inside}/in/cases.json",
    }
    argv = [py, "-m", "dpo_grpo.exercises._run_notebook", f"{inside}/work/notebook.ipynb", str(timeout)]
    spec = {"mode": "root" if mode == "root" else "limits", "cwd": f"{inside}/work", "argv": argv, "env": env,
            "limits": limits.rlimits(timeout)}
    init = Path(__file__).with_name("_sandbox_init.py")
    if mode == "root":
        own = [[str(tmp / "pkg"), "/sandbox/pkg", True], [str(tmp / "in"), "/sandbox/in", True]]
        own += [[str(tmp / sub), f"/sandbox/{sub}", False] for sub in ("work", "home", "answers")]
        spec.update(newroot=str(tmp / "root"), binds=_system_binds() + own,
                    tmpfs=[["/tmp", "256m"], ["/dev/shm", "64m"]], uid=free_uid(slot), gid=free_uid(slot))
        spec["binds"] += [[d, d, False] for d in ("/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                                   "/dev/urandom") if os.path.exists(d)]
        (tmp / "root").mkdir()
        cmd = [shutil.which("unshare"), "--mount", "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child",
               py, "-I", "-S", str(init), str(tmp / "in" / "spec.json")]
    elif mode == "bwrap":
        cmd = [shutil.which("bwrap"), "--unshare-all", "--die-with-parent", "--new-session",
               "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for src, dst, _ in _system_binds():
            cmd += ["--symlink", os.readlink(src), dst] if os.path.islink(src) else ["--ro-bind", src, dst]
        cmd += ["--ro-bind", str(tmp / "pkg"), "/sandbox/pkg", "--ro-bind", str(tmp / "in"), "/sandbox/in"]
        for sub in ("work", "home", "answers"):
            cmd += ["--bind", str(tmp / sub), f"/sandbox/{sub}"]
        cmd += ["--chdir", "/sandbox/work", py, "-I", "-S", "/sandbox/pkg/dpo_grpo/exercises/_sandbox_init.py",
                "/sandbox/in/spec.json"]
    else:
        cmd = [py, "-I", "-S", str(init), str(tmp / "in" / "spec.json")]
    os.chmod(tmp / "in", 0o755)
    (tmp / "in" / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    os.chmod(tmp / "in" / "spec.json", 0o444)
    os.chmod(tmp / "in", 0o555)

    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, env={"PATH": "/usr/bin:/bin"}, cwd=str(tmp))
    sink = bytearray()
    reader = threading.Thread(target=_drain, args=(proc.stdout, sink, MAX_CAPTURE_BYTES), daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout + 30)
    except subprocess.TimeoutExpired:
        timed_out = True
    _kill_tree(proc)  # whatever is left of the process group (the PID namespace dies with its first process)
    proc.wait()
    reader.join(timeout=5)
    proc.stdout.close()
    seconds = time.monotonic() - start
    tail = sink.decode("utf-8", "replace")
    code = proc.returncode
    if timed_out or code == 3:
        note = "timeout"
    elif code == 0:
        note = ""
    else:
        last = [ln for ln in tail.strip().splitlines() if ln.strip()]
        note = "crashed: " + (last[-1][:200] if last else f"exit code {code}")
    return RunResult(read_answers(tmp / "answers" / "answers.jsonl"), timed_out or code == 3, note, tail, seconds)
