"""Sandbox set-up, run as ``python -I -S _sandbox_init.py SPEC.json`` just before the
notebook runner.

Standard library only, reads nothing but the spec. Modes:

- ``root`` (Linux, grader running as root; started inside
  ``unshare --mount --net --pid --ipc --uts --fork --kill-child``): joins the sandbox's
  control groups (``cgroup_procs``); builds a new root on a tmpfs from read-only, nosuid
  bind mounts of the system folders and the Python installation, plus the sandbox's own
  files; mounts one scratch tmpfs capped in bytes and in files (``scratch``) that holds
  the work folder, HOME, ``/tmp`` and ``/dev/shm``; mounts a fresh ``/proc`` and a
  minimal ``/dev``; chroots there; drops to the unprivileged uid/gid with no
  supplementary groups; then as in ``limits``.
- ``limits`` (inside bubblewrap, or with no isolation at all): applies the resource
  limits, sets no_new_privs and installs a seccomp filter that refuses ``ptrace``,
  ``process_vm_readv``/``writev``, ``pidfd_getfd`` and the keyring calls ``add_key``,
  ``request_key`` and ``keyctl`` (EPERM), and every system call of
  another ABI (x86_64 and aarch64; elsewhere no filter), then execs the runner with the
  scrubbed environment. Without the filter a kernel could stop its runner and move it
  out of reach.
"""

import ctypes
import json
import os
import resource
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
# audit architecture, then the refused system calls: ptrace, process_vm_readv,
# process_vm_writev, pidfd_getfd; add_key, request_key, keyctl (the kernel's keyrings
# belong to a uid and outlive its processes: a key planted in one sandbox would be read
# by the next notebook given the same leased uid)
SECCOMP_ARCHES = {
    "x86_64": (0xC000003E, (101, 310, 311, 438, 248, 249, 250)),
    "aarch64": (0xC00000B7, (117, 270, 271, 438, 217, 218, 219)),
}
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x06
SECCOMP_RET_ALLOW, SECCOMP_RET_EPERM = 0x7FFF0000, 0x00050000 | 1
X32_SYSCALL_BIT = 0x40000000

_libc = ctypes.CDLL(None, use_errno=True)


def _mount(src, dst, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    if (
        _libc.mount(enc(src), enc(dst), enc(fstype), ctypes.c_ulong(flags), enc(data))
        != 0
    ):
        err = ctypes.get_errno()
        raise OSError(err, f"mount {src} -> {dst}: {os.strerror(err)}")


def _join_cgroups(spec):
    for procs in spec.get("cgroup_procs", []):
        with open(procs, "w", encoding="ascii") as fh:
            fh.write("0")  # this process; everything it forks from now on is inside


def _scratch(spec, new):
    """One tmpfs for everything the notebook may write: its work folder, HOME, /tmp and
    /dev/shm."""
    path, size, files = spec["scratch"]
    os.makedirs(new + path, exist_ok=True)
    _mount(
        "tmpfs",
        new + path,
        "tmpfs",
        MS_NOSUID | MS_NODEV,
        f"size={size},nr_inodes={files},mode=0755",
    )
    for sub in ("work", "home", "tmp", "shm"):
        os.mkdir(new + path + "/" + sub, 0o700)
        os.chown(new + path + "/" + sub, spec["uid"], spec["gid"])
    for sub, dst in (("tmp", "/tmp"), ("shm", "/dev/shm")):
        os.makedirs(new + dst, exist_ok=True)
        _mount(new + path + "/" + sub, new + dst, None, MS_BIND)


def _build_root(spec):
    new = spec["newroot"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0755")
    # the scratch /tmp first, then the binds: a Python installation under /tmp (a CI
    # checkout's venv) stays visible
    _scratch(spec, new)
    for src, dst, ro in spec["binds"]:
        target = new + dst
        if os.path.islink(src):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.symlink(os.readlink(src), target)
            continue
        if os.path.isdir(src):
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "a").close()
        _mount(src, target, None, MS_BIND | MS_REC)
        flags = (
            MS_REMOUNT
            | MS_BIND
            | MS_NOSUID
            | (MS_RDONLY if ro else 0)
            | (0 if dst.startswith("/dev/") else MS_NODEV)
        )
        _mount(None, target, None, flags)
    os.makedirs(new + "/proc", exist_ok=True)
    _mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chroot(new)
    os.chdir("/")
    gid, uid = spec["gid"], spec["uid"]
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def _limits(spec):
    names = {
        "as": "RLIMIT_AS",
        "nproc": "RLIMIT_NPROC",
        "fsize": "RLIMIT_FSIZE",
        "cpu": "RLIMIT_CPU",
        "nofile": "RLIMIT_NOFILE",
        "core": "RLIMIT_CORE",
    }
    for key, value in spec.get("limits", {}).items():
        res = getattr(resource, names[key], None)
        if res is not None and value is not None:
            try:
                resource.setrlimit(res, (value, value))
            except (
                ValueError,
                OSError,
            ):  # e.g. RLIMIT_AS on macOS: documented as not enforced there
                pass
    if sys.platform.startswith("linux"):
        _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        _seccomp()


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp_program(machine):
    """The BPF program (a list of (code, jt, jf, k)) for ``machine``, or None for an
    architecture not listed."""
    if machine not in SECCOMP_ARCHES:
        return None
    arch, refused = SECCOMP_ARCHES[machine]
    n = len(refused)
    prog = [
        (BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (
            BPF_JEQ_K,
            1,
            0,
            arch,
        ),  # another ABI (i386 through int 0x80 on x86_64): refused
        (BPF_RET_K, 0, 0, SECCOMP_RET_EPERM),
        (BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        (BPF_JGE_K, n, 0, X32_SYSCALL_BIT),
    ]  # x32 numbers: refused
    prog += [(BPF_JEQ_K, n - i - 1, 0, nr) for i, nr in enumerate(refused[:-1])]
    prog += [
        (BPF_JEQ_K, 0, 1, refused[-1]),
        (BPF_RET_K, 0, 0, SECCOMP_RET_EPERM),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    return prog


def _seccomp():
    prog = seccomp_program(os.uname().machine)
    if prog is None:
        return
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), filters)
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp: {os.strerror(err)}")


def main(spec_path):
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    if spec["mode"] == "root":
        _join_cgroups(spec)
        _build_root(spec)
    _limits(spec)
    os.chdir(spec["cwd"])
    os.execve(spec["argv"][0], spec["argv"], spec["env"])


if __name__ == "__main__":
    main(sys.argv[1])
