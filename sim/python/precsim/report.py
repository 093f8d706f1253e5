"""Reports read back, validated and compared, as `precsim report` does (same messages)."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Union

from . import _precsim as _c

Document = Union[Mapping[str, Any], str, "os.PathLike[str]"]


def _doc(doc: Any, what: str) -> Union[Dict[str, Any], str]:
    """A report as the engine takes it: a dict, or a path as a str (read and checked by C++)."""
    if isinstance(doc, (str, os.PathLike)):
        return os.fspath(doc)
    if isinstance(doc, Mapping):
        return dict(doc)
    raise TypeError(f"{what} must be a report dict or a path, not {type(doc).__name__}")


def load(path: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    """A report file as a dict; ReportError (a ValueError) names the file and what is wrong."""
    return _c.load_report(os.fspath(path))


def validate(doc: Document) -> List[str]:
    """Every problem `precsim report validate` finds (digest, per-kind rules); empty when valid."""
    return list(_c.validate_report(_doc(doc, "report")))


def check(baseline: Document, run: Document, *, rules: Optional[Document] = None, rtol: Optional[float] = None,
          atol: Optional[float] = None) -> Dict[str, Any]:
    """`precsim report check`: run against baseline metric by metric under rules (a dict in the
    rules-file format, or a path); rtol/atol give a tolerance to metrics no rule names. Returns
    {"passed", "compared", "failures": [{"path", "message"}]}; CheckRefused when the two cannot
    be compared (another kind or configuration)."""
    r = None if rules is None else (os.fspath(rules) if isinstance(rules, (str, os.PathLike)) else rules)
    return _c.check_report(_doc(baseline, "baseline"), _doc(run, "run"), r, rtol, atol)


def compare(report: Document, a: str, b: str, *, metric: str = "heldout_loss") -> Dict[str, Any]:
    """`precsim report compare --json`: variants a and b of a train (or demo) report paired by
    seed, the difference b - a per seed, its mean with a 95% interval (None with one seed), the
    chaos floor and the verdict ("one-seed", "seed-noise", "chaos-floor" or "different"); a
    ValueError names the variants or metrics the report has when one is not in it."""
    return _c.compare_recipes(_doc(report, "report"), a, b, metric)


def summary(report: Document, *, rows: int = 20) -> str:
    """`precsim report summary --full`: the header (kind, status, tool, digest, environment),
    then the configuration, seeds and results as a tree, `rows` rows of each array shown."""
    return _c.summarize_report(_doc(report, "report"), int(rows))


def plot(report: Document, path: Union[str, "os.PathLike[str]"]) -> str:
    """The report's figure (docs/figures.md) written to path (.png or .svg), as `precsim-plot
    REPORT -o PATH` draws it; returns path. precsim.plot.PlotError for a kind with no figure."""
    from . import plot as _plot
    return _plot.save(report, path)


ReportError = _c.ReportError
CheckRefused = _c.CheckRefused
