"""Sandbox uids that no two sandboxes share, even across graders running at the same
time on one machine.

The root sandbox runs each notebook as a uid with no account. Limits such as
``RLIMIT_NPROC`` count per uid, machine-wide, so two sandboxes on one uid would share
(and could exhaust) one budget. :class:`UidLease` takes the first uid from
:data:`FIRST_SANDBOX_UID` on that has no account and no running process, and that no
other lease holds: leases are ``flock`` locks on files in a root-only folder, released
when the lease is closed or its process dies (a crashed grader leaks nothing).
"""

from __future__ import annotations

import fcntl
import os
import pwd
import stat

FIRST_SANDBOX_UID = 61000
UID_RANGE = 4096
LOCK_DIR = "/run/dpo_grpo_sandbox_uids"


def _lock_dir(path: str) -> str:
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise RuntimeError(
            f"{path} must be a folder of this user, writable by no one else"
        )
    return path


def uids_in_use() -> set:
    """Real uids of the processes running now (from ``/proc``; empty where there is
    none)."""
    used = set()
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return used
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
                for line in fh:
                    if line.startswith("Uid:"):
                        used.add(int(line.split()[1]))
                        break
        except (OSError, ValueError, IndexError):
            pass
    return used


class UidLease:
    """A uid for one sandbox, held until :meth:`close` (a context manager). ``lock_dir``
    is for tests."""

    def __init__(self, lock_dir: str = LOCK_DIR):
        if not isinstance(lock_dir, str) or not lock_dir:
            raise TypeError(f"lock_dir must be a non-empty str, got {lock_dir!r}")
        folder = _lock_dir(lock_dir)
        busy = uids_in_use()
        self.uid, self._fd = None, None
        for uid in range(FIRST_SANDBOX_UID, FIRST_SANDBOX_UID + UID_RANGE):
            if uid in busy or _has_account(uid):
                continue
            fd = os.open(
                os.path.join(folder, str(uid)),
                os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW,
                0o600,
            )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            self.uid, self._fd = uid, fd
            return
        raise RuntimeError(
            "no free sandbox uid in "
            f"{FIRST_SANDBOX_UID}..{FIRST_SANDBOX_UID + UID_RANGE - 1}"
        )

    def close(self):
        if self._fd is not None:
            os.close(self._fd)  # releases the lock
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _has_account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True
