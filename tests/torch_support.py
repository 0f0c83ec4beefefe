"""What the torch_ops tests share (imported by name: tests/ is on ``sys.path``): float64
tensors from arrays and back, the tolerance of float64 parity, and the CUDA markers."""

import numpy as np
import pytest
import torch

F64 = torch.float64
TIGHT = dict(rtol=1e-12, atol=1e-12)
cuda = pytest.mark.cuda
needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU"
)


def tensor(x, dtype=F64, device="cpu"):
    """``x`` (array-like) as a torch tensor, float64 on the CPU by default."""
    return torch.as_tensor(np.asarray(x), dtype=dtype, device=device)


def to_numpy(x):
    """A tensor as a float64 NumPy array (detached, on the CPU)."""
    return x.detach().double().cpu().numpy()
