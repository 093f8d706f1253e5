"""Shared by the Python tests: count checks, print each failure, exit non-zero if any failed.

    from checks import expect, finish
    expect(ok, "what should hold")
    finish()
"""
import sys

_counts = {"checks": 0, "failures": 0}


def expect(ok, what):
    _counts["checks"] += 1
    if not ok:
        _counts["failures"] += 1
        print(f"FAIL {what}")
    return ok


def finish():
    c, f = _counts["checks"], _counts["failures"]
    print(f"{c - f} passed, {f} failed")
    sys.exit(1 if f or not c else 0)
