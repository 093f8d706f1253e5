"""side_by_side: a user's PyTorch model trained in lockstep as an FP64 reference, a perturbed FP32
chaos control and one emulated twin per recipe (emulate + Run), from the same weights on the same
batches, measured as precsim's trainers measure their variants, into a report of kind train."""
from __future__ import annotations

import copy
import math
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch
from torch import nn

from precsim._recipe import RecipeLike, as_recipe

from . import _twin_report as rep
from ._emulate import emulate
from ._run import RoleStats, Run


def _cast(obj: Any, dtype: torch.dtype) -> Any:
    """Floating-point tensors in obj (a tensor, or tuples, lists and dicts of them) cast to dtype."""
    if isinstance(obj, torch.Tensor):
        return obj.to(dtype) if obj.is_floating_point() else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cast(o, dtype) for o in obj)
    if isinstance(obj, dict):
        return {k: _cast(v, dtype) for k, v in obj.items()}
    return obj


def _params(model: nn.Module) -> List[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def _flat(tensors: Sequence[Optional[torch.Tensor]], like: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.cat([(t if t is not None else torch.zeros_like(p)).detach().reshape(-1).double()
                      for t, p in zip(tensors, like)])


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    nb = float(b.norm())
    return float((a - b).norm()) / nb if nb > 0 else (0.0 if float(a.norm()) == 0 else math.inf)


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    d = float(a.norm()) * float(b.norm())
    return float(a @ b) / d if d > 0 else math.nan


def _perturb(model: nn.Module, seed: int) -> None:
    """Every weight moved by one FP32 ulp in a direction drawn from seed (the chaos control)."""
    g = torch.Generator().manual_seed(int(seed) + 0x9E3779B9)
    with torch.no_grad():
        for p in _params(model):
            up = torch.randint(0, 2, p.shape, generator=g, dtype=torch.bool)
            inf = torch.full_like(p, math.inf)
            p.copy_(torch.nextafter(p, torch.where(up, inf, -inf)))


class _Twin:
    """One model of the lockstep: its optimizer, Run (recipe twins) and what it has measured."""

    def __init__(self, model: nn.Module, optimizer_fn: Callable, recipe: Any = None, seed: int = 0) -> None:
        self.model, self.recipe, self.run, self.emulation = model, recipe, None, None
        if recipe is not None:
            self.emulation = emulate(model, recipe, seed=seed)
        self.optimizer = optimizer_fn(model.parameters())
        if not isinstance(self.optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer_fn must return a torch.optim.Optimizer, not {type(self.optimizer).__name__}")
        if recipe is not None:
            self.run = Run(model, recipe, self.optimizer, seed=seed)
            self.act = RoleStats()
            self._hook_activation_grads(recipe.to_dict()["activation_grads"])
        self.losses: List[float] = []
        self.series: Dict[str, List[float]] = {}
        self.local: Dict[str, List[float]] = {k: [] for k in ("step", "grad_rel_err", "grad_cosine", "update_rel_err",
                                                               "weight_grad_underflow_vs_reference",
                                                               "split_grad_rel_err", "split_grad_cosine")}
        self.intended = self.lost = 0
        self.weight_distance = 0.0
        self.diverged_at: Optional[int] = None

    def _hook_activation_grads(self, spec: Dict[str, Any]) -> None:
        """Counts the rounding of the gradient arriving at every module with parameters into the
        recipe's activation-gradient format, as each product rounds its dY first (the loss gradient
        included), without changing it: the activation_grads role of the report."""
        if spec["format"] in ("fp32", "fp64"):
            return
        import precsim

        def hook(module, grad_output):
            for g in grad_output:
                if g is None or not g.is_floating_point():
                    continue
                a = g.detach().float().contiguous().numpy()
                _, st = precsim.quantize(a, spec["format"], stats=True)
                self.act.add(st, int(np.count_nonzero(a)))

        for m in self.model.modules():
            if any(True for _ in m.parameters(recurse=False)):
                m.register_full_backward_pre_hook(hook)

    def log(self, **values: float) -> None:
        for k, v in values.items():
            self.series.setdefault(k, []).append(v)


def _plain_step(t: _Twin, x: Any, y: Any, loss_fn: Callable) -> float:
    """Forward and backward of a twin without a recipe; the caller steps its optimizer."""
    t.optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(t.model(x), y)
    loss.backward()
    return float(loss.detach())


def _recipe_step(t: _Twin, x: Any, y: Any, loss_fn: Callable) -> float:
    t.optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(t.model(x), y)
    with t.run.step():
        loss.backward()
    t.intended += t.run.last["updates_intended"]
    t.lost += t.run.last["updates_lost"]
    return float(loss.detach())


class _Shadow:
    """A recipe's step taken from the reference's state (weights and optimizer state, before its
    step) on the same batch: the local error of one step, apart from the drift before it."""

    def __init__(self, model: nn.Module, recipe: Any, optimizer_fn: Callable, seed: int) -> None:
        self.model, self.recipe, self.optimizer_fn, self.seed = model, recipe, optimizer_fn, seed
        emulate(model, recipe, seed=seed)

    def step(self, twin: _Twin, ref_w: List[torch.Tensor], ref_opt: Dict[str, Any], step: int, x: Any, y: Any,
             loss_fn: Callable) -> tuple:
        with torch.no_grad():
            for p, w in zip(_params(self.model), ref_w):
                p.copy_(w.float())
        opt = self.optimizer_fn(self.model.parameters())
        opt.load_state_dict(copy.deepcopy(ref_opt))  # floating-point state cast to float32 by torch
        run = Run(self.model, self.recipe, opt, seed=self.seed, step=step, loss_scale=twin.run.loss_scale)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(self.model(x), y)
        with run.step():
            loss.backward()
        params = _params(self.model)
        return _flat([p.grad for p in params], params), _flat(run.master_weights(), params)


def _measure_shadow(t: _Twin, shadow: _Shadow, ref: _Twin, ref_w: List[torch.Tensor], ref_opt: Dict[str, Any],
                    g_ref: torch.Tensor, u_ref: torch.Tensor, step: int, x: Any, y: Any, loss_fn: Callable) -> None:
    g, w = shadow.step(t, ref_w, ref_opt, step, x, y, loss_fn)
    u = w - _flat(ref_w, ref_w)
    nz = g_ref != 0
    loc = t.local
    loc["step"].append(float(step))
    loc["grad_rel_err"].append(_rel(g, g_ref))
    loc["grad_cosine"].append(_cos(g, g_ref))
    loc["update_rel_err"].append(_rel(u, u_ref))
    loc["weight_grad_underflow_vs_reference"].append(float((nz & (g == 0)).sum()) / max(1, int(nz.sum())))
    loc["split_grad_rel_err"].append(0.0)
    loc["split_grad_cosine"].append(1.0)


def _evaluate(model: nn.Module, x: Any, y: Any, loss_fn: Callable) -> tuple:
    """(loss, accuracy) on the held-out batch in eval mode; accuracy is the argmax's over the last
    dimension for integer targets, NaN for others."""
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(x)
            loss = float(loss_fn(out, y))
    finally:
        model.train(was)
    acc = math.nan
    if isinstance(out, torch.Tensor) and isinstance(y, torch.Tensor) and not y.is_floating_point() \
            and out.dim() == y.dim() + 1 and y.numel() > 0:
        acc = float((out.argmax(dim=-1) == y).double().mean())
    return loss, acc


def _batch(batches: Any, step: int) -> tuple:
    b = batches(step) if callable(batches) else batches[step % len(batches)]
    if not (isinstance(b, (tuple, list)) and len(b) == 2):
        raise ValueError(f"batch {step} must be a pair (inputs, targets); got {type(b).__name__}")
    return b[0], b[1]


class _Lockstep:
    """One seed: the reference, the chaos control, the recipe twins and their shadows."""

    def __init__(self, base: nn.Module, recipes: List[Any], optimizer_fn: Callable, loss_fn: Callable, seed: int,
                 shadow_every: int, divergence_factor: float) -> None:
        self.loss_fn, self.seed, self.shadow_every = loss_fn, seed, shadow_every
        self.divergence_factor = divergence_factor
        self.ref = _Twin(copy.deepcopy(base).double(), optimizer_fn)
        chaos = copy.deepcopy(base)
        _perturb(chaos, seed)
        self.chaos = _Twin(chaos, optimizer_fn)
        self.twins = [_Twin(copy.deepcopy(base), optimizer_fn, r, seed) for r in recipes]
        self.shadows = [_Shadow(copy.deepcopy(base), r, optimizer_fn, seed) for r in recipes] if shadow_every else []
        self.chaos_wd = math.nan

    def step(self, step: int, x: Any, y: Any, log: bool) -> None:
        ref, rp = self.ref, _params(self.ref.model)
        ref_loss = _plain_step(ref, _cast(x, torch.float64), _cast(y, torch.float64), self.loss_fn)
        g_ref = _flat([p.grad for p in rp], rp)
        shadow = self.shadow_every > 0 and step % self.shadow_every == 0
        if shadow:
            ref_w = [p.detach().clone() for p in rp]
            ref_opt = copy.deepcopy(ref.optimizer.state_dict())
        ref.optimizer.step()
        chaos_loss = _plain_step(self.chaos, x, y, self.loss_fn)
        self.chaos.optimizer.step()
        w_ref = _flat(rp, rp)
        self.chaos_wd = _rel(_flat(_params(self.chaos.model), rp), w_ref)
        ref.losses.append(ref_loss)
        if log:
            ref.log(step=float(step), loss=ref_loss, chaos_loss=chaos_loss, chaos_weight_distance=self.chaos_wd,
                    grad_norm=float(g_ref.norm()))
        for i, t in enumerate(self.twins):
            scale = t.run.loss_scale
            loss = _recipe_step(t, x, y, self.loss_fn)
            t.losses.append(loss)
            if t.diverged_at is None and (not math.isfinite(loss) or (loss > self.divergence_factor * ref_loss
                                                                      and loss > ref.losses[0])):
                t.diverged_at = step
            tp = _params(t.model)
            t.weight_distance = _rel(_flat(t.run.master_weights(), tp), w_ref)
            if log:
                last = t.run.last
                t.log(step=float(step), loss=loss, loss_gap=loss - ref_loss, weight_distance=t.weight_distance,
                      drift_over_chaos_floor=t.weight_distance / self.chaos_wd if self.chaos_wd else math.inf,
                      grad_cosine_vs_reference=_cos(_flat([p.grad for p in tp], tp), g_ref), loss_scale=scale,
                      skipped_steps=float(t.run.skipped_steps),
                      stagnation=last["updates_lost"] / last["updates_intended"] if last["updates_intended"] else 0.0)
            if shadow:
                u_ref = w_ref - _flat(ref_w, rp)
                _measure_shadow(t, self.shadows[i], ref, ref_w, ref_opt, g_ref, u_ref, step, x, y, self.loss_fn)

    def results(self, steps: int, heldout: tuple) -> tuple:
        """The seed's runs entry and each variant's summary numbers."""
        hx, hy = heldout
        tail = max(1, steps // 10)
        rl, ra = _evaluate(self.ref.model, _cast(hx, torch.float64), _cast(hy, torch.float64), self.loss_fn)
        ref = {"final_loss": rep.mean(self.ref.losses[-tail:]), "last_loss": self.ref.losses[-1],
               "initial_loss": self.ref.losses[0], "heldout_loss": rl, "heldout_accuracy": ra,
               "chaos_floor": self.chaos_wd}
        ref_json = {k: rep.num(v) for k, v in ref.items()}
        ref_json["series"] = _series_json(self.ref.series)
        ref_json["evals"] = _series_json({"step": [float(steps)], "heldout_loss": [rl], "heldout_accuracy": [ra]})
        variants, summaries = [], []
        for t in self.twins:
            hl, ha = _evaluate(t.model, hx, hy, self.loss_fn)
            roles = dict(t.run.roles)
            if t.act.counts["count"]:
                roles["activation_grads"] = t.act
            raw = {"final_loss": rep.mean(t.losses[-tail:]), "heldout_loss": hl, "heldout_accuracy": ha,
                   "local": t.local, "roles": roles, "weight_distance": t.weight_distance, "lost": t.lost,
                   "intended": t.intended, "skipped": t.run.skipped_steps, "loss_scale": t.run.loss_scale}
            s = rep.summary(raw, ref)
            summaries.append(s)
            variants.append({"name": t.recipe.name, "summary": rep.summary_json(s, t.diverged_at),
                             "roles": {k: _stats_json(r) for k, r in sorted(roles.items())},
                             "series": _series_json(t.series), "local": _series_json(t.local),
                             "evals": _series_json({"step": [float(steps)], "heldout_loss": [hl],
                                                    "heldout_accuracy": [ha]}),
                             "histograms": [], "fp8_delayed_scales": []})
        run = {"seed": self.seed, "steps_completed": steps, "reference": ref_json, "variants": variants}
        return run, summaries


def _series_json(cols: Dict[str, List[float]]) -> Dict[str, Any]:
    """Columns as a report writes them; {} when nothing was recorded (train_results_json.cpp)."""
    if not cols.get("step"):
        return {}
    return {k: [rep.num(v) for v in vs] for k, vs in cols.items()}


def _stats_json(r: RoleStats) -> Dict[str, Any]:
    d = r.to_dict()
    d["flush_fraction"], d["subnormal_fraction"] = rep.num(d["flush_fraction"]), rep.num(d["subnormal_fraction"])
    return d


def _log_steps(steps: int, log_every: int) -> set:
    """The logged steps: every log_every-th (0: at most 200 points) and the last (as precsim train)."""
    every = log_every if log_every > 0 else max(1, -(-steps // 200))
    return set(range(0, steps, every)) | {steps - 1}


def _check_args(model_fn: Any, recipes: Any, loss_fn: Any, optimizer_fn: Any, steps: Any, seeds: Any,
                shadow_every: Any, log_every: Any) -> List[Any]:
    for name, fn in (("model_fn", model_fn), ("loss_fn", loss_fn), ("optimizer_fn", optimizer_fn)):
        if not callable(fn):
            raise TypeError(f"{name} must be callable, not {type(fn).__name__}")
    for name, v, least in (("steps", steps, 1), ("seeds", seeds, 1), ("shadow_every", shadow_every, 0),
                           ("log_every", log_every, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < least:
            raise ValueError(f"{name} {v!r} is out of range; allowed: an int >= {least}")
    if isinstance(recipes, (str, dict)) or not isinstance(recipes, (list, tuple)) or not recipes:
        raise ValueError(f"recipes must be a non-empty list of recipes (precsim.Recipe, preset names or dicts); "
                         f"got {recipes!r}")
    rs = [as_recipe(r) for r in recipes]
    names = [r.name for r in rs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"recipes {dup} appear twice; give each variant its own name (Recipe.from_dict with name)")
    return rs


def _build(model_fn: Callable, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    model = model_fn(seed)
    if not isinstance(model, nn.Module):
        raise TypeError(f"model_fn({seed}) must return a torch.nn.Module, not {type(model).__name__}")
    bad = [n for n, p in model.named_parameters() if p.dtype != torch.float32]
    if bad:
        raise TypeError(f"model_fn({seed}) gave parameters {bad} that are not float32; side_by_side starts every "
                        f"twin from FP32 weights")
    return model.train()


def _config(base: nn.Module, recipes: List[Any], optimizer: torch.optim.Optimizer, batches: Any, steps: int,
            seed: int, seeds: int, shadow_every: int, log_every: int, divergence_factor: float,
            heldout: bool) -> Dict[str, Any]:
    x, _ = _batch(batches, 0)
    rows = int(x.shape[0]) if isinstance(x, torch.Tensor) and x.dim() > 0 else 0
    defaults = {k: v for k, v in optimizer.defaults.items() if isinstance(v, (bool, int, float, str))}
    return {"steps": steps, "batch": rows, "seed": seed, "seeds": seeds, "shadow_every": shadow_every,
            "log_every": log_every, "eval_every": 0, "divergence_factor": divergence_factor, "histogram_steps": [],
            "data": {"kind": "torch", "batches": "function" if callable(batches) else len(batches),
                     "heldout": "given" if heldout else "batch 0"},
            "model": {"type": "torch", "class": type(base).__name__,
                      "parameters": sum(p.numel() for p in _params(base))},
            "optimizer": {"kind": "torch", "class": type(optimizer).__name__, **defaults},
            "recipes": [r.to_dict() for r in recipes]}


class _Progress:
    """A line on stderr every few seconds and at the end of each seed."""

    def __init__(self, on: bool, seeds: int, steps: int) -> None:
        self.on, self.seeds, self.steps, self.start, self.last = on, seeds, steps, time.monotonic(), 0.0

    def __call__(self, seed_index: int, step: int, force: bool = False) -> None:
        now = time.monotonic()
        if not self.on or (not force and now - self.last < 2.0):
            return
        self.last = now
        print(f"side_by_side: seed {seed_index + 1}/{self.seeds}, step {step}/{self.steps}, "
              f"{now - self.start:.1f} s", file=sys.stderr, flush=True)


def side_by_side(model_fn: Callable[[int], nn.Module], recipes: Sequence[RecipeLike], batches: Any,
                 loss_fn: Callable, optimizer_fn: Callable, steps: int, seeds: int = 1, shadow_every: int = 10, *,
                 seed: int = 0, heldout: Optional[tuple] = None, log_every: int = 0, divergence_factor: float = 10.0,
                 out: Any = None, deterministic: bool = True, progress: bool = True) -> Dict[str, Any]:
    """Trains a PyTorch model in lockstep as precsim train trains its variants, and returns the
    report (kind train; `precsim report summary|compare|check|export` read it).

    For each seed s in seed, seed + 1, ...: model_fn(s) builds the model (float32 parameters, after
    torch.manual_seed(s)); from its weights, on the same batches, step in lockstep an FP64 copy (the
    reference), an FP32 copy with every weight moved by one ulp in a keyed direction (the chaos
    control, in torch's own FP32 arithmetic) and, per recipe, a copy under emulate(model, recipe,
    seed=s) trained by a Run (the recipe's loss scaling, master copy, formats, updates).
    batches: a list of (inputs, targets), taken in turn (cycled), or a function of the step
    returning one; the loss is loss_fn(model(inputs), targets); optimizer_fn(parameters) makes each
    copy's torch optimizer. Every shadow_every steps (0: never) each recipe also takes one step from
    the reference's weights and optimizer state (local error). heldout (inputs, targets) is
    evaluated after the last step (default: batch 0). out: the report is written there atomically.
    Progress lines go to stderr."""
    rs = _check_args(model_fn, recipes, loss_fn, optimizer_fn, steps, seeds, shadow_every, log_every)
    if not callable(batches) and (not isinstance(batches, (list, tuple)) or not batches):
        raise ValueError("batches must be a non-empty list of (inputs, targets) or a function of the step")
    rep.check_out(out)
    show, logged = _Progress(progress, seeds, steps), _log_steps(steps, log_every)
    runs, per_variant, diverged, config = [], [[] for _ in rs], [[] for _ in rs], None
    for i in range(seeds):
        s = seed + i
        base = _build(model_fn, s)
        lock = _Lockstep(base, rs, optimizer_fn, loss_fn, s, shadow_every, float(divergence_factor))
        if config is None:
            config = _config(base, rs, lock.ref.optimizer, batches, steps, seed, seeds, shadow_every, log_every,
                             float(divergence_factor), heldout is not None)
        for step in range(steps):
            x, y = _batch(batches, step)
            lock.step(step, x, y, step in logged)
            show(i, step + 1)
        run, summaries = lock.results(steps, heldout if heldout is not None else _batch(batches, 0))
        runs.append(run)
        for v, (sm, t) in enumerate(zip(summaries, lock.twins)):
            per_variant[v].append(sm)
            diverged[v].append(t.diverged_at)
        show(i, steps, force=True)
    results = {"parameters": config["model"]["parameters"], "runs": runs,
               "variants": [rep.aggregate(r.name, r.preset, per_variant[v], diverged[v]) for v, r in enumerate(rs)]}
    doc = rep.document(config, [seed + i for i in range(seeds)], results, deterministic,
                       time.monotonic() - show.start)
    if out is not None:
        rep.write_atomic(doc, out)
    return doc
