"""The two autograd functions every intercepted product becomes: a weight-bearing product (linear,
addmm/mm on a parameter, convolution's im2col product), which runs as a recipe's linear layer
(weights cast, output and gradients rounded), and a product of two activations (bmm, matmul,
attention's QK^T and PV), whose operands are quantized along K with no rounding after. Both take a
Site: the engine of one product of one module, its step key and the names errors quote."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ._tensors import as_numpy, from_numpy

_EMPTY = np.empty(0, np.float32)
# Sub-products of one call (batch items of bmm, groups of a convolution) take step keys with this
# part index above the training steps (sr_keys.h: micro-batch parts), so their SR bits differ.
_PART_SHIFT = 44


@dataclass
class Site:
    """One product of one module call: engine (precsim._precsim.RecipeLinear), step key, and what
    errors name (the module's qualified name and the op)."""

    engine: Any
    step: int
    module: str
    op: str

    def part_step(self, part: int) -> int:
        return self.step + (part << _PART_SHIFT)

    def run(self, what: str, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except ValueError as e:
            raise ValueError(f"module {self.module!r}, product {self.op} ({what}): {e}") from None


def _no_double_backward(site: Site) -> None:
    # Function.backward runs with grad mode on only under create_graph=True: the engine's
    # gradients are NumPy results with no graph of their own, so a second derivative would be zero.
    if torch.is_grad_enabled():
        raise RuntimeError(f"double backward (create_graph=True) through the emulated product {site.op} of module "
                           f"{site.module!r} is not supported: precsim's gradients have no graph of their own")


class LinearProduct(torch.autograd.Function):
    """y = x w^T + b as the recipe's linear layer (RecipeLinear.forward/backward); w (out, in) may
    be a view of the parameter (Conv1D's transpose), autograd maps its gradient back."""

    @staticmethod
    def forward(ctx, x, w, b, site):
        out_f, in_f = w.shape
        xa = as_numpy(x, "input").reshape(-1, in_f)
        rows = xa.shape[0]
        wc = as_numpy(w, "weight").copy()
        site.engine.cast_weights(wc, 0, site.step)
        bc = _EMPTY
        if b is not None:
            bc = as_numpy(b, "bias").copy()
            site.engine.cast_weights(bc, 1, site.step)
        y = np.zeros((rows, out_f), np.float32)
        if rows and out_f and in_f:
            site.run(f"m {rows}, n {out_f}, k {in_f}", site.engine.forward, xa, wc, bc, y, rows, in_f, out_f, site.step)
        elif rows and out_f and b is not None:
            y += bc  # K = 0: the bias alone
        dtype = torch.promote_types(x.dtype, w.dtype)
        ctx.save_for_backward(x, from_numpy(wc))
        ctx.meta = (site, b.dtype if b is not None else None, w.dtype)
        return from_numpy(y).reshape(*x.shape[:-1], out_f).to(dtype)

    @staticmethod
    def backward(ctx, gy):
        site, b_dtype, w_dtype = ctx.meta
        _no_double_backward(site)
        x, wc_t = ctx.saved_tensors
        wc = wc_t.numpy()
        out_f, in_f = wc.shape
        xa = as_numpy(x, "input").reshape(-1, in_f)
        rows = xa.shape[0]
        dy = as_numpy(gy, "grad").reshape(rows, out_f)
        dx = np.zeros((rows, in_f), np.float32)
        dw = np.zeros((out_f, in_f), np.float32)
        db = np.zeros(out_f, np.float32) if b_dtype is not None else _EMPTY
        if rows and out_f and in_f:
            site.run(f"m {rows}, n {out_f}, k {in_f}, backward", site.engine.backward, dy, xa, wc,
                     dx if ctx.needs_input_grad[0] else _EMPTY, dw, db, rows, in_f, out_f, site.step)
        elif b_dtype is not None and rows:
            db[:] = dy.sum(axis=0)
        gx = from_numpy(dx).reshape(x.shape).to(x.dtype) if ctx.needs_input_grad[0] else None
        gb = from_numpy(db).to(b_dtype) if b_dtype is not None else None
        return gx, from_numpy(dw).to(w_dtype), gb, None


class GemmProduct(torch.autograd.Function):
    """c[i] = a[i] b[i] for stacks a (B, m, k), b (B, k, n): forward, dgrad and wgrad products as
    the recipe's gemm specs say (RecipeLinear.product), not rounded after; item i > 0 takes step
    part i."""

    @staticmethod
    def forward(ctx, a, b, site):
        A, B = as_numpy(a, "a"), as_numpy(b, "b")
        batch, m, k = A.shape
        n = B.shape[2]
        C = np.zeros((batch, m, n), np.float32)
        if m and n and k:
            for i in range(batch):
                site.run(f"m {m}, n {n}, k {k}", site.engine.product, 0, A[i], False, B[i], False, C[i], m, n, k,
                         site.part_step(i))
        ctx.save_for_backward(a, b)
        ctx.site = site
        return from_numpy(C).to(torch.promote_types(a.dtype, b.dtype))

    @staticmethod
    def backward(ctx, g):
        site = ctx.site
        _no_double_backward(site)
        a, b = ctx.saved_tensors
        A, B, G = as_numpy(a, "a"), as_numpy(b, "b"), as_numpy(g, "grad")
        batch, m, k = A.shape
        n = B.shape[2]
        da = db = None
        if ctx.needs_input_grad[0]:  # dA = dC B^T: the dgrad product, B stored (k, n) = op(B)^T
            dA = np.zeros((batch, m, k), np.float32)
            for i in range(batch if m and n and k else 0):
                site.run(f"m {m}, n {k}, k {n}, dgrad", site.engine.product, 1, G[i], False, B[i], True, dA[i], m, k,
                         n, site.part_step(i))
            da = from_numpy(dA).to(a.dtype)
        if ctx.needs_input_grad[1]:  # dB = A^T dC: the wgrad product, A stored (m, k)
            dB = np.zeros((batch, k, n), np.float32)
            for i in range(batch if m and n and k else 0):
                site.run(f"m {k}, n {n}, k {m}, wgrad", site.engine.product, 2, A[i], True, G[i], False, dB[i], k, n,
                         m, site.part_step(i))
            db = from_numpy(dB).to(b.dtype)
        return da, db, None


class CastWeights(torch.autograd.Function):
    """A weight rounded into the recipe's weights format (an embedding table); its gradient passes
    straight through, rounded by grad_round (the weight-gradient format) when given."""

    @staticmethod
    def forward(ctx, w, site, grad_round=None):
        wc = as_numpy(w, "weight").copy()
        site.engine.cast_weights(wc, 0, site.step)
        ctx.grad_round = grad_round
        return from_numpy(wc).reshape(w.shape).to(w.dtype)

    @staticmethod
    def backward(ctx, g):
        return (g if ctx.grad_round is None else ctx.grad_round(g).to(g.dtype)), None, None
