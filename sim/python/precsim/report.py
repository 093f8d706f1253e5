"""Reports read back, validated and compared, as `precsim report` does (same messages)."""
import json
import os

from . import _precsim as _c


def _text(doc, what):
    if isinstance(doc, (str, os.PathLike)):
        return json.dumps(load(doc))
    if isinstance(doc, dict):
        return json.dumps(doc)
    raise TypeError(f"{what} must be a report dict or a path, not {type(doc).__name__}")


def load(path):
    """A report file as a dict; ReportError (a ValueError) names the file and what is wrong."""
    return json.loads(_c.load_report(os.fspath(path)))


def validate(doc):
    """Every problem `precsim report validate` finds (digest, per-kind rules); empty when valid."""
    return list(_c.validate_report(_text(doc, "report")))


def check(baseline, run, *, rules=None, rtol=None, atol=None):
    """`precsim report check`: run against baseline metric by metric under rules (a dict in the
    rules-file format, or a path); rtol/atol give a tolerance to metrics no rule names. Returns
    {"passed", "compared", "failures": [{"path", "message"}]}; CheckRefused when the two cannot
    be compared (another kind or configuration)."""
    r = None if rules is None else (json.dumps(rules) if isinstance(rules, dict) else open(rules).read())
    return json.loads(_c.check_report(_text(baseline, "baseline"), _text(run, "run"), r, rtol, atol))


ReportError = _c.ReportError
CheckRefused = _c.CheckRefused
