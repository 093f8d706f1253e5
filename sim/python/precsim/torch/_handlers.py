"""What each intercepted torch function becomes. A handler returns the result, or NotImplemented
(with a reason) to run torch's own function, whose matrix FLOPs the coverage counter then counts
as not emulated. A weight is an nn.Parameter operand (nn.Linear, transformers' Conv1D through
addmm, a convolution's kernel, an embedding table): it is cast into the recipe's weights format
and the product runs as the recipe's linear layer; a product of two activations is quantized
along K only."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ._autograd import quantize
from ._conv import conv, conv_transpose
from ._fallback import Fallback
from ._products import CastWeights, GemmProduct, LinearProduct
from ._opmath import LOW_HANDLERS
from ._ops_emulated import OPS_HANDLERS, low_opmath, weight_grad_rounder
from ._ops_fn import SoftmaxFn
from ._sdpa import sdpa

_FLOAT = (torch.float32, torch.float16, torch.bfloat16)




def _floats(*ts: Any) -> None:
    for t in ts:
        if t is not None and (not isinstance(t, torch.Tensor) or t.dtype not in _FLOAT or t.device.type != "cpu"):
            what = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
            raise Fallback(f"operand {what} is not a CPU float32/float16/bfloat16 tensor")


def _weight_product(emu, op: str, x, w_oi, b):
    """x w^T + b as the recipe's linear layer; w_oi (out, in)."""
    _floats(x, w_oi, b)
    if b is not None and b.shape != (w_oi.shape[0],):
        raise Fallback(f"bias of shape {tuple(b.shape)} is not one per output")
    site = emu._site(op)
    rows = x.numel() // max(x.shape[-1], 1)
    emu._count(op, 2 * rows * w_oi.shape[0] * w_oi.shape[1])
    return LinearProduct.apply(x, w_oi, b, site)


def _gemm(emu, op: str, a, b, site=None):
    """Stacks a (B, m, k) @ b (B, k, n) through GemmProduct."""
    _floats(a, b)
    site = site or emu._site(op)
    emu._count(op, 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2])
    return GemmProduct.apply(a, b, site)


