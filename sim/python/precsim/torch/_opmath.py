"""torch's softmax, layer and RMS norm, GELU and SiLU in the recipe's opmath when attention.opmath
is "low" (precsim's Numerics::opmath: intermediates rounded into the activations' format). Softmax
and LayerNorm then run as precsim's low-opmath kernels do (every partial sum, the max, exp, mean,
variance, rstd and output rounded: _ops_math.py), their backward in FP32 as precsim's; RMSNorm,
GELU and SiLU, which precsim's models do not compute in low opmath, round their input and output
(what a 16-bit kernel with FP32 internals gives). In FP32 opmath all of them stay torch's. Each call
is counted in the coverage (0 FLOPs), and the normalisations and activations a low-opmath recipe
does not take (LIST below) as not emulated."""
from __future__ import annotations

import math
from typing import Any, Callable, Tuple

import torch
import torch.nn.functional as F

from ._fallback import Fallback
from ._ops_emulated import low_opmath
from ._ops_fn import LayerNormFn, OpNumerics, RoundFn, SoftmaxFn, _same


class _Fp32(Fallback):
    """The recipe's opmath is FP32 (or the module is left out): torch's own function."""


def _opmath(emu, op: str) -> Callable[[torch.Tensor], torch.Tensor]:
    o = low_opmath(emu, op)
    if o is None:
        raise _Fp32("FP32 opmath")
    return o


def _refuse(emu, op: str, why: str) -> None:
    emu._coverage.add(emu._stack[-1][0], op, 0, False, why)
    raise _Fp32(why)


def _shape(normalized_shape: Any) -> Tuple[int, ...]:
    return (int(normalized_shape),) if isinstance(normalized_shape, int) else tuple(normalized_shape)


def softmax(emu, x, dim=None, _stacklevel=3, dtype=None):
    o = _opmath(emu, "softmax")
    if dtype is not None or dim is None:
        _refuse(emu, "softmax", "dtype= or no dim")
    emu._count("softmax", 0)
    return SoftmaxFn.apply(x.movedim(dim, -1), o).movedim(-1, dim)


def layer_norm(emu, x, normalized_shape, weight=None, bias=None, eps=1e-5):
    o = _opmath(emu, "layer_norm")
    shape = _shape(normalized_shape)
    c = math.prod(shape)
    w = weight.reshape(c) if weight is not None else torch.ones(c)
    b = bias.reshape(c) if bias is not None else torch.zeros(c)
    emu._count("layer_norm", 0)
    out = LayerNormFn.apply(x.reshape(*x.shape[:x.dim() - len(shape)], c), w, b, OpNumerics(opmath=o), float(eps))
    return out.reshape(x.shape)


def _in_out(emu, op: str, x: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """fn(x) on x rounded into the activations' format, its output rounded too."""
    o = _opmath(emu, op)
    emu._count(op, 0)
    return RoundFn.apply(fn(RoundFn.apply(x, o, _same)), o, _same)


def rms_norm(emu, x, normalized_shape, weight=None, eps=None):
    return _in_out(emu, "rms_norm", x, lambda t: F.rms_norm(t, normalized_shape, weight, eps))


def gelu(emu, x, approximate="none"):
    return _in_out(emu, "gelu", x, lambda t: F.gelu(t, approximate=approximate))


def silu(emu, x, inplace=False):
    if inplace:
        _opmath(emu, "silu")
        _refuse(emu, "silu", "inplace=True")
    return _in_out(emu, "silu", x, F.silu)


LOW_HANDLERS = {
    F.softmax: ("softmax", softmax), torch.softmax: ("softmax", softmax),
    torch.Tensor.softmax: ("softmax", softmax),
    F.layer_norm: ("layer_norm", layer_norm),
    F.rms_norm: ("rms_norm", rms_norm), F.gelu: ("gelu", gelu), F.silu: ("silu", silu),
}

# What a low-opmath recipe leaves in torch's FP32 opmath, counted as not emulated.
LIST = {F.log_softmax: "log_softmax", torch.log_softmax: "log_softmax", torch.Tensor.log_softmax: "log_softmax",
        F.group_norm: "group_norm", F.batch_norm: "batch_norm", F.instance_norm: "instance_norm",
        F.mish: "mish", F.hardswish: "hardswish", F.softplus: "softplus", F.elu: "elu",
        torch.sigmoid: "sigmoid", torch.Tensor.sigmoid: "sigmoid", torch.tanh: "tanh", torch.Tensor.tanh: "tanh"}


def count_left_in_fp32(emu, func: Any) -> None:
    """A normalisation or activation a low-opmath recipe does not take, counted as not emulated."""
    name = LIST.get(func)
    if name is not None and low_opmath(emu, name) is not None:
        emu._coverage.add(emu._stack[-1][0], name, 0, False, "runs in FP32 opmath: not intercepted")
