"""Run one untrusted notebook in a sandbox and hand back the answers its kernel
recorded, as data.

What each platform gets (``book/teaching.md`` has the table):

- **Linux, grader running as root** (``mode="root"``): ``unshare`` gives the notebook
  new mount, network, PID, IPC and UTS namespaces (no network at all; it sees only its
  own processes, and all of them die with the runner); it runs chrooted into a root
  built from read-only, nosuid bind mounts of an allow-list (:mod:`.allowlist`:
  ``/usr``, ``/etc``, ..., the Python installation and the kernel's ``sys.path``, with
  the keyless package copy over every ``dpo_grpo`` folder), plus its own folders; the
  grader's HOME, the submissions, the other notebooks and the answer key are not
  there. It runs as a dedicated unprivileged uid with no_new_privs.
- **Linux, not root, with bubblewrap** (``mode="bwrap"``): the same file-system view and
  namespaces through ``bwrap`` (user namespaces), as the grader's own uid mapped inside.
- **Anywhere else** (``mode="basic"``; macOS, Windows WSL without bubblewrap): its own
  temporary folder, scrubbed environment, empty HOME, read-only package copy and
  resource limits, but the grader's uid, the real file system and the network.

In every mode: a throwaway copy of the notebook in a folder no other user can read; the
package imported from a read-only copy that holds no answer key (the chapter registries
and the hashed key are left out); limits on address space, processes, file size, CPU
time and open files; on Linux a seccomp filter that
refuses ``ptrace`` and its kin, and the keyring calls (see ``_sandbox_init``); a
wall-clock deadline; the output pipe drained with bounded non-blocking reads in the
grading thread itself, so no process that keeps it open can stall the grader; at the end
every process of the sandbox is killed (its process group, in ``root``/``bwrap`` mode
every process of its PID namespace, and in ``root`` mode its control group); the answers
file read only after that. A sandbox whose processes cannot all be killed fails its own
result (a note), never the batch.

In ``root`` mode each sandbox also gets a uid no other sandbox holds
(:class:`.uids.UidLease`, across concurrent graders), control groups capping the memory,
tasks and CPU time of all its processes together (:class:`.cgroup.SandboxCgroup`, where
the kernel offers them) and a scratch tmpfs capped in bytes and in files for all it
writes. Before a batch, :func:`require_no_key` runs the probe (:mod:`._probe`) in a
sandbox made as a notebook's and refuses to grade if it finds any of the key.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .allowlist import copy_package, environment_view
from .cgroup import SandboxCgroup
from .reading import (  # noqa: F401  (MAX_ANSWERS_BYTES: re-exported)
    MAX_ANSWERS_BYTES,
    read_answers,
)
from .selfcheck import ANSWERS_ENV, CASES_ENV
from .uids import UidLease

MAX_CAPTURE_BYTES = 64 << 10
DEADLINE_MARGIN = (
    30.0  # seconds past the notebook's timeout before the sandbox is killed
)
EXIT_GRACE = (
    2.0  # seconds the pipe is still drained after the runner exited (or was killed)
)


@dataclass
class Limits:
    # all processes together (cgroup, root mode) and the address space of each
    # (RLIMIT_AS)
    memory_mb: int = 4096
    # tasks of the sandbox (cgroup pids.max, and RLIMIT_NPROC of its uid; threads count)
    processes: int = 256
    file_mb: int = 64  # largest file the notebook may write (RLIMIT_FSIZE)
    open_files: int = 1024
    disk_mb: int = (
        512  # all it writes: work folder, HOME, /tmp, /dev/shm (one tmpfs, root mode)
    )
    files: int = 10000  # files and folders it may create there (the tmpfs's inodes)
    # CPU time of all its processes together per second of wall-clock time (a cgroup
    # quota, root mode): one CPU, however many processes it starts
    cpus: float = 1.0

    def __post_init__(self):
        for name in (
            "memory_mb",
            "processes",
            "file_mb",
            "open_files",
            "disk_mb",
            "files",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
            if value < 1:
                raise ValueError(f"{name} must be positive, got {value}")
        if not isinstance(self.cpus, (int, float)) or isinstance(self.cpus, bool):
            raise TypeError(f"cpus must be a number, got {type(self.cpus).__name__}")
        if not 0.01 <= self.cpus <= 1024:
            raise ValueError(f"cpus must be between 0.01 and 1024, got {self.cpus}")

    def rlimits(self, timeout: float) -> dict:
        return {
            "as": self.memory_mb << 20,
            "nproc": self.processes,
            "fsize": self.file_mb << 20,
            "cpu": int(2 * timeout) + 60,
            "nofile": self.open_files,
            "core": 0,
        }


@dataclass
class RunResult:
    # per exercise, the last record the kernel wrote (.reading.read_answers)
    answers: list = field(default_factory=list)
    timed_out: bool = False
    note: str = ""
    output_tail: str = ""
    seconds: float = 0.0


def _bwrap_works() -> bool:
    exe = shutil.which("bwrap")
    if not exe:
        return False
    try:
        return (
            subprocess.run(
                [exe, "--unshare-all", "--ro-bind", "/", "/", "true"],
                capture_output=True,
                timeout=20,
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def _unshare_works() -> bool:
    exe = shutil.which("unshare")
    if not exe:
        return False
    try:
        return (
            subprocess.run(
                [
                    exe,
                    "--mount",
                    "--net",
                    "--pid",
                    "--ipc",
                    "--uts",
                    "--fork",
                    "--kill-child",
                    "true",
                ],
                capture_output=True,
                timeout=20,
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


_MODE = None


def detect_mode() -> str:
    """``root``, ``bwrap`` or ``basic``: the strongest isolation this machine offers the
    grader (cached)."""
    global _MODE
    if _MODE is None:
        if sys.platform.startswith("linux") and os.geteuid() == 0 and _unshare_works():
            _MODE = "root"
        elif sys.platform.startswith("linux") and _bwrap_works():
            _MODE = "bwrap"
        else:
            _MODE = "basic"
    return _MODE


def drain(fd: int, sink: bytearray, cap: int, until: float) -> bool:
    """Read the non-blocking pipe ``fd`` into ``sink`` (keeping its last ``cap`` bytes)
    until its end or until ``time.monotonic()`` reaches ``until``; return whether the
    end was reached. Never blocks past ``until``."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return False
        if not poller.poll(int(1000 * min(left, 0.5)) + 1):
            continue
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            continue
        if not chunk:
            return True
        sink.extend(chunk)
        if len(sink) > cap:
            del sink[: len(sink) - cap]


