"""Sandbox set-up, run as ``python -I -S _sandbox_init.py SPEC.json`` just before the notebook runner.

Standard library only, reads nothing but the spec. Modes:

- ``root`` (Linux, grader running as root; started inside ``unshare --mount --net --pid --ipc --uts --fork
  --kill-child``): builds a new root on a tmpfs from read-only, nosuid bind mounts of the system folders and the
  Python installation, plus the sandbox's own folders; mounts a fresh ``/proc``, a minimal ``/dev`` and a
  size-capped ``/tmp``; chroots there; drops to the unprivileged uid/gid with no supplementary groups; sets
  no_new_privs; applies the resource limits; execs the runner with the scrubbed environment.
- ``limits`` (inside bubblewrap, or with no isolation at all): applies the resource limits and no_new_privs, execs.
"""

import ctypes
import json
import os
import resource
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS = 38

_libc = ctypes.CDLL(None, use_errno=True)


def _mount(src, dst, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    if _libc.mount(enc(src), enc(dst), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {src} -> {dst}: {os.strerror(err)}")


def _build_root(spec):
    new = spec["newroot"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0755")
    # the private /tmp first, then the binds: a Python installation under /tmp (a CI checkout's venv) stays visible
    for dst, size in spec["tmpfs"]:
        os.makedirs(new + dst, exist_ok=True)
        _mount("tmpfs", new + dst, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
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
        flags = MS_REMOUNT | MS_BIND | MS_NOSUID | (MS_RDONLY if ro else 0) | (0 if dst.startswith("/dev/") else MS_NODEV)
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
    names = {"as": "RLIMIT_AS", "nproc": "RLIMIT_NPROC", "fsize": "RLIMIT_FSIZE", "cpu": "RLIMIT_CPU",
             "nofile": "RLIMIT_NOFILE", "core": "RLIMIT_CORE"}
    for key, value in spec.get("limits", {}).items():
        res = getattr(resource, names[key], None)
        if res is not None and value is not None:
            try:
                resource.setrlimit(res, (value, value))
            except (ValueError, OSError):  # e.g. RLIMIT_AS on macOS: documented as not enforced there
                pass
    if sys.platform.startswith("linux"):
        _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def main(spec_path):
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    if spec["mode"] == "root":
        _build_root(spec)
    _limits(spec)
    os.chdir(spec["cwd"])
    os.execve(spec["argv"][0], spec["argv"], spec["env"])


if __name__ == "__main__":
    main(sys.argv[1])
