"""Figures of precsim reports (docs/figures.md): one figure per report kind the CLI writes.

    precsim-plot run.json -o run.png         # or: python -m precsim.plot run.json -o run.svg

    from precsim import plot
    kind, data = plot.data(report_dict)      # the numbers drawn, as dataclasses (_plot_data)
    plot.save(report_dict_or_path, "run.png")
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any, List, Mapping, Optional, Union

from ._plot_data import KINDS, PlotError, data_of

FORMATS = (".png", ".svg")
Report = Union[Mapping[str, Any], str, "os.PathLike[str]"]

__all__ = ["KINDS", "FORMATS", "PlotError", "data", "figure", "save", "main"]


def _read(report: Report) -> Mapping[str, Any]:
    if isinstance(report, Mapping):
        return report
    path = os.fspath(report)
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise PlotError(f"{path}: not a precsim report ({e}); precsim-plot draws the kinds {', '.join(KINDS)}") from None


def data(report: Report):
    """(kind, dataclass of the numbers drawn); PlotError for a kind with no figure."""
    return data_of(_read(report))


def figure(report: Report):
    """The matplotlib Figure of a report (a dict or a path)."""
    from ._plot_draw import draw
    return draw(*data(report))


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def save(report: Report, path: Union[str, "os.PathLike[str]"]) -> str:
    """Draws the report's figure into path (.png or .svg), written to a temporary file beside it
    and renamed, so that an interrupted or failed run never leaves a partial figure. Nothing is
    written when the report cannot be drawn."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise PlotError(f"figure file {path!r}: extension {ext or '(none)'!r} is not one of {', '.join(FORMATS)}")
    fig = figure(report)
    fd, tmp = tempfile.mkstemp(prefix=".precsim-plot-", suffix=ext, dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format=ext[1:], dpi=100)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 is for the temporary name only
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="precsim-plot", description="Draw the figure of a precsim report "
                                f"(kinds: {', '.join(KINDS)}).")
    p.add_argument("report", help="a report JSON file the precsim CLI wrote")
    p.add_argument("-o", "--out", help="figure file, .png or .svg (default: the report's name with .png)")
    args = p.parse_args(argv)
    out = args.out or os.path.splitext(args.report)[0] + ".png"
    try:
        save(args.report, out)
    except PlotError as e:
        print(f"precsim-plot: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # the figure's folder is missing or not writable
        print(f"precsim-plot: error: cannot write the figure {out!r}: {e.strerror}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
