#!/usr/bin/python3
"""Validates the output of every precsim command against reports/schema (JSON Schema draft
2020-12, with Debian's python3-jsonschema), and checks that the schema rejects what it must.

usage: schema_test.py PRECSIM SCHEMA_JSON
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

import jsonschema
import numpy as np

precsim, schema_path = sys.argv[1], sys.argv[2]
with open(schema_path) as f:
    schema = json.load(f)
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
failures = 0
checks = 0


def run(*args):
    r = subprocess.run([precsim, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"precsim {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r.stdout


def expect(ok, what):
    global failures, checks
    checks += 1
    if not ok:
        failures += 1
        print(f"FAIL {what}")


def valid(doc, what):
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    for e in errors[:5]:
        print(f"  {what}: {'/'.join(map(str, e.path))}: {e.message[:200]}")
    expect(not errors, f"{what} should validate")


def invalid(doc, what):
    expect(not validator.is_valid(doc), f"{what} should be rejected by the schema")


with tempfile.TemporaryDirectory() as tmp:
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(1000) * 10.0 ** rng.integers(-12, 6, 1000)).astype(np.float32)
    x[:4] = [np.nan, np.inf, -0.0, 1e30]
    npy32, npy64 = os.path.join(tmp, "x32.npy"), os.path.join(tmp, "x64.npy")
    np.save(npy32, x)
    np.save(npy64, x.astype(np.float64))
    codes = os.path.join(tmp, "codes.npy")
    commands = {
        "formats": ["formats"],
        "quantize values": ["quantize", "-f", "e4m3", "1.3", "1e9", "nan", "0x1p+200", "0x1p-10", "-0"],
        "quantize stochastic": ["quantize", "-f", "bf16", "--rounding", "stochastic", "--seed", "5", "--sr-bits", "8", "0.1", "3"],
        "quantize saturate int8": ["quantize", "-f", "int8", "--overflow", "saturate", "300", "-2.5"],
        "quantize custom": ["quantize", "-f", "e3m2:nosub", "0.01", "7"],
        "quantize array f32": ["quantize", "-f", "e5m2", "--input", npy32],
        "quantize array f64 codes": ["quantize", "-f", "fp16", "--input", npy64, "--codes", "--output", codes],
        "quantize decode codes": ["quantize", "-f", "bf16", "--input", codes, "--input-format", "fp16"],
    }
    docs = {}
    for name, args in commands.items():
        for det in (False, True):
            out = run(*args, "--json", *(["--deterministic"] if det else []))
            doc = json.loads(out)
            if not det:
                docs[name] = doc
            valid(doc, f"{name}{' --deterministic' if det else ''}")
            expect(("environment" in doc) != det, f"{name}: environment block present iff not --deterministic")
            # The C++ reader agrees with the schema on every valid report.
            path = os.path.join(tmp, "r.json")
            with open(path, "w") as f:
                f.write(out)
            r = subprocess.run([precsim, "report", "validate", path], capture_output=True, text=True)
            expect(r.returncode == 0, f"{name}: precsim report validate accepts it ({r.stdout.strip()} {r.stderr.strip()})")

    f = docs["formats"]
    q = docs["quantize values"]
    a = docs["quantize array f32"]
    bad = {}
    d = copy.deepcopy(q); d["schema"] = "precsim.report/2"; bad["another schema version"] = d
    d = copy.deepcopy(q); d["kind"] = "quantise"; bad["unknown kind"] = d
    d = copy.deepcopy(q); d["status"] = "partial"; bad["unknown status"] = d
    d = copy.deepcopy(q); del d["digest"]; bad["no digest"] = d
    d = copy.deepcopy(q); d["digest"] = "md5:abc"; bad["malformed digest"] = d
    d = copy.deepcopy(q); d["extra"] = 1; bad["unknown top-level field"] = d
    d = copy.deepcopy(q); d["results"]["values"][0]["value"] = "NaN"; bad["non-finite spelled NaN"] = d
    d = copy.deepcopy(q); d["results"]["values"][0]["value_hex"] = "1.25"; bad["value_hex not a hex-float"] = d
    d = copy.deepcopy(q); d["results"]["values"][0]["status"] = "rounded"; bad["unknown status flag"] = d
    d = copy.deepcopy(q); del d["results"]["values"][0]["code"]; bad["row without code"] = d
    d = copy.deepcopy(q); d["config"]["options"]["rounding"] = "nearest"; bad["unknown rounding"] = d
    d = copy.deepcopy(q); d["config"]["options"]["sr_bits"] = 33; bad["sr_bits out of range"] = d
    d = copy.deepcopy(q); del d["config"]["mode"]; bad["no mode"] = d
    d = copy.deepcopy(a); del d["results"]["stats"]["nan"]; bad["stats without nan"] = d
    d = copy.deepcopy(a); d["results"]["stats"]["count"] = -1; bad["negative count"] = d
    d = copy.deepcopy(f); d["results"]["formats"][0]["nonfinite"] = "none"; bad["unknown nonfinite"] = d
    d = copy.deepcopy(f); d["results"]["formats"] = []; bad["no formats"] = d
    d = copy.deepcopy(f); d["results"]["formats"][1]["bits"] = "32"; bad["bits as a string"] = d
    d = copy.deepcopy(f); d["environment"]["threads"] = 0; bad["zero threads"] = d
    d = copy.deepcopy(f); d["seeds"] = {"x": 1}; bad["formats with seeds"] = d
    for what, doc in bad.items():
        invalid(doc, what)
    # Kinds whose commands have not landed: the envelope is enforced, results are permissive.
    d = copy.deepcopy(q); d["kind"] = "gpu-gemm"; d["config"] = {}; d["results"] = {"anything": [1, "nan"]}
    valid(d, "gpu-gemm envelope")
    d["kind"] = "gpu-"
    invalid(d, "bare gpu- kind")
    d = copy.deepcopy(q); d["kind"] = "train"; d["config"] = {}
    d["results"] = {"variants": [{"recipe": "bf16-amp", "series": {"log_every": 1, "total_steps": 2,
                                                                  "series": {"loss": {"step": [0, 1], "value": [2.5, "nan"]}}}}]}
    valid(d, "train with a series log")
    d["results"]["variants"][0]["series"]["series"]["loss"]["value"][1] = None
    invalid(d, "train series with a null value")

print(f"{checks - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
