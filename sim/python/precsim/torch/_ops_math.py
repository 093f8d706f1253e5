"""The FP32 arithmetic of precsim's transformer (sim/src/model/layers.cpp, transformer_attention.cpp)
on torch tensors, operation for operation: every sum sequential in index order (a loop over the
reduced dimension, vectorised over the others), every product and sum one IEEE float32 operation in
the C++ source's order, exp, log, tanh and the LayerNorm square root in float64, rounded once.
`opmath` rounds each intermediate as precsim's Numerics::opmath does (identity in FP32 opmath;
attention.opmath "low" rounds into the activations' format)."""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import numpy as np
import torch

Opmath = Optional[Callable[[torch.Tensor], torch.Tensor]]

_GELU_S = float(np.float32(0.7978845608028654))  # sqrt(2/pi), T(kGeluScale)
_GELU_C = float(np.float32(0.044715))
_GELU_3C = float(np.float32(3) * np.float32(0.044715))


def _same(t: torch.Tensor) -> torch.Tensor:
    return t


def _seq_sum(x: torch.Tensor, op: Callable[[torch.Tensor], torch.Tensor] = _same) -> torch.Tensor:
    """sum over the last dimension in index order from 0, each partial sum rounded by op."""
    s = torch.zeros(x.shape[:-1], dtype=torch.float32)
    for i in range(x.shape[-1]):
        s = op(s + x[..., i])
    return s


def layer_norm_forward(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, opmath: Opmath = None,
                       eps: float = 1e-5) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """layernorm_forward (or layernorm_forward_low under opmath) over the last dimension of x (rows, c):
    the output, the mean and the reciprocal standard deviation per row."""
    c = x.shape[-1]
    if opmath is None:
        m = _seq_sum(x) / c
        d = x - m[:, None]
        v = _seq_sum(d * d) / c
        r = (1.0 / torch.sqrt((v + float(np.float32(eps))).double())).float()
        return (d * r[:, None]) * w + b, m, r
    o = opmath
    m = o(_seq_sum(x, o) / c)
    d = o(x - m[:, None])
    v = o(_seq_sum(o(d * d), o) / c)
    r = o((1.0 / torch.sqrt(v.double() + eps)).float())
    return o(o(d * r[:, None]) * w + b), m, r


def layer_norm_backward(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, m: torch.Tensor,
                        r: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """layernorm_backward: dx (the term it adds to the input gradient), dweight and dbias (sums over
    the rows in row order from 0)."""
    norm = (x - m[:, None]) * r[:, None]
    dnorm = w * dy
    dnorm_mean = _seq_sum(dnorm) / x.shape[-1]
    dnorm_norm_mean = _seq_sum(dnorm * norm) / x.shape[-1]
    dx = ((dnorm - dnorm_mean[:, None]) - norm * dnorm_norm_mean[:, None]) * r[:, None]
    ndy = norm * dy
    dw, db = torch.zeros_like(w), torch.zeros_like(w)
    for row in range(x.shape[0]):
        db = db + dy[row]
        dw = dw + ndy[row]
    return dx, dw, db


def gelu_forward(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """gelu_forward (tanh form): the output and the tanh the backward reads."""
    cube = ((_GELU_C * x) * x) * x
    t = torch.tanh((_GELU_S * (x + cube)).double()).float()
    return (0.5 * x) * (1.0 + t), t


def gelu_backward(dy: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    sech2 = 1.0 - t * t
    local = 0.5 * (1.0 + t) + (((x * 0.5) * sech2) * _GELU_S) * (1.0 + (_GELU_3C * x) * x)
    return local * dy


def allowed_keys(valid: torch.Tensor, seq: int) -> torch.Tensor:
    """(B, T, T) boolean: query i may attend key j (j <= i and key j a real token)."""
    causal = torch.ones(seq, seq, dtype=torch.bool).tril()
    return causal[None] & valid.bool()[:, None, :]


def masked_softmax_forward(s: torch.Tensor, allowed: torch.Tensor, scale: float, opmath: Opmath = None) -> torch.Tensor:
    """masked_softmax_forward on scores s (B, NH, T, T) with allowed (B, 1, T, T): softmax over the
    allowed keys of scale * s, masked probabilities 0, a row with no allowed key all 0."""
    o = opmath or _same
    z = o(scale * s)
    maxv = torch.where(allowed, z, torch.tensor(float("-inf"))).amax(dim=-1, keepdim=True)
    e = torch.where(allowed, o(torch.exp(o(z - maxv).double()).float()), torch.zeros(()))
    total = _seq_sum(e, o)[..., None]
    any_key = allowed.any(dim=-1, keepdim=True)
    return torch.where(any_key, o(e / total), torch.zeros(()))


def masked_softmax_backward(p: torch.Tensor, dp: torch.Tensor, scale: float) -> torch.Tensor:
    dot = _seq_sum(p * dp)[..., None]
    return (scale * p) * (dp - dot)


def softmax_forward(x: torch.Tensor, opmath: Opmath = None) -> torch.Tensor:
    """Softmax over the last dimension as masked_softmax_forward computes it with every key allowed
    and scale 1 (a -inf input is a masked key)."""
    o = opmath or _same
    z = o(x)
    e = o(torch.exp(o(z - z.amax(dim=-1, keepdim=True)).double()).float())
    return o(e / _seq_sum(e, o)[..., None])
