"""Child process of the grader, run inside the sandbox: execute one notebook in a fresh
kernel (errors allowed, per-cell time limit). The kernel talks to it over Unix sockets
(IPC transport), so the sandbox needs no network interface. Cell outputs are discarded
as they arrive: nothing a kernel prints is kept or trusted.

Exit status: 0, the notebook ran to its end; 3, it ran past its time; 4
(:data:`KERNEL_DIED`), its kernel died, and the last line printed says how
(:func:`kernel_death`: the signal that killed it or its exit code, as the runner, its
parent, saw them); anything else, the runner itself failed. The grader's note on a
run that is none of 0 and 3 is :func:`crash_note`.
"""

import re
import signal
import sys
import time

KERNEL_DIED = 4
_DEATH = re.compile(
    r"kernel died(?:: killed by signal (\d{1,3})|: exited with code (\d{1,3}))?"
)


def kernel_death(status) -> str:
    """The line the runner prints when the kernel died: ``status`` is the kernel
    process's exit status as ``subprocess`` gives it (``-N``: killed by signal N;
    ``None``: unknown)."""
    if status is None:
        return "kernel died"
    if not isinstance(status, int):
        raise TypeError(f"status must be an int or None, got {type(status).__name__}")
    if status < 0:
        return f"kernel died: killed by signal {-status}"
    return f"kernel died: exited with code {status}"


def crash_note(code, output: str) -> str:
    """The grader's note on a run whose runner exited with ``code`` (neither 0 nor 3)
    after printing ``output``. For a dead kernel (code :data:`KERNEL_DIED`) it is
    written from the numbers of the runner's last line (:func:`kernel_death`), and a
    SIGKILL is said to come from the notebook or from a lack of memory (the sandbox's
    limit or the machine's); otherwise it is "crashed: " and the last line of
    ``output`` (at most 200 characters) or the exit code."""
    if not isinstance(output, str):
        raise TypeError(f"output must be a str, got {type(output).__name__}")
    last = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
    if code != KERNEL_DIED:
        return "crashed: " + (last[-1][:200] if last else f"exit code {code}")
    found = _DEATH.fullmatch(last[-1]) if last else None
    if found is None or not (found[1] or found[2]):
        return "crashed: the kernel died"
    if found[2]:
        return f"crashed: the kernel died, exited with code {int(found[2])}"
    number = int(found[1])
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"crashed: the kernel died, killed by signal {number}"
    note = f"crashed: the kernel died, killed by signal {number} ({name})"
    if number == signal.SIGKILL:
        note += ": the notebook killed it, or it ran out of memory"
    return note


def main(path: str, timeout: str) -> int:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    class _Client(NotebookClient):
        kernel = None  # the kernel's process (subprocess.Popen), to see how it ended
        ended = None  # its exit status when nbclient came to stop it (None: running)
        stopping = False

        def output(
            self, outs, msg, display_id, cell_index
        ):  # drop every output: the grader never reads them
            return None

        async def async_start_new_kernel(self, **kwargs):
            await super().async_start_new_kernel(**kwargs)
            provisioner = getattr(self.km, "provisioner", None)
            self.kernel = getattr(provisioner, "process", None)

        async def _async_cleanup_kernel(self):
            if not self.stopping and self.kernel is not None:
                self.stopping, self.ended = True, self.kernel.poll()
            await super()._async_cleanup_kernel()

    from traitlets.config import Config

    nb = nbformat.read(path, as_version=4)
    budget = float(timeout)
    # Unix sockets: no network needed
    client = _Client(
        nb,
        timeout=max(1, int(budget)),
        kernel_name="python3",
        allow_errors=True,
        record_timing=False,
        startup_timeout=60,
        config=Config({"KernelManager": {"transport": "ipc"}}),
    )
    start = time.monotonic()
    try:
        client.execute()
    except CellTimeoutError:
        return 3
    except Exception as exc:  # noqa: BLE001  (nbclient may raise another error, e.g. AssertionError, as the kernel dies under it)
        ended = client.ended
        if ended is None and isinstance(exc, DeadKernelError) and client.kernel:
            ended = client.kernel.returncode
        if ended is None and not isinstance(exc, DeadKernelError):
            raise
        print(kernel_death(ended), flush=True)
        return KERNEL_DIED
    return 3 if time.monotonic() - start > budget else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
