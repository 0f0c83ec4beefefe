"""A control group per sandbox (Linux, grader run as root): a cap on the memory, on
the number of tasks and on the CPU time of all the sandbox's processes together, and a
way to kill every one of them at once.

:meth:`SandboxCgroup.create` makes one child group next to the grader's own, in each
hierarchy that can hold it:

- cgroup v2 (the unified hierarchy): ``memory.max`` (swap off), ``pids.max`` and
  ``cpu.max`` where those controllers are enabled for the grader's group (or can be),
  and ``cgroup.kill`` (Linux 5.14+) in any case;
- cgroup v1 (the ``memory``, ``pids`` and ``cpu`` hierarchies of older or hybrid
  set-ups), for a controller v2 lacks: ``memory.limit_in_bytes`` (and
  ``memory.memsw.limit_in_bytes`` where swap is accounted), ``pids.max`` and
  ``cpu.cfs_quota_us``.

The CPU quota is what keeps a notebook that starts forty busy processes from starving
the notebook graded beside it: all its processes together get ``cpus`` CPUs' worth of
time per period, however many there are.

:attr:`SandboxCgroup.enforced` says what was obtained (``memory``, ``pids``, ``cpu``,
``kill``);
the grader reports it. The sandbox joins the groups itself, first thing, by writing
``0`` to each ``cgroup.procs`` in :meth:`SandboxCgroup.procs_files`, so every process
it ever forks is inside. Where nothing can be created (not root, no cgroup file
system), ``create`` returns ``None`` and the per-process limits are all there is
(``book/teaching.md``).
"""

from __future__ import annotations

import os
import signal
import time
import uuid

CPU_PERIOD_US = 100_000  # the quota's period: 0.1 s


def _mounts() -> list:
    """``(mount point, mount root, fstype, super options)`` of the cgroup file
    systems."""
    found = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append(
                (
                    fields[4].replace("\\040", " "),
                    fields[3],
                    tail[0],
                    set(tail[2].split(",")),
                )
            )
    return found


