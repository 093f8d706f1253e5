"""The recipe's training semantics around a user's torch optimizer (Run): loss scaling with
GradScaler's rules, the master copy and the stored weights' format, optimizer-state formats,
stochastic or Kahan-compensated updates without a master copy, and the accumulation buffer's
format, as precsim's trainers apply them (train/weight_update.cpp, train/loss_scaler.cpp,
train/split_step.cpp). Every rounding is precsim.quantize's."""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
import torch
from torch import nn

import precsim
from precsim._recipe import RecipeLike, as_recipe

# Stochastic-rounding roles (train/recipe.h Role) of the roundings a Run makes.
_ROLE_IDS = {"weights": 0, "master_weights": 1, "weight_grads": 7, "optimizer_state": 8, "grad_accumulation": 9}
# Tensor ids of a Run's roundings: 2^26 + 16 * parameter index + slot, one range above those of
# precsim's trainers (sr_keys.h), so that no two roundings of one step share their bits; the
# optimizer's state tensors of a parameter take slots 8, 9, ... in the order of their names.
_TENSOR_BASE = 1 << 26
_SLOTS = {"cast": 0, "update": 1, "kahan": 2, "grad": 3, "accum": 4, "state": 8}
# Parameters that PyTorch autocast keeps in FP32 (the normalisations'), as the trainers do.
_NORMS = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._NormBase, getattr(nn, "RMSNorm", nn.LayerNorm))
_STAT_FIELDS = ("count", "underflow_to_zero", "subnormal", "inexact", "overflow", "saturated", "nan")


class RoleStats:
    """Rounding counts of one role, summed over the roundings of a run (the fields of a train
    report's `roles` entries)."""

    def __init__(self) -> None:
        self.nonzero = 0
        self.counts = dict.fromkeys(_STAT_FIELDS, 0)

    def add(self, stats: Any, nonzero: int) -> None:
        self.nonzero += nonzero
        for f in _STAT_FIELDS:
            self.counts[f] += getattr(stats, f)

    def to_dict(self) -> Dict[str, Any]:
        c = self.counts
        return {"count": c["count"], "nonzero_inputs": self.nonzero, "flushed_to_zero": c["underflow_to_zero"],
                "flush_fraction": c["underflow_to_zero"] / self.nonzero if self.nonzero else 0.0,
                "subnormal": c["subnormal"], "subnormal_fraction": c["subnormal"] / c["count"] if c["count"] else 0.0,
                "inexact": c["inexact"], "overflow": c["overflow"], "saturated": c["saturated"], "nan": c["nan"]}


class _Scaler:
    """GradScaler's loss scale in FP32 (train/loss_scaler.cpp): backoff on inf/NaN, growth after
    growth_interval clean steps, accepted only when finite."""

    def __init__(self, keys: Dict[str, Any], init_scale: Optional[float]) -> None:
        self.mode = keys["mode"]
        self.growth, self.backoff = np.float32(keys["growth_factor"]), np.float32(keys["backoff_factor"])
        self.interval = int(keys["growth_interval"])
        start = keys["init_scale"] if init_scale is None else init_scale
        self.scale = np.float32(1.0 if self.mode == "none" else start)
        self.tracker = 0

    def inv_scale(self) -> np.float32:
        return np.float32(1.0 / float(self.scale))

    def update(self, found_inf: bool) -> None:
        if self.mode != "dynamic":
            return
        if found_inf:
            self.scale, self.tracker = np.float32(self.scale * self.backoff), 0
            return
        self.tracker += 1
        if self.tracker == self.interval:
            with np.errstate(over="ignore"):
                grown = np.float32(self.scale * self.growth)
            if np.isfinite(grown):
                self.scale = grown
            self.tracker = 0


