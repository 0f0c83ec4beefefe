"""Where and how a lab run executes: its device, its CPU thread count, its seeds and
random-generator states, and what it measures of the machine (memory, timing syncs).
"""

from __future__ import annotations

import contextlib
import os
import platform
import random
import sys

import numpy as np
import torch

from .. import torch_ops


def as_device(device) -> torch.device:
    """``device`` (a string or ``torch.device``) as a ``torch.device``; a ValueError
    names it if it is not one."""
    if isinstance(device, torch.device):
        return device
    if not isinstance(device, str):
        raise TypeError(
            "device must be a device string such as 'cpu' or 'cuda', or a "
            f"torch.device, got {type(device).__name__}"
        )
    try:
        return torch.device(device)
    except RuntimeError as exc:
        raise ValueError(
            "device must be a device string such as 'cpu' or 'cuda', got "
            f"{device!r} ({exc})"
        ) from None


def resolve_device(cfg) -> torch.device:
    """``cfg.device``, or :func:`torch_ops.default_device` when it is None."""
    return (
        torch.device(cfg.device)
        if cfg.device is not None
        else torch.device(torch_ops.default_device())
    )


@contextlib.contextmanager
def torch_threads(cfg, device: torch.device):
    """Fix torch's intra-op thread count to ``cfg.cpu_threads`` on CPU while the run
    lasts (reproducible sums, no oversubscription)."""
    if device.type != "cpu" or cfg.cpu_threads is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(cfg.cpu_threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def derived_seed(seed: int, purpose: str) -> int:
    """A 63-bit seed for one purpose (model init, data order, sampling), independent
    across purposes: ``SeedSequence([seed, tag(purpose)])``."""
    tag = int.from_bytes(purpose.encode(), "little") % (2**31)
    return int(
        np.random.SeedSequence([seed, tag])
        .generate_state(2, dtype=np.uint32)
        .view(np.uint64)[0]
        >> 1
    )


def memory_bytes(device: torch.device) -> int:
    """Peak allocated bytes on a GPU; the process's resident set size on a CPU."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        # not Linux: peak RSS (bytes on macOS, KiB elsewhere)
        try:
            import resource
        except ImportError:  # Windows
            return 0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(rss if sys.platform == "darwin" else rss * 1024)


def reset_peak_memory(device: torch.device):
    """Start a new peak for :func:`memory_bytes` (GPU only)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def synchronize(device: torch.device):
    """Wait for the GPU's queued work, so a clock read after it is honest."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def rng_state(gen: torch.Generator) -> dict:
    """Every random generator a run reads: torch's, NumPy's, Python's, the sampler
    ``gen`` and (if present) CUDA's."""
    state = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
        "sampler": gen.get_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict, gen: torch.Generator):
    """Restore what :func:`rng_state` saved (``gen`` is the sampler)."""
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    gen.set_state(state["sampler"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def environment() -> dict:
    """What the results depend on besides the config and seed: torch build, CPU model,
    thread count."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(
                (
                    line.split(":", 1)[1].strip()
                    for line in fh
                    if line.startswith("model name")
                ),
                cpu,
            )
    except OSError:
        pass
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu": cpu,
    }
