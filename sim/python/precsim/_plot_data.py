"""The numbers each figure of precsim.plot draws, taken from a report dict as plain dataclasses,
so that tests compare them with the report without looking at pixels (docs/figures.md)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Sequence, Tuple

KINDS = ("train", "sweep", "attribute", "analyze", "gemm")


class PlotError(ValueError):
    """A report precsim.plot cannot draw; the message names what and what is allowed."""


def num(v: Any) -> float:
    """A report number as a float: reports write non-finite values as "nan"/"inf"/"-inf" and exact
    values as C99 hex-float strings (docs/CONVENTIONS.md)."""
    if isinstance(v, str):
        return float.fromhex(v) if "x" in v.lower() and "p" in v.lower() else float(v)
    return math.nan if v is None else float(v)


def nums(vs: Sequence[Any]) -> List[float]:
    return [num(v) for v in vs]


@dataclass
class TrainData:
    """Per variant, over steps: |loss gap| to the FP64 reference (mean over seeds: the gap changes
    sign, the log scale needs its size), and at shadow steps the local gradient error and the
    weight-gradient underflow against the reference; underflow_fraction: each variant's summary
    (values flushed to zero over every gradient rounding point, mean over seeds)."""
    steps: List[float]
    loss_gap: Dict[str, List[float]]
    shadow_steps: List[float]
    local_grad_rel_err: Dict[str, List[float]]
    weight_grad_underflow: Dict[str, List[float]]
    underflow_fraction: Dict[str, float]
    seeds: int


def _mean(rows: List[List[float]]) -> List[float]:
    n = min(len(r) for r in rows)
    return [sum(r[i] for r in rows) / len(rows) for i in range(n)]


def train_data(results: Mapping[str, Any]) -> TrainData:
    runs = results.get("runs") or []
    if not runs:
        raise PlotError("train report has no runs (results.runs is empty): nothing to draw")
    names = [v["name"] for v in runs[0]["variants"]]
    gap, local, under = {}, {}, {}
    for i, name in enumerate(names):
        per_run = [r["variants"][i] for r in runs]
        gap[name] = _mean([[abs(x) for x in nums(v["series"]["loss_gap"])] for v in per_run])
        local[name] = _mean([nums(v["local"]["grad_rel_err"]) for v in per_run])
        under[name] = _mean([nums(v["local"]["weight_grad_underflow_vs_reference"]) for v in per_run])
    v0 = runs[0]["variants"][0]
    fractions = {v["name"]: num(v["summary"]["underflow_fraction"]) for v in results["variants"]}
    return TrainData(steps=nums(v0["series"]["step"])[:len(gap[names[0]])], loss_gap=gap,
                     shadow_steps=nums(v0["local"]["step"])[:len(local[names[0]])], local_grad_rel_err=local,
                     weight_grad_underflow=under, underflow_fraction=fractions, seeds=len(runs))


@dataclass
class SweepCurve:
    """One line of a sweep figure: x (bits or parameters) against the mean held-out loss of the
    seeds, lo/hi its 95% interval (equal to the mean with one seed)."""
    label: str
    x: List[float]
    mean: List[float]
    lo: List[float]
    hi: List[float]


@dataclass
class SweepData:
    """by_bits: per parameter count, loss against the narrower of the weights' and the
    activations' bits (the FP64 reference at 64); by_width: per variant, loss against parameters.
    intervals: whether any point averages more than one seed."""
    by_bits: List[SweepCurve]
    by_width: List[SweepCurve]
    intervals: bool
    metric: str = "heldout_loss"


def _curve(label: str, points: List[Mapping[str, Any]], x_of, metric: str) -> SweepCurve:
    pts = sorted(points, key=x_of)
    m = [p[metric] for p in pts]
    return SweepCurve(label, [float(x_of(p)) for p in pts], nums([s["mean"] for s in m]),
                      nums([s["lo"] for s in m]), nums([s["hi"] for s in m]))


def _bits(p: Mapping[str, Any]) -> float:
    return min(num(p["bits"]["weights"]), num(p["bits"]["activations"]))


def sweep_data(results: Mapping[str, Any], metric: str = "heldout_loss") -> SweepData:
    points = results.get("points") or []
    if not points:
        raise PlotError("sweep report has no points (results.points is empty): nothing to draw")
    by_bits = [_curve(f"{n} parameters", [p for p in points if p["parameters"] == n], _bits, metric)
               for n in sorted({p["parameters"] for p in points})]
    variants = list(dict.fromkeys(p["variant"] for p in points))
    by_width = [_curve(v, [p for p in points if p["variant"] == v], lambda p: p["parameters"], metric)
                for v in variants]
    return SweepData(by_bits, by_width, any(len(p.get("seeds", [])) > 1 for p in points), metric)


@dataclass
class AttributeData:
    """The leave-one-out effect (mean over seeds) of each layer x role of the recipe on the metric:
    effect[i][j] for layers[i], roles[j]; nan where the report has no such unit. For other units
    (role, gemm, layer) one row named after the unit kind."""
    recipe: str
    metric: str
    layers: List[str]
    roles: List[str]
    effect: List[List[float]]
    gap: float


def attribute_data(results: Mapping[str, Any]) -> AttributeData:
    metric, units = results["metric"], results.get("units") or []
    if not units:
        raise PlotError("attribute report has no units (results.units is empty): nothing to draw")
    cells: Dict[Tuple[str, str], float] = {}
    for u in units:
        layer, _, role = u["unit"].rpartition("/")
        cells[(layer or results["unit_kind"], role)] = num(u["leave_one_out"][metric]["mean"])
    layers = sorted({k[0] for k in cells}, key=lambda s: (len(s), s))
    roles = list(dict.fromkeys(k[1] for k in cells))
    effect = [[cells.get((layer, role), math.nan) for role in roles] for layer in layers]
    return AttributeData(results["recipe"], metric, layers, roles, effect, num(results["gap"][metric]["mean"]))


@dataclass
class AnalyzeData:
    """Per tensor, per scheme: QSNR (dB) and the fraction of non-zero inputs flushed to zero."""
    tensors: List[str]
    schemes: List[str]
    qsnr_db: Dict[str, List[float]] = field(default_factory=dict)
    flushed_fraction: Dict[str, List[float]] = field(default_factory=dict)


def analyze_data(results: Mapping[str, Any]) -> AnalyzeData:
    tensors = results.get("tensors") or []
    if not tensors:
        raise PlotError("analyze report has no tensors (results.tensors is empty): nothing to draw")
    schemes = [s["scheme"] for s in tensors[0]["schemes"]]
    d = AnalyzeData([t["name"] for t in tensors], schemes)
    for t in tensors:
        d.qsnr_db[t["name"]] = nums([s["qsnr_db"] for s in t["schemes"]])
        d.flushed_fraction[t["name"]] = nums([s["flushed_fraction"] for s in t["schemes"]])
    return d


@dataclass
class GemmData:
    """Per accumulation model: K of each sweep point and the max and mean relative error of the
    emulated product against the exact one (one point when the report has a single K)."""
    k: List[int]
    max_rel_error: Dict[str, List[float]]
    mean_rel_error: Dict[str, List[float]]


def gemm_data(results: Mapping[str, Any]) -> GemmData:
    sweep = results.get("sweep") or []
    if not sweep:
        raise PlotError("gemm report has no sweep points (results.sweep is empty): nothing to draw")
    d = GemmData([int(p["k"]) for p in sweep], {}, {})
    for p in sweep:
        for m in p["models"]:
            d.max_rel_error.setdefault(m["model"], []).append(num(m["error"]["max_rel_error"]))
            d.mean_rel_error.setdefault(m["model"], []).append(num(m["error"]["mean_rel_error"]))
    return d


# Each reads its kind's results into that kind's data class.
EXTRACT: Dict[str, Callable[[Any], Any]] = {
    "train": train_data, "sweep": sweep_data, "attribute": attribute_data, "analyze": analyze_data, "gemm": gemm_data}


def data_of(report: Mapping[str, Any]) -> Tuple[str, Any]:
    """(kind, data) of a report dict; PlotError naming the kind and the kinds allowed otherwise."""
    if not isinstance(report, Mapping) or "kind" not in report or "results" not in report:
        raise PlotError(f"not a precsim report (no 'kind' and 'results'); precsim-plot draws the kinds {', '.join(KINDS)}")
    kind = report["kind"]
    if kind not in EXTRACT:
        raise PlotError(f"report kind {kind!r} has no figure; precsim-plot draws the kinds {', '.join(KINDS)}")
    return kind, EXTRACT[kind](report["results"])