def _param_list(model: nn.Module, optimizer: torch.optim.Optimizer) -> List[nn.Parameter]:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, not {type(optimizer).__name__}")
    in_opt = {id(p) for g in optimizer.param_groups for p in g["params"]}
    params = [p for p in model.parameters() if p.requires_grad]
    missing = [n for n, p in model.named_parameters() if p.requires_grad and id(p) not in in_opt]
    if missing:
        raise ValueError(f"parameters {missing} of the model are not in the optimizer's param_groups; a Run steps "
                         f"the optimizer over the model's trainable parameters")
    for n, p in model.named_parameters():
        if p.dtype != torch.float32 or p.device.type != "cpu":
            raise TypeError(f"parameter {n} is {p.dtype} on {p.device}; a Run takes float32 CPU parameters")
    return params


def _autocast_fp32(model: nn.Module) -> set:
    return {id(p) for m in model.modules() if isinstance(m, _NORMS) for p in m.parameters(recurse=False)}


class Run:
    """The recipe's training semantics for a plain PyTorch loop around the user's optimizer.

        run = precsim.torch.Run(model, recipe, optimizer, seed=0)
        for x, y in batches:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            with run.step():        # in place of loss.backward(); optimizer.step()
                loss.backward()

    Inside `run.step()`, loss.backward() of a one-element loss seeds the backward with the loss
    scale (GradScaler's scale(loss)); each further backward in the block is one micro-batch, added
    into the gradient accumulation buffer in the recipe's `accumulation.buffer_format`. On leaving
    the block the gradients are rounded into `weight_grads`, unscaled by the FP32 reciprocal of the
    scale (left unscaled in .grad, as GradScaler.unscale_ leaves them); an inf/NaN gradient skips
    the step when the recipe scales the loss (weights and optimizer state unchanged) and backs
    the scale off; otherwise the torch optimizer steps the master copy (or, with
    `master_weights: none`, the stored weights, the new ones rounded nearest, stochastically or
    Kahan-compensated as `update_rounding` says), its floating-point state tensors are rounded
    into `optimizer_state` (amax-scaled when `scaled`), the master copy into its format, and the
    model's parameters become the master copy rounded into `weights` (normalisation parameters stay
    FP32 under `autocast`). The model should run its products under precsim.torch.emulate.

    recipe: a precsim.Recipe, preset name or dict. seed keys stochastic rounding; step is the first
    step's number (keys and counts); loss_scale overrides the recipe's initial scale."""

    def __init__(self, model: nn.Module, recipe: RecipeLike, optimizer: torch.optim.Optimizer, *, seed: int = 0,
                 step: int = 0, loss_scale: Optional[float] = None) -> None:
        self.recipe = as_recipe(recipe)
        self.model, self.optimizer, self.seed, self.steps = model, optimizer, int(seed), int(step)
        self._params = _param_list(model, optimizer)
        keys = self.recipe.to_dict()
        self._keys = keys
        self._scaler = _Scaler(keys["loss_scaling"], loss_scale)
        self._fp32 = _autocast_fp32(model) if keys["autocast"] else set()
        self.roles: Dict[str, RoleStats] = {}
        self.skipped_steps = 0
        self.last: Dict[str, Any] = {}
        self._has_master = keys["master_weights"] != "none"
        self._master = [p.detach().clone() for p in self._params] if self._has_master else None
        self._kahan = [torch.zeros_like(p) for p in self._params] if keys["update_rounding"] == "kahan" else None
        self._parts = 0
        with torch.no_grad():
            if self._has_master:
                self._cast_weights()
            else:  # the stored weights start rounded to nearest into their format (initial_state)
                for i, p in enumerate(self._params):
                    self._round(p, keys["weights"]["format"], "nearest-even", None, i, "cast")

    # ---- what a loop reads ----
    @property
    def loss_scale(self) -> float:
        """The scale the next step's loss gradient is multiplied by (1 without loss scaling)."""
        return float(self._scaler.scale)

    @property
    def growth_tracker(self) -> int:
        return self._scaler.tracker

    def master_weights(self) -> List[torch.Tensor]:
        """The copy the optimizer updates: the master copy, or the stored weights without one."""
        return list(self._master) if self._has_master else [p.detach() for p in self._params]

    # ---- rounding ----
    def _round(self, t: torch.Tensor, fmt: str, rounding: str, role: Optional[str], index: int, slot: str,
               extra: int = 0) -> None:
        """t rounded in place into fmt; counted under `role` (None: not counted)."""
        if fmt in ("fp32", "fp64"):
            return
        if not t.is_contiguous():  # rounded in a contiguous copy, then written back
            c = t.detach().contiguous()
            self._round(c, fmt, rounding, role, index, slot, extra)
            t.copy_(c)
            return
        a = t.detach().numpy()
        nonzero = int(np.count_nonzero(a)) if role else 0
        _, st = precsim.quantize(a, fmt, rounding=rounding, seed=self.seed, out=a, stats=True,
                                 key=(self.steps, _TENSOR_BASE + 16 * index + _SLOTS[slot] + extra,
                                      _ROLE_IDS.get(role, 0)))
        if role:
            self.roles.setdefault(role, RoleStats()).add(st, nonzero)

    def _round_role(self, t: torch.Tensor, role: str, index: int, slot: str) -> None:
        spec = self._keys[role]
        self._round(t, spec["format"], spec["rounding"], role, index, slot)

    def _cast_weights(self) -> None:
        for i, (p, m) in enumerate(zip(self._params, self._master)):
            p.copy_(m)
            if id(p) not in self._fp32:
                self._round_role(p, "weights", i, "cast")

    # ---- the step ----
    @contextlib.contextmanager
    def step(self) -> Iterator[Run]:
        """The backward passes of one optimizer step (see the class); the step runs on leaving."""
        original = torch.Tensor.backward
        run = self
        self._parts = 0
        self._buffers: List[Optional[torch.Tensor]] = [None] * len(self._params)

        def backward(tensor, gradient=None, *args, **kwargs):
            return run._backward(original, tensor, gradient, *args, **kwargs)

        torch.Tensor.backward = backward
        try:
            yield self
        finally:
            torch.Tensor.backward = original
        self._finish()

    def backward(self, loss: torch.Tensor) -> None:
        """loss.backward() as inside run.step() (for loops that call it elsewhere in the block)."""
        loss.backward()

    def _backward(self, original: Any, tensor: torch.Tensor, gradient: Any, *args: Any, **kwargs: Any) -> None:
        if gradient is None and tensor.numel() == 1:
            gradient = torch.full_like(tensor, float(self._scaler.scale))
        acc = self._keys["accumulation"]
        buffered = acc["buffer_format"] not in ("fp32", "fp64")
        if buffered:  # this micro-batch's gradient alone, then added into the buffer in its format
            held = [p.grad for p in self._params]
            for p in self._params:
                p.grad = None
        original(tensor, gradient, *args, **kwargs)
        if buffered:
            self._accumulate(held, acc)
        self._parts += 1

    def _accumulate(self, held: List[Optional[torch.Tensor]], acc: Dict[str, Any]) -> None:
        """buf = round(buf + g) (Kahan: compensated), train/split_step.cpp accumulate_gradient."""
        rounding = "stochastic" if acc["rounding"] == "stochastic" else "nearest-even"
        key_step = self.steps + (self._parts << 44)  # sr_keys::part_step
        saved, self.steps = self.steps, key_step
        try:
            for i, p in enumerate(self._params):
                g = p.grad if p.grad is not None else torch.zeros_like(p)
                buf = held[i] if held[i] is not None else torch.zeros_like(p)
                if acc["rounding"] != "kahan":
                    buf = buf + g
                    self._round(buf, acc["buffer_format"], rounding, "grad_accumulation", i, "accum")
                else:
                    comp = self._buffers[i] if self._buffers[i] is not None else torch.zeros_like(p)
                    y = g - comp
                    t = buf + y
                    self._round(t, acc["buffer_format"], rounding, "grad_accumulation", i, "accum")
                    comp = (t - buf) - y
                    self._round(comp, acc["buffer_format"], rounding, "grad_accumulation", i, "accum")
                    self._buffers[i], buf = comp, t
                p.grad = buf
        finally:
            self.steps = saved

    def _finish(self) -> None:
        with torch.no_grad():
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self._params]
            for i, g in enumerate(grads):
                self._round_role(g, "weight_grads", i, "grad")
            found_inf = not all(bool(torch.isfinite(g).all()) for g in grads)
            inv = self._scaler.inv_scale()
            if inv != 1:
                for g in grads:
                    g.mul_(float(inv))
            norm = float(torch.sqrt(sum((g.double() ** 2).sum() for g in grads))) if grads else 0.0
            for p, g in zip(self._params, grads):
                p.grad = g
            self.last = {"found_inf": found_inf, "skipped": False, "loss_scale": float(self._scaler.scale),
                         "grad_norm": norm, "updates_intended": 0, "updates_lost": 0, "micro_batches": self._parts}
            if found_inf and self._scaler.mode != "none":
                self.last["skipped"] = True
                self.skipped_steps += 1
                self._scaler.update(True)
            else:
                self._update()
                self._scaler.update(False)
        self.steps += 1

    def _update(self) -> None:
        """The optimizer's step on the master copy (or the stored weights) and the recipe's roundings
        of its state, the master copy and the stored weights (train/weight_update.cpp apply_update)."""
        old = [p.detach().clone() for p in self._params] if not self._has_master else [m.clone() for m in self._master]
        if self._has_master:  # the optimizer steps the master copy in the parameters' place
            for p, m in zip(self._params, self._master):
                p.copy_(m)
        self.optimizer.step()
        self._round_states()
        targets = [p.detach().clone() for p in self._params]
        if self._has_master:
            for i, (p, m) in enumerate(zip(self._params, self._master)):
                m.copy_(p)
                self._round(m, self._keys["master_weights"], "nearest-even", "master_weights", i, "update")
            new = self._master
            self._cast_weights()
        else:
            self._store(old, targets)
            new = [p.detach() for p in self._params]
        for t, o, n in zip(targets, old, new):
            changed = t != o
            self.last["updates_intended"] += int(changed.sum())
            self.last["updates_lost"] += int((changed & (n == o)).sum())

    def _store(self, old: List[torch.Tensor], targets: List[torch.Tensor]) -> None:
        """The new stored weights without a master copy: nearest, stochastic or Kahan-compensated."""
        fmt, rule = self._keys["weights"]["format"], self._keys["update_rounding"]
        for i, (p, o, t) in enumerate(zip(self._params, old, targets)):
            if rule != "kahan":
                self._round(p, fmt, "stochastic" if rule == "stochastic" else "nearest-even", "master_weights", i,
                            "update")
                continue
            c = self._kahan[i]
            y = (t - o) - c
            p.copy_(o + y)
            self._round(p, fmt, "nearest-even", "master_weights", i, "update")
            c.copy_((p - o) - y)
            self._round(c, fmt, "nearest-even", "optimizer_state", i, "kahan")

    def _round_states(self) -> None:
        """Every floating-point state tensor of the parameters' shape (exp_avg, exp_avg_sq,
        momentum_buffer, ...) rounded into optimizer_state, amax-scaled when the recipe says so."""
        spec = self._keys["optimizer_state"]
        if spec["format"] in ("fp32", "fp64"):
            return
        for i, p in enumerate(self._params):
            state = self.optimizer.state.get(p, {})
            for k, (name, v) in enumerate(sorted(state.items())):
                tensor_like_p = isinstance(v, torch.Tensor) and v.is_floating_point() and v.shape == p.shape
                if name == "step" or not tensor_like_p:
                    continue
                scale = 1.0
                if spec["scaled"]:
                    amax = float(v.abs().max()) if v.numel() else 0.0
                    if amax > 0 and np.isfinite(amax):
                        scale = float(np.float32(precsim.Format(spec["format"]).max / amax))
                    v.mul_(scale)
                self._round(v, spec["format"], spec["rounding"], "optimizer_state", i, "state", min(k, 7))
                if scale != 1.0:
                    v.div_(scale)
