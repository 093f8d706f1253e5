"""The train report of side_by_side: per-seed summaries as precsim's trainers define them
(sim/src/experiment/seed_report.cpp), their means and 95% Student-t intervals over seeds
(analysis/metrics.cpp mean_ci95), and the document with the engine's tool block and digest."""
from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from typing import Any, Dict, List, Optional, Sequence

import precsim

# The summary metrics in the trainers' order (seed_report.cpp kSummaryNumberNames).
SUMMARY_NAMES = ("final_loss", "heldout_loss", "heldout_accuracy", "loss_gap", "heldout_loss_gap",
                 "heldout_accuracy_gap", "local_grad_rel_err", "local_grad_cosine", "local_update_rel_err",
                 "local_weight_grad_underflow", "local_split_grad_rel_err", "local_split_grad_cosine",
                 "weight_distance", "chaos_floor", "drift_over_chaos_floor", "underflow_fraction",
                 "stagnation_fraction", "skipped_steps", "final_loss_scale")


def num(v: float) -> Any:
    """A float as a report writes it: non-finite values as "nan", "inf", "-inf" (json_number)."""
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _t_two_sided(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with integer df (Abramowitz & Stegun 26.7.3, 26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2 == 1:
        term, acc = math.cos(theta), 0.0
        for k in range(1, (df - 1) // 2 + 1):
            acc += term
            term *= c2 * (2 * k) / (2 * k + 1)
        return 2 / math.pi * (theta + s * acc) if df > 1 else 2 * theta / math.pi
    term, acc = 1.0, 0.0
    for k in range(1, df // 2 + 1):
        acc += term
        term *= c2 * (2 * k - 1) / (2 * k)
    return s * acc


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with df degrees of freedom (bisection to double precision)."""
    lo, hi = 0.0, 1000.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if _t_two_sided(mid, df) < 0.95:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def mean_ci95(xs: Sequence[float]) -> List[float]:
    """[mean, lo, hi]: the mean and its 95% Student-t interval; lo = hi = mean for one value."""
    m = mean(xs)
    if len(xs) < 2 or not math.isfinite(m):
        return [m, m, m]
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    half = t975(len(xs) - 1) * sd / math.sqrt(len(xs))
    return [m, m - half, m + half]


def summary(v: Dict[str, Any], ref: Dict[str, Any]) -> Dict[str, Any]:
    """One seed's summary of a variant (seed_report.cpp variant_summary) from its raw numbers."""
    local = v["local"]
    grads = [r for k, r in v["roles"].items() if k in ("activation_grads", "weight_grads")]
    flushed = sum(r.counts["underflow_to_zero"] for r in grads)
    nonzero = sum(r.nonzero for r in grads)
    s = {"final_loss": v["final_loss"], "heldout_loss": v["heldout_loss"], "heldout_accuracy": v["heldout_accuracy"],
         "loss_gap": v["final_loss"] - ref["final_loss"], "heldout_loss_gap": v["heldout_loss"] - ref["heldout_loss"],
         "heldout_accuracy_gap": v["heldout_accuracy"] - ref["heldout_accuracy"],
         "local_grad_rel_err": mean(local["grad_rel_err"]), "local_grad_cosine": mean(local["grad_cosine"]),
         "local_update_rel_err": mean(local["update_rel_err"]),
         "local_weight_grad_underflow": mean(local["weight_grad_underflow_vs_reference"]),
         "local_split_grad_rel_err": 0.0, "local_split_grad_cosine": 1.0,
         "weight_distance": v["weight_distance"], "chaos_floor": ref["chaos_floor"],
         "drift_over_chaos_floor": v["weight_distance"] / ref["chaos_floor"] if ref["chaos_floor"] else math.inf,
         "underflow_fraction": flushed / nonzero if nonzero else 0.0,
         "stagnation_fraction": v["lost"] / v["intended"] if v["intended"] else 0.0,
         "skipped_steps": v["skipped"], "final_loss_scale": v["loss_scale"]}
    return s


def summary_json(s: Dict[str, Any], diverged: Any) -> Dict[str, Any]:
    out = {k: num(s[k]) for k in SUMMARY_NAMES}
    out["diverged_at"] = diverged
    return out


def aggregate(name: str, preset: str, per_seed: List[Dict[str, Any]], diverged: List[Any]) -> Dict[str, Any]:
    """A results.variants entry: means over seeds, intervals with two or more (aggregate_json)."""
    stats = {k: mean_ci95([float(s[k]) for s in per_seed]) for k in SUMMARY_NAMES}
    agg = {k: num(m) for k, (m, _, _) in stats.items()}
    agg["diverged_at"] = diverged[0] if len(diverged) == 1 else diverged
    v = {"name": name, "preset": preset, "summary": agg, "split": {"workers": 1, "micro_batches": 1}}
    if len(per_seed) > 1:
        v["summary_ci95"] = {k: [num(lo), num(hi)] for k, (_, lo, hi) in stats.items()}
    return v


def document(config: Dict[str, Any], seeds: List[int], results: Dict[str, Any], deterministic: bool,
             wall_time_s: float) -> Dict[str, Any]:
    """The train report around results: the engine's tool block and digest (as every report)."""
    doc = precsim._precsim.make_report("train", config, {"seed": seeds[0], "seeds": seeds}, results,
                                       bool(deterministic), [str(a) for a in sys.argv])
    if "environment" in doc:
        doc["environment"]["wall_time_s"] = float(wall_time_s)
    return doc


def write_atomic(doc: Dict[str, Any], path: "os.PathLike[str] | str") -> None:
    """The report written to path atomically: a temporary file beside it, fsync, rename."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".tmp.")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=2, sort_keys=True, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_out(out: Optional[Any]) -> None:
    """Fails before a run when out's folder does not exist (as the CLI's check_writable)."""
    if out is None:
        return
    folder = os.path.dirname(os.path.abspath(os.fspath(out)))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"out {os.fspath(out)!r}: the folder {folder!r} does not exist")
