"""Sandbox uids that no two sandboxes share, even across graders running at the same
time on one machine.

The root sandbox runs each notebook as a uid with no account. Limits such as
``RLIMIT_NPROC`` count per uid, machine-wide, so two sandboxes on one uid would share
(and could exhaust) one budget. :class:`UidLease` takes the first uid from
:data:`FIRST_SANDBOX_UID` on that has no account, that no other lease holds (leases are
``flock`` locks on files in a root-only folder, released when the lease is closed or its
process dies: a crashed grader leaks nothing), and that its last tenant left clean,
checked each time (:func:`residue`): no running process, no kernel key, no file in the
machine's shared temporary folders. A uid with any of these is passed over.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import stat
import tempfile

FIRST_SANDBOX_UID = 61000
UID_RANGE = 4096
LOCK_DIR = "/run/dpo_grpo_sandbox_uids"
#: where a process of any uid may leave files behind on a usual Linux machine
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm")
#: entries of those folders looked at, at most, per check
MAX_SCANNED = 50_000


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


def kernel_keys(uid: int) -> int:
    """How many kernel keys ``uid`` owns (``/proc/key-users``; 0 where it has no
    line or the file is missing)."""
    try:
        with open("/proc/key-users", encoding="ascii", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return 0
    for line in lines:
        head, _, rest = line.partition(":")
        if head.strip() == str(uid) and rest.split():
            return int(rest.split()[1].split("/")[0])
    return 0


def files_owned(uid: int, folders=None, limit: int = MAX_SCANNED) -> list:
    """Up to ten paths owned by ``uid`` under ``folders`` (default: the machine's shared
    temporary folders and this process's), links not followed, at most ``limit``
    entries looked at."""
    folders = folders or sorted({*SHARED_FOLDERS, tempfile.gettempdir()})
    found, stack, seen = [], [f for f in folders if os.path.isdir(f)], 0
    while stack and len(found) < 10 and seen < limit:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_uid == uid:
                found.append(entry.path)
            elif stat.S_ISDIR(st.st_mode):
                stack.append(entry.path)
    return found


def residue(uid: int, busy=None) -> list:
    """What a tenant of ``uid`` left behind, in words (empty: clean): running
    processes (``busy``: the uids in use, if already known), kernel keys, files in the
    shared temporary folders."""
    left = []
    if uid in (uids_in_use() if busy is None else busy):
        left.append("a running process")
    keys = kernel_keys(uid)
    if keys:
        left.append(f"{keys} kernel key(s)")
    files = files_owned(uid)
    if files:
        left.append(f"files such as {files[0]}")
    return left


class UidLease:
    """A uid for one sandbox, held until :meth:`close` (a context manager). ``lock_dir``
    and ``uids`` (the range to lease from) are for tests."""

    def __init__(self, lock_dir: str = LOCK_DIR, uids=None):
        if not isinstance(lock_dir, str) or not lock_dir:
            raise TypeError(f"lock_dir must be a non-empty str, got {lock_dir!r}")
        uids = uids or range(FIRST_SANDBOX_UID, FIRST_SANDBOX_UID + UID_RANGE)
        if not isinstance(uids, range) or not uids or uids.start < 1000:
            raise ValueError(f"uids must be a non-empty range from 1000 on, got {uids}")
        folder = _lock_dir(lock_dir)
        busy = uids_in_use()
        self.uid, self._fd = None, None
        for uid in uids:
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
            if residue(uid):  # checked now that no other lease can start on it
                os.close(fd)
                continue
            self.uid, self._fd = uid, fd
            return
        raise RuntimeError(f"no free and clean sandbox uid in {uids.start}..{uids[-1]}")

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
