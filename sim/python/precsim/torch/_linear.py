"""Linear layers and matrix products computed as a precsim recipe says (the recipe names and keys
of `precsim train`), and emulate(), which puts them in place of a model's nn.Linear modules."""
from __future__ import annotations

from typing import Any, Callable, Iterable, List, Optional, Union

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


class Emulation:
    """What emulate() replaced; undo() puts the original modules back (also on leaving a with-block)."""

    def __init__(self, model: nn.Module, swaps: list) -> None:
        self.model, self.swaps = model, swaps

    @property
    def layers(self) -> List[str]:
        return [name for name, _, _, _ in self.swaps]

    def undo(self) -> None:
        for _, parent, attr, original in reversed(self.swaps):
            setattr(parent, attr, original)
        self.swaps = []

    def __enter__(self) -> Emulation:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.undo()


def emulate(model: nn.Module, recipe: RecipeLike, *,
            layers: Union[None, Iterable[str], Callable[[str, nn.Module], bool]] = None, seed: int = 0) -> Emulation:
    """Replaces every nn.Linear of model (or those whose qualified names are in `layers`, or for
    which `layers(name, module)` is true) by a precsim.torch.Linear under `recipe` (a
    precsim.Recipe, a preset name or a recipe dict) sharing its parameters; layer i in module order
    keys stochastic rounding as layer i of `precsim train`'s MLP and takes layer i's recipe (keep_bf16_layers and per-layer `layers` keys count the model's
    nn.Linear modules in module order). Returns an Emulation whose undo() restores the model."""
    recipe = as_recipe(recipe)  # fails before the model is touched
    wanted = layers if callable(layers) else (None if layers is None else set(layers))
    if type(model) is nn.Linear:
        raise ValueError("model is itself an nn.Linear: use precsim.torch.Linear.from_linear(model, recipe)")
    found = [(name, mod) for name, mod in model.named_modules() if type(mod) is nn.Linear]
    if isinstance(wanted, set):
        missing = wanted - {name for name, _ in found}
        if missing:
            raise ValueError(f"layers {sorted(missing)} are not nn.Linear modules of the model; "
                             f"those are: {[name for name, _ in found]}")
    # Per-part keys (keep_bf16_layers, layers) count the model's nn.Linear modules in module order,
    # as precsim train counts its MLP's layers: the published nvfp4 keeps the last ones in BF16.
    per_layer = recipe.layer_recipes(len(found)) if found else []
    swaps = []
    for index, (name, mod) in enumerate(found):
        if wanted is not None and not (wanted(name, mod) if callable(wanted) else name in wanted):
            continue
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        layer_recipe = per_layer[index] if per_layer else recipe
        setattr(parent, attr, Linear.from_linear(mod, layer_recipe, seed=seed, layer=index))
        swaps.append((name, parent, attr, mod))
    return Emulation(model, swaps)
