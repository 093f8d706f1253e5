#!/usr/bin/python3
"""Runs every notebook headless (nbclient) on reports written in the same run, and checks that
each figure was written and is not empty. The formats report comes from the CLI; kinds whose
commands have not landed yet get synthetic reports of the documented shape (reports/schema,
$defs/<kind>_report), validated against the schema first.

usage: run_notebooks.py PRECSIM OUT_DIR
"""
import json
import math
import os
import subprocess
import sys

import jsonschema
import nbformat
from nbclient import NotebookClient

here = os.path.dirname(os.path.abspath(__file__))
precsim, out = sys.argv[1], os.path.abspath(sys.argv[2])
os.makedirs(out, exist_ok=True)
os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # quiet the kernel's debugger warning
schema = json.load(open(os.path.join(here, "..", "reports", "schema", "precsim.report.schema.json")))
validator = jsonschema.Draft202012Validator(schema)


def envelope(kind, config, results):
    return {"schema": "precsim.report/1", "kind": kind, "status": "complete",
            "tool": {"name": "precsim", "version": "0.0.0", "commit": "synthetic", "build_type": "none", "compiler": "none"},
            "config": dict(config, synthetic=True), "seeds": {"data": 0}, "results": results,
            "digest": "sha256:" + "0" * 64}


def series(f, n=200):
    return {"step": list(range(n)), "value": [f(s) for s in range(n)]}


def synthetic():
    schemes = []
    for name, lo, hi, q in [("e4m3", -9, 8, 31.2), ("e5m2", -16, 15, 25.1), ("mxfp8", -127, 127, 32.0), ("bf16", -133, 127, 52.4)]:
        schemes.append({"scheme": name, "qsnr_db": q, "window": {"min_exp": lo, "max_exp": hi}})
    schemes.append({"scheme": "fp16-no-scale", "qsnr_db": "nan", "window": {"min_exp": -24, "max_exp": 15}})
    exps = list(range(-30, 6))
    analyze = envelope("analyze", {"input": "grads.npy"}, {
        "schemes": schemes,
        "exponent_histogram": {"exponent": exps, "count": [int(1000 * math.exp(-((e + 12) / 5) ** 2)) for e in exps]}})
    gemm = envelope("gemm", {"m": 64, "n": 64}, {"sweep": [
        {"model": m, "k": k, "rel_error": c * k ** p} for m, c, p in [("fp32-seq", 6e-8, 1.0), ("pairwise", 6e-8, 0.5), ("h100-fp8-fast", 2e-5, 0.8)]
        for k in (64, 256, 1024, 4096, 16384)]})
    variants = []
    for recipe, gap in [("bf16-amp", 1e-3), ("fp16-amp", 3e-4), ("fp8-delayed", 5e-3)]:
        for seed in range(3):
            variants.append({"recipe": recipe, "seed": seed, "series": {"log_every": 1, "total_steps": 200, "series": {
                "loss": series(lambda s: 2.5 * math.exp(-s / 80) + 0.3 + 0.01 * seed),
                "loss_gap": series(lambda s: gap * (1 + s / 50) * (1 + 0.1 * seed)),
                "local_error": series(lambda s: gap / 10 * (1 + 0.05 * seed)),
                "drift": series(lambda s: gap * 1e-2 * math.exp(s / 40)),
                "underflow_fraction": series(lambda s: 0.001 * s / 200 if recipe == "fp16-amp" else 0.0),
                "loss_scale": series(lambda s: 65536.0 / (2 ** (s // 50)) if recipe == "fp16-amp" else 1.0),
                "skipped_steps": series(lambda s: float(s // 50))}}})
    train = envelope("train", {"steps": 200}, {"variants": variants, "chaos_floor": series(lambda s: 1e-7 * math.exp(s / 40))})
    allreduce = envelope("allreduce", {"dtype": "bf16"}, {"sweep": [
        {"workers": w, "micro_batches": mb, "rel_error": 4e-3 * math.log2(w + 1) * (1 + 0.2 * mb)} for w in (1, 2, 4, 8, 16, 64) for mb in (1, 4, 16)]})
    return {"analyze": analyze, "gemm": gemm, "train": train, "allreduce": allreduce}


failures = 0
subprocess.run([precsim, "formats", "--deterministic", "--out", os.path.join(out, "formats.json")], check=True, stdout=subprocess.DEVNULL)
for kind, doc in synthetic().items():
    errors = list(validator.iter_errors(doc))
    for e in errors[:3]:
        print(f"FAIL synthetic {kind} report: {'/'.join(map(str, e.path))}: {e.message[:200]}")
    failures += bool(errors)
    with open(os.path.join(out, f"{kind}.json"), "w") as f:
        json.dump(doc, f)

plan = {"formats": ("formats.json", ["formats_windows.png", "formats_grids.png"]),
        "analyze": ("analyze.json", ["analyze_qsnr.png", "analyze_histogram.png"]),
        "gemm": ("gemm.json", ["gemm_error_vs_k.png"]),
        "training": ("train.json", ["training.png"]),
        "parallel": ("allreduce.json", ["parallel_error.png"])}
notebooks = sorted(f[:-6] for f in os.listdir(here) if f.endswith(".ipynb"))
for name in notebooks:
    if name not in plan:
        print(f"FAIL {name}.ipynb has no reports to run on (add it to run_notebooks.py)")
        failures += 1
        continue
    report, figures = plan[name]
    fig_dir = os.path.join(out, "figures")
    for fig in figures:
        if os.path.exists(os.path.join(fig_dir, fig)):
            os.remove(os.path.join(fig_dir, fig))
    os.environ["PRECSIM_REPORTS"] = os.path.join(out, report)
    os.environ["PRECSIM_FIG_DIR"] = fig_dir
    nb = nbformat.read(os.path.join(here, f"{name}.ipynb"), as_version=4)
    try:
        NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": here}}).execute()
    except Exception as e:  # the cell's traceback names the problem
        print(f"FAIL {name}.ipynb: {str(e)[-1500:]}")
        failures += 1
        continue
    for fig in figures:
        path = os.path.join(fig_dir, fig)
        size = os.path.getsize(path) if os.path.exists(path) else 0
        ok = size > 1000
        print(f"{'ok  ' if ok else 'FAIL'} {name}.ipynb -> {path} ({size} bytes)")
        failures += not ok
print(f"{len(notebooks) - failures if failures <= len(notebooks) else 0} passed, {failures} failed")
sys.exit(1 if failures else 0)