def _own_groups() -> dict:
    """``{"v2": path}`` and ``{controller: path}`` for v1: the grader's own groups
    (``/proc/self/cgroup``)."""
    groups = {}
    try:
        with open("/proc/self/cgroup", encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return groups
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            groups["v2"] = parts[2]
        for controller in parts[1].split(","):
            if controller:
                groups[controller] = parts[2]
    return groups


def _folder(mount_point, mount_root, path):
    if mount_root != "/" and not (
        path == mount_root or path.startswith(mount_root.rstrip("/") + "/")
    ):
        return None
    rel = path[len(mount_root) :] if mount_root != "/" else path
    folder = os.path.join(mount_point, rel.lstrip("/"))
    return folder if os.path.isdir(folder) else None


def _write(path, text) -> bool:
    try:
        with open(path, "w", encoding="ascii") as fh:
            fh.write(text)
        return True
    except OSError:
        return False


def _read(path) -> str:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read()
    except OSError:
        return ""


class SandboxCgroup:
    """The groups of one sandbox. Use :meth:`create`; then :meth:`kill` and
    :meth:`remove` when it is done."""

    def __init__(self):
        self.folders = []  # the groups made, each removed by remove()
        self.enforced = set()
        self._kill_file = None

    @property
    def procs_files(self) -> list:
        return [os.path.join(f, "cgroup.procs") for f in self.folders]

    @classmethod
    def create(cls, memory_bytes: int, tasks: int, cpus: float = 1.0):
        """Groups capping the sandbox at ``memory_bytes``, ``tasks`` and ``cpus`` CPUs,
        or ``None`` where none can be made."""
        for name, value in (("memory_bytes", memory_bytes), ("tasks", tasks)):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or cpus <= 0:
            raise ValueError(f"cpus must be a positive number, got {cpus!r}")
        quota = max(1000, round(cpus * CPU_PERIOD_US))
        if not hasattr(os, "geteuid") or os.geteuid() != 0:
            return None
        group, name = cls(), f"dpo_grpo_sandbox_{uuid.uuid4().hex[:12]}"
        own, mounts = _own_groups(), _mounts()
        for point, root, fstype, opts in mounts:
            if fstype == "cgroup2" and "v2" in own:
                group._v2(point, root, own["v2"], name, memory_bytes, tasks, quota)
        for point, root, fstype, opts in mounts:
            for controller in ("memory", "pids", "cpu"):
                if (
                    fstype == "cgroup"
                    and controller in opts
                    and controller not in group.enforced
                ):
                    group._v1(
                        controller,
                        point,
                        root,
                        own.get(controller, "/"),
                        name,
                        (memory_bytes, tasks, quota),
                    )
        return group if group.folders else None

    def _make(self, parent, name):
        if parent is None:
            return None
        folder = os.path.join(parent, name)
        try:
            os.mkdir(folder)
        except OSError:
            return None
        self.folders.append(folder)
        return folder

    def _v2(self, point, root, path, name, memory_bytes, tasks, quota):
        parent = _folder(point, root, path)
        if parent is None:
            return
        wanted = {"memory", "pids", "cpu"} & set(
            _read(os.path.join(parent, "cgroup.controllers")).split()
        )
        on = set(_read(os.path.join(parent, "cgroup.subtree_control")).split())
        if (
            wanted - on
        ):  # fails (EBUSY) where the grader's group holds processes and is not the root
            _write(
                os.path.join(parent, "cgroup.subtree_control"),
                " ".join(f"+{c}" for c in wanted - on),
            )
            on = set(_read(os.path.join(parent, "cgroup.subtree_control")).split())
        folder = self._make(parent, name)
        if folder is None:
            return
        if "memory" in on and _write(
            os.path.join(folder, "memory.max"), str(memory_bytes)
        ):
            _write(os.path.join(folder, "memory.swap.max"), "0")
            self.enforced.add("memory")
        if "pids" in on and _write(os.path.join(folder, "pids.max"), str(tasks)):
            self.enforced.add("pids")
        if "cpu" in on and _write(
            os.path.join(folder, "cpu.max"), f"{quota} {CPU_PERIOD_US}"
        ):
            self.enforced.add("cpu")
        if os.path.exists(os.path.join(folder, "cgroup.kill")):
            self._kill_file = os.path.join(folder, "cgroup.kill")
            self.enforced.add("kill")

    def _v1(self, controller, point, root, path, name, caps):
        memory_bytes, tasks, quota = caps
        folder = self._make(_folder(point, root, path), name)
        if folder is None:
            return
        if controller == "memory" and _write(
            os.path.join(folder, "memory.limit_in_bytes"), str(memory_bytes)
        ):
            _write(
                os.path.join(folder, "memory.memsw.limit_in_bytes"), str(memory_bytes)
            )
            self.enforced.add("memory")
        if controller == "pids" and _write(
            os.path.join(folder, "pids.max"), str(tasks)
        ):
            self.enforced.add("pids")
        if (
            controller == "cpu"
            and _write(os.path.join(folder, "cpu.cfs_period_us"), str(CPU_PERIOD_US))
            and _write(os.path.join(folder, "cpu.cfs_quota_us"), str(quota))
        ):
            self.enforced.add("cpu")

    def pids(self) -> set:
        """Every process still in one of the groups."""
        found = set()
        for procs in self.procs_files:
            found |= {int(p) for p in _read(procs).split() if p.isdigit()}
        return found

    def kill(self, seconds: float = 5.0) -> bool:
        """SIGKILL every process of the groups (``cgroup.kill``, else one by one until
        none is left); return whether the groups are empty within ``seconds``."""
        end = time.monotonic() + seconds
        while True:
            if self._kill_file:
                _write(self._kill_file, "1")
            left = self.pids()
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if not left:
                return True
            if time.monotonic() > end:
                return False
            time.sleep(0.05)

    def remove(self):
        """Remove the groups (each must be empty: call :meth:`kill` first); a busy one
        is left behind."""
        for folder in reversed(self.folders):
            for _ in range(20):
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
        self.folders = []
