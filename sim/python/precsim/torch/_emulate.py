"""emulate(): every matrix product of a model through a precsim recipe, intercepted below the module
level. Global module hooks keep a stack of the model's modules as they run; while one runs, a
TorchFunctionMode routes linear, mm, addmm, bmm, baddbmm, matmul, conv1d-3d and their transposes,
scaled_dot_product_attention and embedding through the recipe engine (_handlers.py), and a
dispatch mode counts the matrix ops that still reach aten (_coverage.py). The model itself is not
changed: deepcopy, pickle and state_dict see a plain torch model, and undo() only forgets it.

Stochastic-rounding keys: product j of the c-th call of module i (a stable index, _select.py) in a step
is engine layer i + M p(j, c), M the model's module count and p Cantor's pairing ((j + c)(j + c + 1)/2
+ c, 0 for the first product of the first call), so that an MLP's Linear i keys as `precsim train`'s
layer i. Steps count the model's training forwards (or what the user sets in .step);
a recomputation inside backward (gradient checkpointing) reuses the step of the last forward."""
from __future__ import annotations

import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

import precsim
from precsim._recipe import Recipe

from ._coverage import Coverage, DispatchCounter
from ._fallback import Fallback
from ._handlers import HANDLERS
from ._opmath import count_left_in_fp32
from ._products import Site
from ._select import Layers, RecipeArg, make_plan

_OWNER: "weakref.WeakKeyDictionary[nn.Module, Tuple[Emulation, str]]" = weakref.WeakKeyDictionary()
_HOOKS: List[Any] = []
_LAYERS = 1 << 17    # engine layers with distinct SR tensor ids (sr_keys.h)


def _pre_hook(module: nn.Module, args: Any) -> None:
    entry = _OWNER.get(module)
    if entry is not None:
        entry[0]._enter(module, entry[1])


def _post_hook(module: nn.Module, args: Any, output: Any) -> None:
    entry = _OWNER.get(module)
    if entry is not None:
        entry[0]._exit(module)


def _install_hooks() -> None:
    if not _HOOKS:
        _HOOKS.append(nn.modules.module.register_module_forward_pre_hook(_pre_hook))
        _HOOKS.append(nn.modules.module.register_module_forward_hook(_post_hook, always_call=True))


def _remove_hooks() -> None:
    if not _OWNER:
        while _HOOKS:
            _HOOKS.pop().remove()


# nn.LSTM, nn.GRU and nn.RNN: some of torch's CPU kernels (LSTM's) multiply without dispatching aten
# matrix ops, so the dispatch counter would not see them; those are counted by formula instead.
_RECURRENT = {torch._VF.lstm, torch._VF.gru, torch._VF.rnn_tanh, torch._VF.rnn_relu}


def _recurrent_flops(args: Any) -> int:
    """2 x rows x the weight matrices' sizes, for the (input, hx, weights, ...) form (rows: time steps
    x batch); 0 for packed sequences, whose rows precsim does not work out."""
    x, weights = args[0], args[2] if len(args) > 2 else None
    if not isinstance(x, torch.Tensor) or not isinstance(weights, (list, tuple)):
        return 0
    rows = x.numel() // max(x.shape[-1], 1)
    return 2 * rows * sum(w.numel() for w in weights if isinstance(w, torch.Tensor) and w.dim() == 2)


class _ProductMode(TorchFunctionMode):
    def __init__(self, emu: Emulation) -> None:
        super().__init__()
        self.emu = emu

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        entry = HANDLERS.get(func)
        if entry is None:
            if func in _RECURRENT:
                return self.emu._recurrent(func, args, kwargs)
            count_left_in_fp32(self.emu, func)
            return self.emu._fallback(func, args, kwargs, None)
        name, handler = entry
        try:
            return handler(self.emu, *args, **kwargs)
        except Fallback as f:
            return self.emu._fallback(func, args, kwargs, f"{name}: {f}")


