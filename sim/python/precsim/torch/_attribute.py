"""attribute: which part of a recipe costs a PyTorch model its loss, as `precsim attribute` asks
of precsim's own models. The counterfactual recipes, the statistics and the results are the
engine's (experiment/attribution.cpp); the runs are one side_by_side."""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, Dict, Optional, Sequence

from torch import nn

import precsim
from precsim._recipe import Recipe, RecipeLike, as_recipe

from . import _twin_report as rep
from ._side_by_side import side_by_side

_METRICS = ("final_loss", "heldout_loss", "local_grad_rel_err")


def _distinct(recipes: Sequence[Recipe]) -> tuple:
    """The recipes to run, each once under a name of its own, and each recipe's index among them
    (as run_counterfactuals: identical recipes run once)."""
    runs, index, of = [], {}, []
    for r in recipes:
        keys = r.to_dict()
        keys.pop("name")
        key = repr(sorted(keys.items()))
        if key not in index:
            index[key] = len(runs)
            runs.append(r.replace(name=f"{r.name}#{len(runs)}"))
        of.append(index[key])
    return runs, of


def attribute(model_fn: Callable[[int], nn.Module], recipe: RecipeLike, batches: Any, loss_fn: Callable,
              optimizer_fn: Callable, steps: int, seeds: int = 2, shadow_every: int = 10, *, unit: str = "role",
              units: Optional[Sequence[str]] = None, metric: str = "heldout_loss", seed: int = 0,
              heldout: Optional[tuple] = None, out: Any = None, deterministic: bool = True,
              progress: bool = True) -> Dict[str, Any]:
    """The `attribute` report of recipe on a PyTorch model: R, its high-precision recipe H (every
    role group from fp32) and per unit leave-one-out (R with the unit from H) and leave-one-in (H
    with only the unit from R), trained side by side (same arguments as side_by_side) in one
    lockstep run with the FP64 reference; identical recipes run once. unit: "role" (weights,
    activations, activation_grads, weight_grads, optimizer_state, master_weights,
    grad_accumulation, allreduce) or "gemm" (forward, dgrad, wgrad); units: a subset of them.
    metric ranks the units: heldout_loss, final_loss or local_grad_rel_err. ValueError, before any
    step, for a recipe with per-part keys or one that is all FP32, and after the runs for a gap
    inside the seed noise or the chaos floor (docs/reference/metrics.md, attribute)."""
    r = as_recipe(recipe)
    only = [] if units is None else [str(u) for u in units]
    plan = [Recipe._of(t) for t in precsim._precsim.attribution_plan(r._typed, str(unit), only, str(metric))]
    runs, of = _distinct(plan)
    rep.check_out(out)
    start = time.monotonic()
    doc = side_by_side(model_fn, runs, batches, loss_fn, optimizer_fn, steps, seeds, shadow_every, seed=seed,
                       heldout=heldout, progress=progress)
    res = doc["results"]
    metrics = [[[float(run["variants"][i]["summary"][m]) for m in _METRICS] for run in res["runs"]] for i in of]
    chaos = [abs(float(run["reference"]["series"]["chaos_loss"][-1]) - float(run["reference"]["series"]["loss"][-1]))
             for run in res["runs"]]
    held = [float(run["reference"]["heldout_loss"]) for run in res["runs"]]
    names = [p.name[len("loo:"):] for p in plan[2::2]]  # the units in their order: R, H, then loo/loi pairs
    results = precsim._precsim.attribution_results(r._typed, str(unit), only, str(metric), metrics, chaos, held,
                                                   len(runs))
    config = dict(doc["config"])
    config["attribute"] = {"recipe": r.name, "unit": str(unit), "units": names, "metric": str(metric)}
    out_doc = precsim._precsim.make_report("attribute", config, doc["seeds"], results, bool(deterministic),
                                           [str(a) for a in sys.argv])
    if "environment" in out_doc:
        out_doc["environment"]["wall_time_s"] = time.monotonic() - start
    if out is not None:
        rep.write_atomic(out_doc, out)
    return out_doc
