"""CPU tensors to and from NumPy without copies where the layout allows."""
import numpy as np
import torch


def as_numpy(t, what):
    """t as a C-contiguous float32 NumPy array sharing t's memory where it is one already (a
    detached view); float16/bfloat16 and non-contiguous tensors are converted once."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, not {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(f"{what} is on {t.device}; precsim.torch computes on CPU tensors (move it with .cpu())")
    if t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"{what}: dtype {t.dtype} is not supported; allowed: torch.float32, torch.float16, torch.bfloat16")
    t = t.detach()
    if t.dtype != torch.float32:
        t = t.float()  # exact: every float16/bfloat16 value is a float32
    return t.contiguous().numpy()


def from_numpy(a):
    return torch.from_numpy(a)
