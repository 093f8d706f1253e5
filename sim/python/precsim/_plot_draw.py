"""Draws the dataclasses of _plot_data on matplotlib figures (Agg: no display needed). Every axes
has a title, so that a test can count the panels of an SVG by their titles."""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List

from . import _plot_data as d


def _positive(ys: List[float]) -> List[float]:
    # A log axis cannot show 0 (an exact step, a fraction with no flush): those points are gaps.
    return [y if y > 0 and math.isfinite(y) else math.nan for y in ys]


def _lines(ax, x, series: Dict[str, List[float]], log: bool) -> None:
    for name, ys in series.items():
        ax.plot(x[:len(ys)], _positive(ys) if log else ys, marker="." if len(ys) < 12 else None, label=name)
    if log and any(y > 0 for ys in series.values() for y in ys):
        ax.set_yscale("log")
    ax.legend(fontsize=7)


def train(fig, t: d.TrainData) -> None:
    (ax1, ax2), (ax3, ax4) = fig.subplots(2, 2)
    _lines(ax1, t.steps, t.loss_gap, log=True)
    ax1.set(title=f"|loss gap| to FP64 (mean of {t.seeds} seed(s))", xlabel="step", ylabel="|loss - reference loss|")
    _lines(ax2, t.shadow_steps, t.weight_grad_underflow, log=False)
    ax2.set(title="weight-gradient underflow vs reference", xlabel="step", ylabel="fraction flushed to zero")
    names = list(t.underflow_fraction)
    ax3.bar(range(len(names)), [t.underflow_fraction[n] for n in names])
    ax3.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=7)
    ax3.set(title="underflow fraction of the run (all gradient roundings)", ylabel="flushed / non-zero")
    _lines(ax4, t.shadow_steps, t.local_grad_rel_err, log=True)
    ax4.set(title="local gradient error", xlabel="step", ylabel="grad_rel_err")


def _curves(ax, curves: List[d.SweepCurve], intervals: bool, logx: bool) -> None:
    for c in curves:
        if intervals:
            err = [[m - lo for m, lo in zip(c.mean, c.lo)], [hi - m for m, hi in zip(c.mean, c.hi)]]
            ax.errorbar(c.x, c.mean, yerr=err, marker="o", ms=3, capsize=2, label=c.label)
        else:
            ax.plot(c.x, c.mean, marker="o", ms=3, label=c.label)
    if logx:
        ax.set_xscale("log", base=2)
    ax.legend(fontsize=6)


def sweep(fig, s: d.SweepData) -> None:
    ax1, ax2 = fig.subplots(1, 2)
    what = " (95% interval over seeds)" if s.intervals else ""
    _curves(ax1, s.by_bits, s.intervals, logx=True)
    ax1.set(title=f"{s.metric} against bits{what}", xlabel="bits of the narrower of weights, activations",
            ylabel=s.metric)
    _curves(ax2, s.by_width, s.intervals, logx=True)
    ax2.set(title=f"{s.metric} against width{what}", xlabel="parameters", ylabel=s.metric)


def attribute(fig, a: d.AttributeData) -> None:
    ax = fig.subplots()
    im = ax.imshow(a.effect, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(a.roles)), a.roles, rotation=30, ha="right", fontsize=7)
    ax.set_yticks(range(len(a.layers)), a.layers)
    for i, row in enumerate(a.effect):
        for j, v in enumerate(row):
            ax.text(j, i, f"{v:.2g}", ha="center", va="center", fontsize=6, color="w")
    fig.colorbar(im, ax=ax, label=f"leave-one-out effect on {a.metric}")
    ax.set(title=f"{a.recipe}: layer x role (gap {a.gap:.3g})", xlabel="role", ylabel="layer")


def analyze(fig, a: d.AnalyzeData) -> None:
    ax1, ax2 = fig.subplots(1, 2)
    width = 0.8 / len(a.tensors)
    for i, t in enumerate(a.tensors):
        xs = [j + i * width for j in range(len(a.schemes))]
        ax1.bar(xs, a.qsnr_db[t], width, label=t)
        ax2.bar(xs, a.flushed_fraction[t], width, label=t)
    for ax in (ax1, ax2):
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(a.schemes))], a.schemes, rotation=30, ha="right",
                      fontsize=7)
        ax.legend(fontsize=7)
    ax1.set(title="QSNR by scheme", ylabel="QSNR (dB)")
    ax2.set(title="flushed to zero by scheme", ylabel="fraction of non-zero inputs")


def gemm(fig, g: d.GemmData) -> None:
    ax1, ax2 = fig.subplots(1, 2)
    _lines(ax1, g.k, g.max_rel_error, log=True)
    _lines(ax2, g.k, g.mean_rel_error, log=True)
    for ax, what in ((ax1, "max"), (ax2, "mean")):
        ax.set_xscale("log", base=2)
        ax.set(title=f"{what} relative error against K", xlabel="K", ylabel=f"{what} rel error")


# Each takes the figure and its kind's data class (the union is not worth spelling per kind).
DRAW: Dict[str, Callable[[Any, Any], None]] = {"train": train, "sweep": sweep, "attribute": attribute, "analyze": analyze, "gemm": gemm}
SIZE = {"train": (11, 7.5), "sweep": (10, 4), "attribute": (6, 4.5), "analyze": (10, 4), "gemm": (10, 4)}


def draw(kind: str, data: Any):
    """A matplotlib Figure of the kind's data (pyplot is not used: no global figure state)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise d.PlotError(f"matplotlib is needed to draw figures ({e}); pip install matplotlib "
                          "(scripts/setup.sh installs the tested version into build/venv)") from None
    fig = Figure(figsize=SIZE[kind], layout="constrained")
    DRAW[kind](fig, data)
    return fig