def _matmul(emu, op: str, a, b):
    """torch.matmul's shapes: 1-D operands, a 2-D right operand folded into rows, broadcast batches."""
    _floats(a, b)
    if a.dim() == 0 or b.dim() == 0:
        raise Fallback("a 0-d operand")
    if a.dim() == 1:
        return _matmul(emu, op, a.unsqueeze(0), b).squeeze(-2 if b.dim() > 1 else -1)
    if b.dim() == 1:
        return _matmul(emu, op, a, b.unsqueeze(-1)).squeeze(-1)
    if b.dim() == 2 and isinstance(b, nn.Parameter):
        return _weight_product(emu, op, a, b.t(), None)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if b.dim() == 2:
        c = _gemm(emu, op, a.reshape(1, -1, k), b.unsqueeze(0))
        return c.reshape(*a.shape[:-1], n)
    batch = tuple(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    a3 = a.expand(*batch, m, k).reshape(-1, m, k)
    b3 = b.expand(*batch, k, n).reshape(-1, k, n)
    return _gemm(emu, op, a3, b3).reshape(*batch, m, n)


def _no_out(kw: Dict[str, Any]) -> None:
    if kw.get("out") is not None:
        raise Fallback("out= is given")


def h_linear(emu, input, weight, bias=None):
    if weight.dim() != 2:
        raise Fallback(f"weight of {weight.dim()} dimensions")
    return _weight_product(emu, "linear", input, weight, bias)


def h_mm(emu, a, b, **kw):
    _no_out(kw)
    if a.dim() != 2 or b.dim() != 2:
        raise Fallback("mm takes 2-D operands")
    if isinstance(b, nn.Parameter):
        return _weight_product(emu, "mm", a, b.t(), None)
    return _gemm(emu, "mm", a.unsqueeze(0), b.unsqueeze(0)).squeeze(0)


def h_addmm(emu, input, a, b, *, beta=1, alpha=1, **kw):
    _no_out(kw)
    if beta != 1 or alpha != 1 or a.dim() != 2 or b.dim() != 2:
        raise Fallback("addmm with beta or alpha other than 1")
    if isinstance(b, nn.Parameter) and input.dim() == 1 and input.shape[0] == b.shape[1]:
        return _weight_product(emu, "addmm", a, b.t(), input)  # transformers' Conv1D: x W + b
    return _gemm(emu, "addmm", a.unsqueeze(0), b.unsqueeze(0)).squeeze(0) + input


def h_bmm(emu, a, b, **kw):
    _no_out(kw)
    if a.dim() != 3 or b.dim() != 3:
        raise Fallback("bmm takes 3-D operands")
    return _gemm(emu, "bmm", a, b)


def h_baddbmm(emu, input, a, b, *, beta=1, alpha=1, **kw):
    _no_out(kw)
    if a.dim() != 3 or b.dim() != 3:
        raise Fallback("baddbmm takes 3-D operands")
    c = _gemm(emu, "baddbmm", a, b)
    c = c if alpha == 1 else alpha * c
    return c if beta == 0 else c + (input if beta == 1 else beta * input)


def h_matmul(emu, a, b, **kw):
    _no_out(kw)
    return _matmul(emu, "matmul", a, b)


def h_rmatmul(emu, a, b):
    return _matmul(emu, "matmul", b, a)


def _conv_handler(nd: int) -> Callable[..., Any]:
    def handler(emu, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        _floats(input, weight, bias)
        op = f"conv{nd}d"
        site = emu._site(op)
        linear = lambda cols, w2, b2, g: LinearProduct.apply(cols, w2, b2, dataclasses.replace(site, step=site.part_step(g)))
        y, flops = conv(input, weight, bias, stride, padding, dilation, int(groups), nd, linear)
        emu._count(op, flops)
        return y
    return handler


def _conv_transpose_handler(nd: int) -> Callable[..., Any]:
    def handler(emu, input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        _floats(input, weight, bias)
        op = f"conv_transpose{nd}d"
        site = emu._site(op)
        linear = lambda cols, w2, b2, g: LinearProduct.apply(cols, w2, b2, dataclasses.replace(site, step=site.part_step(g)))
        y, flops = conv_transpose(input, weight, bias, stride, padding, output_padding, int(groups), dilation, nd,
                                  linear)
        emu._count(op, flops)
        return y
    return handler


def h_sdpa(emu, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    _floats(q, k, v)
    sites = [emu._site("sdpa.qk", attention=True), emu._site("sdpa.pv", attention=True)]
    fmt, rounding = emu._scores_format(sites[0])
    product = lambda a, b, which: GemmProduct.apply(a, b, sites[which])
    key = lambda which: (sites[which].step, 0, which)
    round_scores = (lambda t, which: t) if fmt == "fp32" else \
        (lambda t, which: quantize(t, fmt, rounding=rounding, seed=emu.seed, key=key(which)))
    low = low_opmath(emu, "sdpa")
    softmax = (lambda s: torch.softmax(s, dim=-1)) if low is None else (lambda s: SoftmaxFn.apply(s, low))
    out, flops = sdpa(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa, product=product,
                      round_scores=round_scores, softmax=softmax)
    emu._count("sdpa", flops)
    return out


def h_embedding(emu, input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                sparse=False):
    if max_norm is not None:
        raise Fallback("max_norm renormalizes the table in place")
    _floats(weight)
    site = emu._site("embedding")
    emu._count("embedding", 0)
    # A sparse gradient (sparse=True) passes unrounded: precsim rounds dense arrays.
    table = CastWeights.apply(weight, site, None if sparse else weight_grad_rounder(emu, "embedding"))
    return F.embedding(input, table, padding_idx, None, norm_type, scale_grad_by_freq, sparse)


HANDLERS: Dict[Any, Tuple[str, Callable[..., Any]]] = {
    F.linear: ("linear", h_linear),
    torch.mm: ("mm", h_mm), torch.Tensor.mm: ("mm", h_mm),
    torch.addmm: ("addmm", h_addmm), torch.Tensor.addmm: ("addmm", h_addmm),
    torch.bmm: ("bmm", h_bmm), torch.Tensor.bmm: ("bmm", h_bmm),
    torch.baddbmm: ("baddbmm", h_baddbmm), torch.Tensor.baddbmm: ("baddbmm", h_baddbmm),
    torch.matmul: ("matmul", h_matmul), torch.Tensor.matmul: ("matmul", h_matmul),
    torch.Tensor.__matmul__: ("matmul", h_matmul), torch.Tensor.__rmatmul__: ("matmul", h_rmatmul),
    F.conv1d: ("conv1d", _conv_handler(1)), F.conv2d: ("conv2d", _conv_handler(2)),
    F.conv3d: ("conv3d", _conv_handler(3)),
    F.conv_transpose1d: ("conv_transpose1d", _conv_transpose_handler(1)),
    F.conv_transpose2d: ("conv_transpose2d", _conv_transpose_handler(2)),
    F.conv_transpose3d: ("conv_transpose3d", _conv_transpose_handler(3)),
    F.scaled_dot_product_attention: ("sdpa", h_sdpa),
    F.embedding: ("embedding", h_embedding),
}

# precsim.torch.ops: precsim's own non-matrix operations, with the recipe's rounding points; and
# torch's softmax, normalisations and activations in a low opmath.
HANDLERS.update(OPS_HANDLERS)
HANDLERS.update(LOW_HANDLERS)
