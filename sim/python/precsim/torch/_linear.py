"""Linear layers and matrix products computed as a precsim recipe says (the recipe names and keys
of `precsim train`), as modules and functions of their own; emulate() (_emulate.py) intercepts a
whole model's products instead."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch
from torch import nn

import precsim
from precsim._recipe import Recipe, RecipeLike, as_recipe

from ._tensors import as_numpy, from_numpy

_EMPTY = np.empty(0, np.float32)


def _engine(recipe: Recipe, seed: int, layer: int) -> Any:
    return precsim._precsim.RecipeLinear(recipe._typed, int(seed), int(layer))


class _LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, engine, step):
        out_f, in_f = weight.shape
        xa = as_numpy(x, "input").reshape(-1, in_f)
        if xa.shape[1] != in_f:
            raise ValueError(f"input has {x.shape[-1]} features; the layer takes {in_f}")
        wc = as_numpy(weight, "weight").copy()
        engine.cast_weights(wc, 0, step)
        bc = _EMPTY
        if bias is not None:
            bc = as_numpy(bias, "bias").copy()
            engine.cast_weights(bc, 1, step)
        y = np.empty((xa.shape[0], out_f), np.float32)
        engine.forward(xa, wc, bc, y, xa.shape[0], in_f, out_f, step)
        ctx.saved = (xa, wc, engine, step, bias is not None, x.shape)
        return from_numpy(y).reshape(*x.shape[:-1], out_f)

    @staticmethod
    def backward(ctx, gy):
        xa, wc, engine, step, has_bias, x_shape = ctx.saved
        rows, in_f = xa.shape
        out_f = wc.shape[0]
        dy = as_numpy(gy, "grad").reshape(rows, out_f)
        dx = np.empty((rows, in_f), np.float32) if ctx.needs_input_grad[0] else _EMPTY
        dw = np.empty((out_f, in_f), np.float32)
        db = np.empty(out_f, np.float32) if has_bias else _EMPTY
        engine.backward(dy, xa, wc, dx, dw, db, rows, in_f, out_f, step)
        gx = from_numpy(dx).reshape(x_shape) if ctx.needs_input_grad[0] else None
        return gx, from_numpy(dw), from_numpy(db) if has_bias else None, None, None


class Linear(nn.Linear):
    """nn.Linear whose forward, dgrad and wgrad are computed as `recipe` says: a precsim.Recipe, a
    preset name ("bf16-amp", "mxfp8", "nvfp4", ...) or a dict {"preset": ..., overrides} as in a
    train config (held as a Recipe in .recipe).
    Weights and bias are cast into the recipe's weights format, the output rounded into its
    activations format; the gradients into its activation- and weight-gradient formats. `seed` and
    `layer` key stochastic rounding as `precsim train` keys layer `layer` of an MLP; `step` counts
    training forwards (set it to align with an external step counter)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, recipe: RecipeLike = "fp32",
                 seed: int = 0, layer: int = 0, device: Any = None, dtype: Optional[torch.dtype] = None) -> None:
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self._set_recipe(recipe, seed, layer)

    def _set_recipe(self, recipe: RecipeLike, seed: int, layer: int) -> None:
        self.recipe, self.seed, self.layer, self.step = as_recipe(recipe), seed, layer, 0
        self._engine = _engine(self.recipe, seed, layer)

    @classmethod
    def from_linear(cls, linear: nn.Linear, recipe: RecipeLike, seed: int = 0, layer: int = 0) -> Linear:
        """An emulated layer sharing linear's parameters (no copy)."""
        m = cls.__new__(cls)
        nn.Module.__init__(m)
        m.in_features, m.out_features = linear.in_features, linear.out_features
        m.weight = linear.weight
        m.bias = linear.bias
        m._set_recipe(recipe, seed, layer)
        return m

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = _LinearFn.apply(x, self.weight, self.bias, self._engine, self.step)
        if self.training:
            self.step += 1
        return y

    def extra_repr(self) -> str:
        return super().extra_repr() + f", recipe={self.recipe!r}"


class _MatmulFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, engine, step):
        A, B = as_numpy(a, "a"), as_numpy(b, "b")
        if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
            raise ValueError(f"matmul takes (m, k) and (k, n) matrices; got {tuple(A.shape)} and {tuple(B.shape)}")
        (m, k), n = A.shape, B.shape[1]
        c = np.empty((m, n), np.float32)
        engine.product(0, A, False, B, False, c, m, n, k, step)
        ctx.saved = (A, B, engine, step)
        return from_numpy(c)

    @staticmethod
    def backward(ctx, g):
        A, B, engine, step = ctx.saved
        (m, k), n = A.shape, B.shape[1]
        G = as_numpy(g, "grad")
        da = db = None
        if ctx.needs_input_grad[0]:  # dA = dC B^T: the dgrad product, B stored (k, n) = op(B)^T
            da = np.empty((m, k), np.float32)
            engine.product(1, G, False, B, True, da, m, k, n, step)
            da = from_numpy(da)
        if ctx.needs_input_grad[1]:  # dB = A^T dC: the wgrad product, A stored (m, k)
            db = np.empty((k, n), np.float32)
            engine.product(2, A, True, G, False, db, k, n, m, step)
            db = from_numpy(db)
        return da, db, None, None


def matmul(a: torch.Tensor, b: torch.Tensor, recipe: RecipeLike = "fp32", *, seed: int = 0, layer: int = 0,
           step: int = 0) -> torch.Tensor:
    """a @ b (2-D) with forward, dgrad and wgrad products as the recipe's gemm specs say (operand
    formats and scaling along K, accumulation model); the products are not rounded further.
    recipe: a precsim.Recipe, a preset name or a recipe dict."""
    return _MatmulFn.apply(a, b, _engine(as_recipe(recipe), seed, layer), step)
