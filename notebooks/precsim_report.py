"""Load precsim reports (schema precsim.report/1) into NumPy arrays, and pandas DataFrames when
pandas is installed. Non-finite numbers ("nan", "inf", "-inf") and exact hex-floats ("0x1.8p-24")
are decoded to floats; integer codes ("0x3a") stay strings.

    import precsim_report as pr
    r = pr.load("run.json")
    r.kind, r.config, r.seeds                       # plain dicts
    t = pr.table(r.results["formats"])               # {column: np.ndarray}, or a DataFrame
    v = r.results["runs"][0]["variants"][0]          # a train report: seed 0's first variant
    steps, loss = pr.array(v["series"]["step"]), pr.array(v["series"]["loss"])
    full = pr.series_npy("run.json", "loss")         # (n, 2) [step, value] written beside the report
"""
import json
import os
import re

import numpy as np

try:
    import pandas as _pd
except ImportError:  # pandas is optional
    _pd = None

SCHEMA = "precsim.report/1"
_HEX_FLOAT = re.compile(r"^[+-]?0[xX][0-9a-fA-F]*\.?[0-9a-fA-F]*[pP][+-]?[0-9]+$")
_SPECIAL = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


class ReportError(ValueError):
    pass


def decode(v):
    """A report value as Python: non-finite strings and hex-floats become floats."""
    if isinstance(v, str):
        if v in _SPECIAL:
            return _SPECIAL[v]
        if _HEX_FLOAT.match(v):
            return float.fromhex(v)
    return v


def is_number(v):
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) or (
        isinstance(v, str) and (v in _SPECIAL or bool(_HEX_FLOAT.match(v))))


def array(values):
    """A list of report numbers as a float64 array."""
    return np.array([decode(v) for v in values], dtype=np.float64)


class Report:
    def __init__(self, doc, path=None):
        self.doc, self.path = doc, path
        self.kind, self.status = doc["kind"], doc["status"]
        self.config, self.seeds, self.results = doc["config"], doc["seeds"], doc["results"]
        self.digest = doc["digest"]

    def __repr__(self):
        return f"Report({self.kind!r}, {self.status}, {self.path})"


def load(path):
    """Reads and checks the envelope; raises ReportError naming the file and the problem."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ReportError(f"{path}: not a {SCHEMA} report")
    for key in ("kind", "status", "config", "seeds", "results", "digest"):
        if key not in doc:
            raise ReportError(f"{path}: no {key!r} field")
    return Report(doc, path)


def table(rows, columns=None):
    """An array of records as {column: np.ndarray} (numeric columns as float64), or a pandas
    DataFrame when pandas is present."""
    cols = columns or list(dict.fromkeys(k for r in rows for k in r))
    out = {}
    for c in cols:
        vals = [r.get(c) for r in rows]
        if all(v is None or is_number(v) for v in vals) and any(v is not None for v in vals):
            out[c] = np.array([np.nan if v is None else decode(v) for v in vals], dtype=np.float64)
        else:
            out[c] = np.array(vals, dtype=object)
    return _pd.DataFrame(out) if _pd is not None else out


def series(obj):
    """(steps, values) of a SeriesLog series {"step": [...], "value": [...]} or of a plain array."""
    if isinstance(obj, dict):
        return np.array(obj["step"], dtype=np.int64), array(obj["value"])
    return np.arange(len(obj)), array(obj)


def series_npy(report_path, name):
    """The full series written beside a report: "<stem>.<name>.npy", shape (n, 2): step, value."""
    stem = os.path.splitext(report_path)[0]
    return np.load(f"{stem}.{name}.npy")


def find(obj, key):
    """Every (path, value) in obj whose key is `key`, depth first."""
    found = []

    def walk(o, path):
        if isinstance(o, dict):
            for k, v in o.items():
                if k == key:
                    found.append((path + (k,), v))
                walk(v, path + (k,))
        elif isinstance(o, list):
            for i, v in enumerate(o):
                walk(v, path + (i,))

    walk(obj, ())
    return found


def positive_values(exponent_bits, mantissa_bits, bias, subnormals=True, nonfinite="ieee", has_zero=True):
    """Every positive finite value of a float format, computed from its row alone (an
    independent check of the C++ tables, and the value grids of formats.ipynb)."""
    vals = []
    top = (1 << exponent_bits) - 1
    for e in range(1 << exponent_bits):
        for m in range(1 << mantissa_bits):
            if nonfinite == "ieee" and e == top:
                continue
            if nonfinite == "nan-only" and e == top and m == (1 << mantissa_bits) - 1:
                continue
            if e == 0 and has_zero:
                if m == 0 or not subnormals:
                    continue
                v = m * 2.0 ** (1 - bias - mantissa_bits)
            else:
                v = (1 + m / (1 << mantissa_bits)) * 2.0 ** (e - bias)
            vals.append(v)
    return np.array(sorted(vals))
