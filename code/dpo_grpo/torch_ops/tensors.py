"""Tensor helpers shared by the torch losses: the default device, the compute dtype,
argument conversion and checks that never synchronise with the device, and
:class:`DeferredChecks` (value checks resolved with one synchronisation).
"""

from __future__ import annotations

import torch

from .. import _validation as v

_HALF = (torch.float16, torch.bfloat16)


def default_device() -> torch.device:
    """``torch.device("cuda")`` when a CUDA GPU is usable, else
    ``torch.device("cpu")``."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the losses compute in: float32 for half precision (bfloat16, float16),
    else ``dtype`` itself."""
    return torch.float32 if dtype in _HALF else dtype


def checked_tensor(
    x, name: str, *, like: torch.Tensor | None = None, ndim=None, floating: bool = True
) -> torch.Tensor:
    """``x`` as a tensor (array-likes are converted), on ``like``'s device; checks ndim
    and non-emptiness."""
    if x is None or isinstance(x, (str, bytes, dict)):
        raise TypeError(f"{name} must be a tensor of numbers, got {type(x).__name__}")
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(
            v.as_float_array(x, name, finite=False),
            device=None if like is None else like.device,
        )
        if like is not None and floating:
            x = x.to(compute_dtype(like.dtype))
    if floating and not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if not floating and x.is_complex():
        raise TypeError(f"{name} must be a real tensor, got dtype {x.dtype}")
    if like is not None and x.device != like.device:
        raise ValueError(
            f"{name} must be on the same device as new_logps ({like.device}), got "
            f"{x.device}"
        )
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if x.dim() not in allowed:
            want = " or ".join(f"{d}-D" for d in allowed)
            raise ValueError(f"{name} must be {want}, got shape {tuple(x.shape)}")
    if x.numel() == 0:
        raise ValueError(f"{name} must not be empty, got shape {tuple(x.shape)}")
    return x


def same_shape(first_name, first, **others):
    """Check that every keyword tensor has the shape of ``first`` (named
    ``first_name``)."""
    for name, t in others.items():
        if t.shape != first.shape:
            raise ValueError(
                f"{name} must have the same shape as {first_name}: "
                f"{tuple(t.shape)} != {tuple(first.shape)}"
            )


class DeferredChecks:
    """Value checks collected as 0-d bool tensors and resolved with one synchronisation
    (``.tolist()``)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.conds: list[torch.Tensor] = []
        self.messages: list = []

    def add(self, cond_fn, message):
        """``cond_fn()`` -> 0-d bool tensor that must be True; ``message``: str or
        callable (built on failure)."""
        if self.enabled:
            self.conds.append(cond_fn())
            self.messages.append(message)

    def raise_first_failure(self):
        """Resolve every check with one host-device sync; raise the first failure."""
        if not self.conds:
            return
        # the one host-device sync
        results = torch.stack([c.reshape(()) for c in self.conds]).tolist()
        for ok, message in zip(results, self.messages):
            if not ok:
                raise ValueError(message() if callable(message) else message)


def scalar_like(value, like: torch.Tensor) -> torch.Tensor:
    """0-d tensor of ``value`` with ``like``'s dtype and device, made by a fill kernel
    (no host-device copy)."""
    return torch.full((), value, dtype=like.dtype, device=like.device)