def _attention_recipe(r: Recipe) -> Recipe:
    """attention.products "high": Q K^T and P V with both operands in the activations' format, no
    scaling (Transformer Engine's default); "recipe": the gemm specs as they are."""
    d = r.to_dict()
    if d["attention"]["products"] != "high":
        return r
    spec = {"format": d["activations"]["format"], "rounding": "nearest-even", "scaling": "none", "block": 0}
    gemm = {p: {"a": spec, "b": spec, "accum": d["gemm"][p]["accum"]} for p in ("forward", "dgrad", "wgrad")}
    return r.replace(gemm=gemm, rht=False, sr_gradients=False, weights_2d=False, four_over_six=False,
                     mx_scale_rule="floor")


class Emulation:
    """What emulate() returns: .step (the training step that keys stochastic rounding; it counts the
    model's training forwards, set it to follow your own counter), .layers, .recipe_of(name),
    .coverage(), .undo() (also on leaving a with-block)."""

    def __init__(self, model: nn.Module, recipe: RecipeArg, layers: Layers, filter_fn: Any, seed: int) -> None:
        plan = make_plan(model, recipe, layers, filter_fn)
        # A weak reference: the registry's values hold this object, and a strong one would keep
        # every model ever emulated (and never undone) alive through its own weak keys.
        self._model, self.seed, self.step = weakref.ref(model), int(seed), 0
        self._recipes, self._index, self.layers = plan.recipes, plan.index, plan.weight_modules
        self._modules = len(plan.index)
        self._engines: Dict[Tuple[int, bool], Any] = {}
        self._derived: Dict[Tuple[int, str], Any] = {}
        self._coverage = Coverage()
        self._stack: List[List[Any]] = []
        self._calls: Dict[str, int] = {}
        self._calls_key: Any = None
        self._last_step, self._cur_step, self._backward = 0, 0, False
        self._modes: Optional[Tuple[Any, Any]] = None
        self._reason: Tuple[Any, Optional[str]] = (None, None)
        self._register()

    @property
    def model(self) -> nn.Module:
        return self._model()

    def _register(self) -> None:
        mods = list(self.model.named_modules())
        for name, m in mods:
            if m in _OWNER:
                raise ValueError(f"module {name or '<root>'!r} of this model is already emulated: call .undo() on "
                                 f"the Emulation that emulate() returned first")
        for name, m in mods:
            _OWNER[m] = (self, name)
        _install_hooks()

    # ---- the module stack ----
    def _enter(self, module: nn.Module, fqn: str) -> None:
        if not self._stack:
            self._backward = torch._C._current_autograd_node() is not None
            self._cur_step = self._last_step if self._backward else self.step
            if module is self._model() and module.training and not self._backward:
                self._last_step = self.step
            self._modes = (_ProductMode(self), DispatchCounter(self))
            for mode in self._modes:
                mode.__enter__()
        key = (self._cur_step, self._backward)
        if key != self._calls_key:
            self._calls, self._calls_key = {}, key
        c = self._calls.get(fqn, 0)
        self._calls[fqn] = c + 1
        self._stack.append([fqn, c, 0])

    def _exit(self, module: nn.Module) -> None:
        if not self._stack:
            return
        self._stack.pop()
        if not self._stack:
            for mode in reversed(self._modes):
                mode.__exit__(None, None, None)
            self._modes = None
            if module is self._model() and module.training and not self._backward:
                self.step = self._last_step + 1

    # ---- what the handlers ask ----
    def _site(self, op: str, attention: bool = False) -> Site:
        frame = self._stack[-1]
        fqn, c, j = frame
        recipe = self._recipes.get(fqn)
        if recipe is None:
            raise Fallback(f"module {fqn or '<root>'!r} is left out by the selection")
        frame[2] += 1
        layer = self._index[fqn] + self._modules * ((j + c) * (j + c + 1) // 2 + c)
        if layer >= _LAYERS:
            raise ValueError(f"module {fqn or '<root>'!r}: product {op} is call {c}'s product {j}, engine layer "
                             f"{layer}; precsim keys at most {_LAYERS} per step")
        engine = self._engines.get((layer, attention))
        if engine is None:
            r = self._derive(recipe, "attention", _attention_recipe) if attention else recipe
            engine = precsim._precsim.RecipeLinear(r._typed, self.seed, layer)
            self._engines[(layer, attention)] = engine
        return Site(engine, self._cur_step, fqn or "<root>", op)

    def _recipe_here(self, op: str) -> Recipe:
        """The recipe of the running module, for an op that rounds without a product of its own."""
        fqn = self._stack[-1][0]
        recipe = self._recipes.get(fqn)
        if recipe is None:
            raise Fallback(f"module {fqn or '<root>'!r} is left out by the selection")
        return recipe

    def _derive(self, recipe: Recipe, what: str, fn: Callable[[Recipe], Any]) -> Any:
        key = (id(recipe), what)
        if key not in self._derived:
            self._derived[key] = fn(recipe)
        return self._derived[key]

    def _scores_format(self, site: Site) -> Tuple[str, str]:
        recipe = self._recipes[self._stack[-1][0]]
        s = self._derive(recipe, "scores", lambda r: r.to_dict()["attention"]["scores"])
        return s["format"], s["rounding"]

    def _count(self, op: str, flops: int) -> None:
        self._coverage.add(self._stack[-1][0], op, flops, True)

    def _count_unemulated(self, op: str, flops: int) -> None:
        fqn = self._stack[-1][0] if self._stack else ""
        func, reason = self._reason
        if reason is None:
            reason = f"{getattr(func, '__name__', func)} is not intercepted" if func is not None else "outside torch functions"
        self._coverage.add(fqn, op, flops, False, reason)

    def _recurrent(self, func: Any, args: Any, kwargs: Any) -> Any:
        """A recurrent layer in torch; counted by formula when its kernel dispatched no matrix op."""
        before = self._coverage.total_flops
        out = self._fallback(func, args, kwargs, None)
        if self._coverage.total_flops == before:
            self._coverage.add(self._stack[-1][0], func.__name__, _recurrent_flops(args), False,
                               "recurrent layers are not intercepted")
        return out

    def _fallback(self, func: Any, args: Any, kwargs: Any, reason: Optional[str]) -> Any:
        before, self._reason = self._reason, (func, reason)
        try:
            return func(*args, **kwargs)
        finally:
            self._reason = before

    # ---- the public side ----
    def recipe_of(self, name: str) -> Optional[Recipe]:
        """The recipe of the products module `name` issues itself (None: not emulated)."""
        if name not in self._recipes:
            raise ValueError(f"{name!r} is not a module of the model")
        return self._recipes[name]

    def coverage(self, reset: bool = False) -> Coverage:
        """The products seen since emulate() (or the last reset=True), emulated and not, by op and
        module, with their forward FLOPs."""
        cov = self._coverage
        if reset:
            self._coverage = Coverage()
        return cov

    def undo(self) -> None:
        """Forgets the model: its modules run as plain torch again (the model was never changed)."""
        for m in list(_OWNER.keys()):
            if _OWNER.get(m, (None,))[0] is self:
                del _OWNER[m]
        _remove_hooks()

    def __enter__(self) -> Emulation:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.undo()

    def __reduce__(self):
        raise TypeError("an Emulation is not picklable; pickle the model (a plain torch model) and emulate it again")

    def __repr__(self) -> str:
        names = sorted({r.name for r in self._recipes.values() if r is not None})
        return (f"<Emulation of {type(self.model).__name__}: {', '.join(names)} on {len(self.layers)} weight "
                f"modules, step {self.step}>")


def emulate(model: nn.Module, recipe: RecipeArg, *, layers: Layers = None,
            filter_fn: Optional[Callable[[nn.Module, str], bool]] = None, seed: int = 0) -> Emulation:
    """Runs every matrix product of `model` as `recipe` says (a precsim.Recipe, a preset name, a
    recipe dict, or {module pattern: recipe} matched against qualified names, nearest module first).
    layers (names or a predicate (name, module)) and filter_fn(module, name) select modules; a
    module's products follow it and its descendants' products. Returns an Emulation."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
    return Emulation(model, recipe, layers, filter_fn, seed)
