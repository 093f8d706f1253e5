"""Convolution as im2col and the recipe's linear product, so that the emulated GEMM is the one a
GPU's implicit-GEMM convolution runs: rows = output positions, K = in_channels/groups x kernel
volume. The windows are torch views (unfold), so their gradient (col2im, a sum of the overlapping
windows in FP32) is torch's."""
from __future__ import annotations

import math
from typing import Any, Callable, List, Sequence, Tuple

import torch
import torch.nn.functional as F


def _tuple(v: Any, nd: int, what: str) -> Tuple[int, ...]:
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,) * nd
    if len(t) == 1 and nd > 1:
        t = t * nd
    if len(t) != nd:
        raise ValueError(f"conv{nd}d {what} {v!r}: give one int or {nd}")
    return tuple(int(x) for x in t)


def _pads(padding: Any, kernel: Sequence[int], dilation: Sequence[int], nd: int) -> List[Tuple[int, int]]:
    """(before, after) per spatial dimension; 'same' puts the odd element after, as torch does."""
    if padding == "valid":
        return [(0, 0)] * nd
    if padding == "same":
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return [(t // 2, t - t // 2) for t in total]
    return [(p, p) for p in _tuple(padding, nd, "padding")]


def _columns(x: torch.Tensor, kernel, stride, dilation, pads) -> Tuple[torch.Tensor, Tuple[int, ...]]:
    """x (N, C, *S) as windows (N, *O, C, *K) and the output size O."""
    nd = len(kernel)
    flat = [p for pair in reversed(pads) for p in pair]  # F.pad takes the last dimension first
    if any(flat):
        x = F.pad(x, flat)
    for d in range(nd):
        span = dilation[d] * (kernel[d] - 1) + 1
        x = x.unfold(2 + d, span, stride[d])[..., ::dilation[d]]
    out = tuple(x.shape[2:2 + nd])
    order = [0, *range(2, 2 + nd), 1, *range(2 + nd, 2 + 2 * nd)]
    return x.permute(order), out


def conv(x: torch.Tensor, w: torch.Tensor, b: Any, stride: Any, padding: Any, dilation: Any, groups: int, nd: int,
         linear: Callable[..., torch.Tensor]) -> Tuple[torch.Tensor, int]:
    """F.conv{nd}d through linear(cols, w2d, bias, part) per group; returns (y, forward FLOPs)."""
    unbatched = x.dim() == nd + 1
    if unbatched:
        x = x.unsqueeze(0)
    kernel = tuple(w.shape[2:])
    stride, dilation = _tuple(stride, nd, "stride"), _tuple(dilation, nd, "dilation")
    cols, out_size = _columns(x, kernel, stride, dilation, _pads(padding, kernel, dilation, nd))
    n, c_in, c_out = x.shape[0], x.shape[1], w.shape[0]
    if c_in % groups or c_out % groups:
        raise ValueError(f"conv{nd}d: groups {groups} must divide in_channels {c_in} and out_channels {c_out}")
    cg, og, kvol = c_in // groups, c_out // groups, math.prod(kernel)
    rows = n * math.prod(out_size)
    cols = cols.reshape(rows, groups, cg * kvol)
    w2 = w.reshape(groups, og, cg * kvol)
    b2 = b.reshape(groups, og) if b is not None else None
    ys = [linear(cols[:, g], w2[g], b2[g] if b2 is not None else None, g) for g in range(groups)]
    y = ys[0] if groups == 1 else torch.cat(ys, dim=-1)
    y = y.reshape(n, *out_size, c_out).permute(0, nd + 1, *range(1, nd + 1)).contiguous()
    return (y.squeeze(0) if unbatched else y), 2 * rows * c_out * cg * kvol


def conv_transpose(x: torch.Tensor, w: torch.Tensor, b: Any, stride: Any, padding: Any, output_padding: Any,
                   groups: int, dilation: Any, nd: int, linear: Callable[..., torch.Tensor]) -> Tuple[torch.Tensor, int]:
    """F.conv_transpose{nd}d as the direct convolution it equals: the input spread out by the stride
    (zeros between), padded by dilation (k - 1) - padding (cropped where negative), the kernel
    flipped with in and out channels swapped per group. The zeros enter the emulated GEMM's K as
    exact zero products. Returns (y, forward FLOPs as torch counts them: per input position)."""
    unbatched = x.dim() == nd + 1
    if unbatched:
        x = x.unsqueeze(0)
    kernel = tuple(w.shape[2:])
    stride, dilation = _tuple(stride, nd, "stride"), _tuple(dilation, nd, "dilation")
    pad, out_pad = _tuple(padding, nd, "padding"), _tuple(output_padding, nd, "output_padding")
    n, c_in, positions = x.shape[0], x.shape[1], math.prod(x.shape[2:])
    if any(s > 1 for s in stride):
        spread = x.new_zeros(n, c_in, *[(s - 1) * st + 1 for s, st in zip(x.shape[2:], stride)])
        spread[(slice(None), slice(None)) + tuple(slice(None, None, st) for st in stride)] = x
        x = spread
    pads = [(d * (k - 1) - p, d * (k - 1) - p + op) for k, d, p, op in zip(kernel, dilation, pad, out_pad)]
    flat = [q for pair in reversed(pads) for q in pair]
    if any(flat):
        x = F.pad(x, flat)
    og = w.shape[1]
    wd = w.reshape(groups, c_in // groups, og, *kernel).transpose(1, 2).reshape(groups * og, c_in // groups, *kernel)
    y, _ = conv(x, wd.flip(list(range(2, 2 + nd))), b, 1, 0, dilation, groups, nd, linear)
    flops = 2 * n * positions * c_in * og * math.prod(kernel)
    return (y.squeeze(0) if unbatched else y), flops