def _pid_namespace(pid) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def child_namespace(pid: int) -> str | None:
    """The PID namespace of a child of ``pid`` that lives in another namespace than ours
    (the sandbox's), if any."""
    ours = _pid_namespace("self")
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
            children = fh.read().split()
    except OSError:
        return None
    for child in children:
        ns = _pid_namespace(child)
        if ns is not None and ns != ours:
            return ns
    return None


def kill_namespace(ns: str, seconds: float = 5.0) -> bool:
    """SIGKILL every process of PID namespace ``ns`` (as ``/proc/PID/ns/pid`` reads);
    return whether none is left within ``seconds``. Killing its first process alone
    would do, but it may have exited already."""
    if not isinstance(ns, str) or not ns.startswith("pid:["):
        raise ValueError(f"ns must read like 'pid:[4026532000]', got {ns!r}")
    end = time.monotonic() + seconds
    while True:
        found = [
            int(p)
            for p in os.listdir("/proc")
            if p.isdigit() and _pid_namespace(p) == ns
        ]
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if not found:
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.05)


def run_sandboxed(
    notebook_json: str,
    cases: dict,
    timeout: float,
    *,
    slot: int = 0,
    limits: Limits = None,
    mode: str = None,
) -> RunResult:
    """Execute ``notebook_json`` (a validated notebook's text) in a fresh sandbox;
    return the recorded answers. ``slot`` (the parallel slot) is kept for callers;
    sandbox uids are leased per run (:class:`.uids.UidLease`)."""
    if not isinstance(notebook_json, str):
        raise TypeError(
            f"notebook_json must be a str, got {type(notebook_json).__name__}"
        )
    return _sandboxed(notebook_json, cases, timeout, limits, mode)


