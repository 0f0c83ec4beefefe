"""Child process of the grader, run inside the sandbox: execute one notebook in a fresh
kernel (errors allowed, per-cell time limit). The kernel talks to it over Unix sockets
(IPC transport), so the sandbox needs no network interface. Cell outputs are discarded
as they arrive: nothing a kernel prints is kept or trusted."""

import sys
import time


def main(path: str, timeout: str) -> int:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    class _Client(NotebookClient):
        def output(
            self, outs, msg, display_id, cell_index
        ):  # drop every output: the grader never reads them
            return None

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
    except DeadKernelError as exc:
        print(f"kernel died: {exc}")
        return 4
    return 3 if time.monotonic() - start > budget else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
