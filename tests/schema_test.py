#!/usr/bin/python3
"""Validates the output of every precsim command against reports/schema (JSON Schema draft
2020-12, with Debian's python3-jsonschema); checks that the schema rejects broken reports of
every kind (a missing key, a wrong type, an unknown metric), and that every name the schema
allows in `results` is defined in docs/reference/metrics.md.

usage: schema_test.py PRECSIM SCHEMA_JSON [GPU_FAKE_LIBRARY]
"""
import copy
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

import jsonschema
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from checks import expect, finish  # noqa: E402

precsim, schema_path = sys.argv[1], sys.argv[2]
gpu_fake = sys.argv[3] if len(sys.argv) > 3 else ""
with open(schema_path) as f:
    schema = json.load(f)
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
KINDS = ["formats", "quantize", "analyze", "dot", "mma", "gemm", "allreduce", "train", "sweep", "attribute", "search", "gpu-info", "gpu-gemm", "gpu-probe"]


def run(*args, env=None):
    r = subprocess.run([precsim, *args], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"precsim {' '.join(args)} exited {r.returncode}: {r.stderr[-800:]}")
    return r.stdout


def valid(doc, what):
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    for e in errors[:5]:
        print(f"  {what}: {'/'.join(map(str, e.path))}: {e.message[:200]}")
    expect(not errors, f"{what} should validate")


def invalid(doc, what):
    expect(not validator.is_valid(doc), f"{what} should be rejected by the schema")


# Every name the schema allows under a kind's results is defined in docs/reference/metrics.md (as a metric or as
# a field): walk the kind's results schema through its $refs.
def results_names(node, seen):
    names = set()
    if isinstance(node, dict):
        ref = node.get("$ref")
        if ref and ref not in seen:
            seen.add(ref)
            names |= results_names(schema["$defs"][ref.split("/")[-1]], seen)
        for k, v in node.get("properties", {}).items():
            names.add(k)
            names |= results_names(v, seen)
        for key in ("items", "additionalProperties", "then", "else"):
            if isinstance(node.get(key), dict):
                names |= results_names(node[key], seen)
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in node.get(key, []):
                names |= results_names(sub, seen)
    return names


with open(os.path.join(os.path.dirname(schema_path), "..", "..", "docs", "reference", "metrics.md")) as f:
    defined = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", f.read()))
for kind in KINDS:
    d = schema["$defs"][kind.replace("-", "_") + "_report"]
    names = results_names(d["properties"]["results"], set())
    # quantize's results depend on its mode (if/then/else at the kind's level)
    names |= results_names({k: d[k] for k in ("then", "else") if k in d}, set()) - {"config", "results"}
    missing = sorted(names - defined)
    expect(names and not missing, f"{kind}: names in the schema's results not defined in docs/reference/metrics.md: {missing}")


def safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        b = a.tobytes()
        header[name] = {"dtype": {"float32": "F32", "float16": "F16"}[str(a.dtype)], "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


with tempfile.TemporaryDirectory() as tmp:
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(1000) * 10.0 ** rng.integers(-12, 6, 1000)).astype(np.float32)
    x[:4] = [np.nan, np.inf, -0.0, 1e30]
    npy32, npy64 = os.path.join(tmp, "x32.npy"), os.path.join(tmp, "x64.npy")
    np.save(npy32, x)
    np.save(npy64, x.astype(np.float64))
    codes = os.path.join(tmp, "codes.npy")
    st = os.path.join(tmp, "m.safetensors")
    safetensors(st, {"w": rng.standard_normal((8, 64)).astype(np.float32), "g": (rng.standard_normal(256) * 1e-6).astype(np.float16)})
    ga, gb = os.path.join(tmp, "a.npy"), os.path.join(tmp, "b.npy")
    # One ampere/mma.m16n8k16 (bf16): A 16 x 16, B 16 x 8, C 16 x 8 of small integers (bf16 values).
    ma, mb, mc = (os.path.join(tmp, f"mma_{x}.npy") for x in "abc")
    for path, shape in ((ma, (16, 16)), (mb, (16, 8)), (mc, (16, 8))):
        np.save(path, rng.integers(-8, 8, shape).astype(np.float32))
    np.save(ga, rng.standard_normal((6, 32)).astype(np.float32))
    np.save(gb, rng.standard_normal((32, 5)))
    cfg = os.path.join(tmp, "train.json")
    with open(cfg, "w") as f:
        json.dump({"steps": 8, "batch": 32, "shadow_every": 3, "histogram_steps": [0, 7],
                   "recipes": ["fp32", "fp16-amp", "fp8-delayed", "mxfp4", "bf16-pure-sr"],
                   "data": {"kind": "gaussian-mixture", "features": 16, "classes": 4, "train_size": 256, "heldout_size": 64},
                   "model": {"hidden": [16]}}, f)
    commands = {
        "formats": ["formats"],
        "quantize values": ["quantize", "-f", "e4m3", "1.3", "1e9", "nan", "0x1p+200", "0x1p-10", "-0"],
        "quantize stochastic": ["quantize", "-f", "bf16", "--rounding", "stochastic", "--seed", "5", "--sr-bits", "8", "0.1", "3"],
        "quantize saturate int8": ["quantize", "-f", "int8", "--overflow", "saturate", "300", "-2.5"],
        "quantize custom": ["quantize", "-f", "e3m2:nosub", "0.01", "7"],
        "quantize array f32": ["quantize", "-f", "e5m2", "--input", npy32],
        "quantize array f64 codes": ["quantize", "-f", "fp16", "--input", npy64, "--codes", "--output", codes],
        "quantize decode codes": ["quantize", "-f", "bf16", "--input", codes, "--input-format", "fp16"],
        "quantize scheme": ["quantize", "-f", "mxfp4", "--input", npy32, "--output", os.path.join(tmp, "q4.npy")],
        "quantize scheme codes": ["quantize", "-f", "nvfp4", "--input", npy32, "--codes", "--output", os.path.join(tmp, "c4.npy")],
        "analyze generated": ["analyze", "--dist", "normal", "--outliers", "0.01,100", "--count", "8192",
                              "--formats", "e4m3,mxfp4:rule=rceil,nvfp4,fp8_e4m3:row,fp8_e4m3:block128"],
        "analyze npy": ["analyze", "--input", npy32, "--formats", "bf16,e5m2", "--flush-subnormals"],
        "analyze npy blocks": ["analyze", "--input", npy32, "--formats", "mxfp8_e4m3,e4m3"],
        "analyze safetensors": ["analyze", "--input", st, "--formats", "mxfp8_e4m3,fp16"],
        "dot": ["dot", "--model", "h100", "--a", "1,2,0x1p-20", "--b", "1,1,1"],
        "mma": ["mma", "--model", "ampere/mma.m16n8k16.f32.bf16.bf16.f32", "--a", ma, "--b", mb, "--c", mc],
        "dot fp32 with c": ["dot", "--model", "fp32-seq", "--a", "0x1p100,1,-0x1p100", "--b", "1,1,1", "--c", "0.5"],
        "gemm": ["gemm", "--m", "16", "--n", "16", "--k", "64", "--model", "fp32-seq,h100,unordered"],
        "gemm sweep": ["gemm", "--m", "8", "--n", "8", "--sweep-k", "16,64", "--model", "a100", "--dist", "cancel"],
        "gemm npy": ["gemm", "--a", ga, "--b", gb, "--a-format", "fp32", "--b-format", "fp32", "--model", "pairwise"],
        "gemm npy output": ["gemm", "--a", ga, "--b", gb, "--model", "h100", "--output", os.path.join(tmp, "c.npy")],
        "allreduce": ["allreduce", "-w", "2,3", "-n", "1024", "-f", "bf16,e4m3", "-a", "ring,tree", "--average", "nccl-avg"],
        "allreduce hook": ["allreduce", "-w", "4", "-n", "512", "-f", "fp32", "--average", "ddp", "--hook", "fp16"],
        "train": ["train", "--config", cfg],
        "train seeds": ["train", "--config", cfg, "--seeds", "2", "--recipes", "fp32,bf16-amp"],
        "demo": ["demo", "--steps", "2"],
        "train transformer": ["train", "--experiment", "tiny-gpt", "--steps", "2"],
        "attribute": ["attribute", "--config", cfg, "--recipe", "mxfp4", "--unit", "layer-role", "--units", "0/weights,1/activations"],
        "search": ["search", "--config", cfg, "--formats", "e2m1,e4m3,bf16", "--budget", "10", "--steps", "4"],
    }
    env = None
    if gpu_fake:
        env = dict(os.environ, PRECSIM_GPU_LIBRARY=gpu_fake)
        commands.update({
            "gpu info": ["gpu", "info"],
            "gpu gemm": ["gpu", "gemm", "--type", "bf16", "--m", "8", "--n", "8", "--k", "64", "--presets", "h100,a100"],
            "gpu probe": ["gpu", "probe", "--gemm", "e4m3-fast", "--gemm-k", "64"],
            "train cuda": ["train", "--config", cfg, "--recipes", "bf16-amp,fp8-current", "--steps", "3", "--backend", "cuda"],
        })
    docs = {}
    for name, args in commands.items():
        for det in (False, True):
            out = run(*args, "--json", *(["--deterministic"] if det else []), env=env)
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

    # Broken reports: each must be rejected. (doc, JSON path, change) with change one of
    # ("del",) ("set", value) ("add", key, value).
    def broken(name, path, change):
        d = copy.deepcopy(docs[name])
        node = d
        for p in path[:-1]:
            node = node[p]
        if change[0] == "del":
            del node[path[-1]]
        elif change[0] == "set":
            node[path[-1]] = change[1]
        else:
            node[path[-1]][change[1]] = change[2]
        invalid(d, f"{name}: {change[0]} {'/'.join(map(str, path))} {change[1:] if len(change) > 1 else ''}")

    Q, A, F = "quantize values", "quantize array f32", "formats"
    broken(Q, ["schema"], ("set", "precsim.report/2"))
    broken(Q, ["kind"], ("set", "quantise"))
    broken(Q, ["status"], ("set", "partial"))
    broken(Q, ["digest"], ("del",))
    broken(Q, ["digest"], ("set", "md5:abc"))
    broken(Q, ["extra"], ("set", 1))
    broken(Q, ["results", "values", 0, "value"], ("set", "NaN"))
    broken(Q, ["results", "values", 0, "value_hex"], ("set", "1.25"))
    broken(Q, ["results", "values", 0, "status"], ("set", "rounded"))
    broken(Q, ["results", "values", 0, "code"], ("del",))
    broken(Q, ["config", "options", "rounding"], ("set", "nearest"))
    broken(Q, ["config", "options", "sr_bits"], ("set", 33))
    broken(Q, ["config", "mode"], ("del",))
    broken(A, ["results", "stats", "nan"], ("del",))
    broken(A, ["results", "stats", "count"], ("set", -1))
    broken(A, ["results", "stats"], ("add", "flushed", 3))
    broken(F, ["results", "formats", 0, "nonfinite"], ("set", "none"))
    broken(F, ["results", "formats"], ("set", []))
    broken(F, ["results", "formats", 1, "bits"], ("set", "32"))
    broken(F, ["environment", "threads"], ("set", 0))
    broken(F, ["seeds"], ("set", {"x": 1}))
    G, T, S = "analyze generated", "train", "train seeds"
    broken(G, ["results", "tensors", 0, "schemes", 0, "qsnr_db"], ("del",))
    broken(G, ["results", "tensors", 0, "schemes", 0, "qsnr_db"], ("set", "31 dB"))
    broken(G, ["results", "tensors", 0, "schemes", 0], ("add", "snr_db", 31.0))
    broken(G, ["results", "tensors", 0, "exponent_histogram", 0, "count"], ("set", 1.5))
    broken(G, ["config", "formats", 0, "rule"], ("set", "round"))
    broken("dot", ["results", "ulp_error"], ("del",))
    broken("mma", ["results", "max_ulp_error"], ("del",))
    broken("mma", ["config", "shape", "m"], ("set", 0))
    broken("dot", ["results", "result_hex"], ("set", 3.0))
    broken("dot", ["results"], ("add", "ulps", 0))
    broken("dot", ["config", "model", "kind"], ("set", "fancy"))
    broken("gemm", ["results", "sweep", 0, "models", 0, "error", "normwise_error"], ("del",))
    broken("gemm", ["results", "sweep", 0, "models", 0, "error", "max_ulp_error"], ("set", -2))
    broken("gemm", ["results", "sweep", 0, "models", 0, "error"], ("add", "rel_error", 1e-7))
    broken("gemm", ["results", "sweep", 0, "k"], ("set", "64"))
    broken("allreduce", ["results", "runs", 0, "rel_err_norm"], ("del",))
    broken("allreduce", ["results", "runs", 0, "ranks_identical"], ("set", "yes"))
    broken("allreduce", ["results", "runs", 0], ("add", "rel_error", 0.1))
    broken(T, ["results", "variants", 0, "summary", "loss_gap"], ("del",))
    broken(T, ["results", "variants", 0, "summary", "final_loss"], ("set", "low"))
    broken(T, ["results", "variants", 0, "summary"], ("add", "loss_gapp", 0.0))
    broken(T, ["results", "runs", 0, "variants", 0, "summary"], ("add", "accuracy", 0.9))
    broken(T, ["results", "runs", 0, "variants", 0, "series"], ("add", "lossy", [1.0]))
    broken(T, ["results", "runs", 0, "variants", 0, "series", "loss", 0], ("set", None))
    broken(T, ["results", "runs", 0, "steps_completed"], ("del",))
    broken(T, ["results", "runs", 0, "reference", "series"], ("add", "loss_gap", [0.0]))
    broken(T, ["seeds", "seeds"], ("set", [-1]))
    broken(S, ["results", "variants", 0, "summary_ci95", "final_loss"], ("set", [1.0]))
    broken("attribute", ["results", "units", 0, "leave_one_out", "heldout_loss", "ci95"], ("set", [1.0]))
    broken("attribute", ["results", "units", 0], ("add", "shapley", 0.5))
    broken("attribute", ["results", "unit_kind"], ("set", "tensor"))
    broken("attribute", ["results", "interaction"], ("del",))
    broken("search", ["results", "points", 0, "digest"], ("set", "sha256:00"))
    broken("search", ["results", "points", 0], ("add", "bits", 8))
    broken("search", ["results", "method"], ("set", "beam"))
    expect(bool(docs[T]["results"]["runs"][0]["variants"][2]["fp8_delayed_scales"]), "train: fp8-delayed reports its scales")
    expect(len(docs[T]["results"]["runs"][0]["variants"][0]["histograms"]) == 2, "train: histograms at the steps asked")
    if gpu_fake:
        broken("gpu info", ["results", "devices", 0, "compute_capability"], ("set", 9))
        broken("gpu gemm", ["results", "sets", 0, "presets", 0, "match"], ("add", "ulps", 0))
        broken("gpu gemm", ["results", "best_preset"], ("del",))
        broken("gpu probe", ["results", "targets", 0, "findings"], ("add", "block", 16))
        broken("train cuda", ["results", "backend", "fp8_padding"], ("del",))
        broken("train cuda", ["results", "runs", 0, "variants", 0, "backend", "series"], ("add", "loss_gap", [0]))
        broken("train cuda", ["results", "runs", 0, "variants", 1, "backend", "calls", "forward"], ("del",))
    # A gpu- kind this schema version does not know: the envelope is enforced, results are free.
    d = copy.deepcopy(docs[Q]); d["kind"] = "gpu-train"; d["config"] = {}; d["results"] = {"anything": [1, "nan"]}
    valid(d, "unknown gpu- kind envelope")
    d["kind"] = "gpu-"
    invalid(d, "bare gpu- kind")

finish()