def _sandboxed(notebook_json, cases, timeout, limits, mode, probe_roots=None):
    if not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(
            f"timeout must be a positive number of seconds, got {timeout!r}"
        )
    mode = mode or detect_mode()
    if mode not in ("root", "bwrap", "basic"):
        raise ValueError(f"mode must be 'root', 'bwrap' or 'basic', got {mode!r}")
    limits = limits or Limits()
    tmp = Path(tempfile.mkdtemp(prefix="dpo_grpo_grade_"))
    lease = group = None
    try:
        if mode == "root":
            lease = UidLease()
            group = SandboxCgroup.create(
                limits.memory_mb << 20, limits.processes, limits.cpus
            )
        _prepare(tmp, notebook_json, cases, mode, lease.uid if lease else None)
        if probe_roots is None:
            argv = ["dpo_grpo.exercises._run_notebook", "in/notebook.ipynb"]
            argv.append(str(timeout))
        else:
            argv = ["dpo_grpo.exercises._probe", *probe_roots]
        return _run(tmp, argv, timeout, limits, mode, lease, group)
    finally:
        if group is not None:
            group.kill()
            group.remove()
        shutil.rmtree(tmp, ignore_errors=True)  # the answers file is the uid's
        if lease is not None:
            lease.close()


def _prepare(tmp, notebook_json, cases, mode, uid):
    """The sandbox's files in ``tmp`` (a fresh ``mkdtemp``: mode 0700, so no other user
    of the machine reaches them): ``in/`` (the notebook and the test inputs, readable by
    the grader and, in root mode, the sandbox's group only), ``pkg/`` (the keyless
    package copy) and the answers file, writable by the sandbox's uid only."""
    (tmp / "in").mkdir(mode=0o700)
    for sub in ("work", "home", "answers"):
        (tmp / sub).mkdir(mode=0o700)
    copy_package(tmp / "pkg")
    if notebook_json is not None:
        (tmp / "in" / "notebook.ipynb").write_text(notebook_json, encoding="utf-8")
    (tmp / "in" / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    answers = tmp / "answers" / "answers.jsonl"
    answers.touch(mode=0o600)
    readable, folder = 0o400, 0o500
    if mode == "root":
        # bound alone (the folder is not in the sandbox); the grader reads it as root
        os.chown(answers, uid, uid)
        readable, folder = 0o440, 0o550
        for path in (tmp / "in", *(tmp / "in").iterdir()):
            os.chown(path, 0, uid)
    for path in (tmp / "in").iterdir():
        os.chmod(path, readable)
    os.chmod(tmp / "in", folder)


def _environment(inside, work, home, tmpdir):
    py = sys.executable
    return {
        "PATH": f"{os.path.dirname(py)}:/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TMPDIR": tmpdir,
        "PYTHONPATH": f"{inside}/pkg",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": f"{home}/.matplotlib",
        "IPYTHONDIR": f"{home}/.ipython",
        "JUPYTER_RUNTIME_DIR": f"{home}/.jupyter_runtime",
        "PLOTLY_RENDERER": "plotly_mimetype",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        ANSWERS_ENV: f"{inside}/answers/answers.jsonl",
        CASES_ENV: f"{inside}/in/cases.json",
    }


DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


def _command(tmp, mode, spec, limits, lease, group):
    py, init = sys.executable, Path(__file__).with_name("_sandbox_init.py")
    binds, packages = environment_view()
    # the keyless copy over every dpo_grpo folder the environment holds
    cover = [[str(tmp / "pkg" / "dpo_grpo"), p, True] for p in packages]
    if mode == "root":
        own = [
            [str(tmp / "pkg"), "/sandbox/pkg", True],
            [str(tmp / "in"), "/sandbox/in", True],
            [
                str(tmp / "answers" / "answers.jsonl"),
                "/sandbox/answers/answers.jsonl",
                False,
            ],
        ]
        spec.update(
            newroot=str(tmp / "root"),
            binds=binds + cover + own,
            uid=lease.uid,
            gid=lease.uid,
            scratch=["/sandbox/scratch", limits.disk_mb << 20, limits.files],
            cgroup_procs=group.procs_files if group else [],
        )
        spec["binds"] += [[d, d, False] for d in DEVICES if os.path.exists(d)]
        (tmp / "root").mkdir()
        return [
            shutil.which("unshare"),
            "--mount",
            "--net",
            "--pid",
            "--ipc",
            "--uts",
            "--fork",
            "--kill-child",
            py,
            "-I",
            "-S",
            str(init),
            str(tmp / "in" / "spec.json"),
        ]
    if mode == "bwrap":
        cmd = [
            shutil.which("bwrap"),
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
        ]
        for src, dst, _ in binds + cover:
            cmd += (
                ["--symlink", os.readlink(src), dst]
                if os.path.islink(src)
                else ["--ro-bind", src, dst]
            )
        cmd += [
            "--ro-bind",
            str(tmp / "pkg"),
            "/sandbox/pkg",
            "--ro-bind",
            str(tmp / "in"),
            "/sandbox/in",
        ]
        for sub in ("work", "home", "answers"):
            cmd += ["--bind", str(tmp / sub), f"/sandbox/{sub}"]
        return cmd + [
            "--chdir",
            "/sandbox/work",
            py,
            "-I",
            "-S",
            "/sandbox/pkg/dpo_grpo/exercises/_sandbox_init.py",
            "/sandbox/in/spec.json",
        ]
    return [py, "-I", "-S", str(init), str(tmp / "in" / "spec.json")]


def _run(tmp, module_argv, timeout, limits, mode, lease, group):
    """Run ``python -m MODULE ARGS`` (``module_argv``; paths relative to the sandbox's
    folder) in the sandbox prepared in ``tmp``; supervise it, kill all it started, read
    the answers."""
    inside = Path("/sandbox") if mode in ("root", "bwrap") else tmp
    if mode == "root":
        scratch = "/sandbox/scratch"
        work, env = (
            f"{scratch}/work",
            _environment(inside, f"{scratch}/work", f"{scratch}/home", "/tmp"),
        )
    else:
        work = f"{inside}/work"
        env = _environment(
            inside,
            work,
            f"{inside}/home",
            "/tmp" if mode == "bwrap" else f"{inside}/home",
        )
    module, *args = module_argv
    argv = [sys.executable, "-m", module]
    argv += [f"{inside}/{a}" if a.startswith("in/") else a for a in args]
    spec = {
        "mode": "root" if mode == "root" else "limits",
        "cwd": work,
        "argv": argv,
        "env": env,
        "limits": limits.rlimits(timeout),
    }
    cmd = _command(tmp, mode, spec, limits, lease, group)
    os.chmod(tmp / "in", 0o700)
    (tmp / "in" / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    os.chmod(tmp / "in" / "spec.json", 0o400)
    os.chmod(tmp / "in", 0o550 if mode == "root" else 0o500)  # as _prepare left it

    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={"PATH": "/usr/bin:/bin"},
        cwd=str(tmp),
    )
    try:
        timed_out, tail, survivors = _supervise(proc, timeout, mode, group)
    finally:
        proc.stdout.close()  # nothing else reads it: closing never waits
    seconds = time.monotonic() - start
    code = proc.returncode
    if survivors:
        note = "sandbox error: some of its processes could not be killed"
    elif timed_out or code == 3:
        note = "timeout"
    elif code == 0:
        note = ""
    else:
        from ._run_notebook import crash_note  # the runner's exit status says how

        note = crash_note(code, tail)
    answers = read_answers(tmp / "answers" / "answers.jsonl") if not survivors else []
    return RunResult(answers, timed_out or code == 3, note, tail, seconds)


class KeyInSandbox(RuntimeError):
    """The sandbox would let a notebook read an answer or the key: the grader
    refuses to grade."""


_PROBED = {}


def probe_sandbox(mode: str = None, limits: Limits = None) -> dict:
    """Run the start-up probe (:mod:`._probe`) in a sandbox made exactly as a
    notebook's: ``{"package", "readable", "importable"}``, what a notebook there could
    read of the key (cached per mode). With its own root (``root``, ``bwrap``) it walks
    everything the sandbox sees; in ``basic`` mode, the Python installation and the
    grader's own copy of the package."""
    mode = mode or detect_mode()
    if mode not in _PROBED:
        if mode == "basic":
            import dpo_grpo

            roots = [src for src, _, _ in environment_view()[0] if os.path.isdir(src)]
            roots.append(str(Path(dpo_grpo.__file__).resolve().parent))
        else:
            roots = ["/"]
        result = _sandboxed(None, {}, 120, limits, mode, probe_roots=roots)
        try:
            found = json.loads(result.output_tail.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise KeyInSandbox(
                "the grader's start-up probe did not run in the sandbox: "
                f"{result.note or result.output_tail[-500:]}"
            ) from None
        _PROBED[mode] = found
    return _PROBED[mode]


def require_no_key(mode: str = None, limits: Limits = None) -> None:
    """Raise :class:`KeyInSandbox`, saying what it found, unless the probe
    (:func:`probe_sandbox`) finds nothing of the key in the sandbox."""
    found = probe_sandbox(mode, limits)
    if found["readable"] or found["importable"]:
        shown = [*found["readable"][:5], *found["importable"]]
        more = len(found["readable"]) - 5
        raise KeyInSandbox(
            "refusing to grade: a notebook in the sandbox "
            f"({mode or detect_mode()} mode) could read the answer key: "
            + ", ".join(shown)
            + (f" and {more} more" if more > 0 else "")
            + ". Grade as root or with bubblewrap (book/teaching.md), or pass "
            "--unisolated to grade anyway (marks are then not protected)."
        )


def _supervise(proc, timeout, mode, group):
    """Drain the runner's output until it ends, the runner exits (plus a grace) or the
    deadline passes; then kill every process of the sandbox. Return (timed out, output
    tail, whether any process survived)."""
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    sink, ns = bytearray(), None
    deadline = time.monotonic() + timeout + DEADLINE_MARGIN
    ended, exited_at = False, None
    while not ended and time.monotonic() < deadline:
        if ns is None and mode != "basic":
            ns = child_namespace(proc.pid)
        ended = drain(
            fd, sink, MAX_CAPTURE_BYTES, min(deadline, time.monotonic() + 0.5)
        )
        if exited_at is None and proc.poll() is not None:
            exited_at = time.monotonic()
        if exited_at is not None and time.monotonic() - exited_at > EXIT_GRACE:
            break
    timed_out = not ended and exited_at is None
    if ended:
        try:
            # the pipe closes as the runner exits: let it finish before anything is
            # killed
            proc.wait(timeout=EXIT_GRACE)
        except subprocess.TimeoutExpired:
            pass
    survivors = not _kill_all(proc, ns, group)
    drain(fd, sink, MAX_CAPTURE_BYTES, time.monotonic() + EXIT_GRACE)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        survivors = True
    return timed_out, sink.decode("utf-8", "replace"), survivors


def _kill_all(proc, ns, group) -> bool:
    """Kill the runner's process group, its PID namespace and its control groups;
    whether all are empty."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    empty = True
    if ns is not None:
        empty = kill_namespace(ns) and empty
    if group is not None:
        empty = group.kill() and empty
    return empty
