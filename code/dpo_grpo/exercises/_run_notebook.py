"""Child process of the grader: execute one notebook in a fresh kernel (errors allowed, per-run time limit)."""

import sys
import time


def main(path: str, timeout: str) -> int:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    nb = nbformat.read(path, as_version=4)
    budget = float(timeout)
    client = NotebookClient(nb, timeout=max(1, int(budget)), kernel_name="python3", allow_errors=True,
                            record_timing=False)
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
