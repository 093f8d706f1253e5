#!/usr/bin/python3
"""Runs every notebook headless (nbclient) on reports the CLI writes in the same run (small runs
of formats, analyze, gemm, train, allreduce and sweep, validated against reports/schema first), and
checks that each figure was written and is not empty. The kernel is the Python that runs this
script (ctest: the project venv, whose NumPy 2 needs its own matplotlib and scipy), not the
system's "python3" kernelspec (/usr/bin/python3): a kernelspec of sys.executable is written under
OUT_DIR, and a first cell checks that the kernel really is that interpreter.

usage: run_notebooks.py PRECSIM OUT_DIR
"""
import json
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
kernel_dir = os.path.join(out, "jupyter", "kernels", "precsim-run")
os.makedirs(kernel_dir, exist_ok=True)
with open(os.path.join(kernel_dir, "kernel.json"), "w") as f:
    json.dump({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
               "display_name": "precsim run_notebooks", "language": "python"}, f)
os.environ["JUPYTER_PATH"] = os.path.join(out, "jupyter") + os.pathsep + os.environ.get("JUPYTER_PATH", "")
KERNEL_CHECK = nbformat.v4.new_code_cell(
    f"import sys, matplotlib\nassert sys.executable == {sys.executable!r}, f'kernel runs {{sys.executable}}'")
schema = json.load(open(os.path.join(here, "..", "reports", "schema", "precsim.report.schema.json")))
validator = jsonschema.Draft202012Validator(schema)


def cli(*args):
    subprocess.run([precsim, *args, "--deterministic"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


failures = 0
train_cfg = os.path.join(out, "train-config.json")
with open(train_cfg, "w") as f:
    json.dump({"steps": 60, "batch": 32, "seeds": 2, "shadow_every": 5, "recipes": ["fp32", "bf16-amp", "fp16-amp", "mxfp4"],
               "data": {"kind": "gaussian-mixture", "features": 16, "classes": 4, "train_size": 512, "heldout_size": 128},
               "model": {"hidden": [32]}}, f)
cli("formats", "--out", os.path.join(out, "formats.json"))
cli("analyze", "--dist", "lognormal", "--count", "16384", "--formats", "e4m3,e5m2,mxfp8_e4m3,nvfp4,bf16",
    "--out", os.path.join(out, "analyze.json"))
cli("gemm", "--m", "8", "--n", "8", "--sweep-k", "64,256,1024", "--model", "fp32-seq,pairwise,h100-fp8-fast",
    "--a-format", "e4m3", "--b-format", "e4m3", "--out", os.path.join(out, "gemm.json"))
cli("train", "--config", train_cfg, "--out", os.path.join(out, "train.json"))
# A transformer's train report has the MLP's shape plus per-block series: the same notebook plots it.
cli("train", "--experiment", "tiny-gpt", "--steps", "20", "--out", os.path.join(out, "tiny-gpt.json"))
# Attribution by layer x role of mxfp4 on the small MLP (2 layers x 4 roles), ranked by local error
# (30 steps leave the held-out loss gap inside the seed noise).
cli("attribute", "--config", train_cfg, "--recipe", "mxfp4", "--unit", "layer-role", "--steps", "30", "--metric", "local_grad_rel_err",
    "--out", os.path.join(out, "attribute.json"))
cli("allreduce", "-w", "2,4,8,16", "-n", "4096", "-f", "bf16,fp32", "-a", "ring,tree", "--out", os.path.join(out, "allreduce.json"))
# The shipped precision-scaling sweep, cut to 4 short units (2 widths x 2 seeds).
with open(os.path.join(here, "sweep_kumar.json")) as f:
    kumar = json.load(f)
kumar["base"]["steps"] = 60
kumar["grid"] = [{"path": "model.hidden", "values": [[4], [16]]}, {"path": "seed", "values": [1, 2]}]
with open(os.path.join(out, "sweep-plan.json"), "w") as f:
    json.dump(kumar, f)
subprocess.run([precsim, "sweep", os.path.join(out, "sweep-plan.json"), "--out-dir", os.path.join(out, "sweep"), "--jobs", "2"],
               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for name in ("formats", "analyze", "gemm", "train", "tiny-gpt", "attribute", "allreduce", "sweep/sweep"):
    with open(os.path.join(out, f"{name}.json")) as f:
        errors = list(validator.iter_errors(json.load(f)))
    for e in errors[:3]:
        print(f"FAIL {name} report: {'/'.join(map(str, e.path))}: {e.message[:200]}")
    failures += bool(errors)

plan = {"formats": [("formats.json", ["formats_windows.png", "formats_grids.png"])],
        "analyze": [("analyze.json", ["analyze_qsnr.png", "analyze_histogram.png"])],
        "gemm": [("gemm.json", ["gemm_error_vs_k.png"])],
        "training": [("train.json", ["training.png"]), ("tiny-gpt.json", ["training.png"])],
        "parallel": [("allreduce.json", ["parallel_error.png"])],
        "attribute": [("attribute.json", ["attribute_heatmap.png"])],
        "sweep": [("sweep/sweep.json", ["sweep_bits.png", "sweep_width.png", "sweep_fit.png"])]}
notebooks = sorted(f[:-6] for f in os.listdir(here) if f.endswith(".ipynb"))
runs = 0
for name in notebooks:
    if name not in plan:
        print(f"FAIL {name}.ipynb has no reports to run on (add it to run_notebooks.py)")
        failures += 1
        continue
    for report, figures in plan[name]:
        runs += 1
        fig_dir = os.path.join(out, "figures")
        for fig in figures:
            if os.path.exists(os.path.join(fig_dir, fig)):
                os.remove(os.path.join(fig_dir, fig))
        os.environ["PRECSIM_REPORTS"] = os.path.join(out, report)
        os.environ["PRECSIM_FIG_DIR"] = fig_dir
        nb = nbformat.read(os.path.join(here, f"{name}.ipynb"), as_version=4)
        nb.cells.insert(0, KERNEL_CHECK)
        try:
            NotebookClient(nb, timeout=120, kernel_name="precsim-run", resources={"metadata": {"path": here}}).execute()
        except Exception as e:  # the cell's traceback names the problem
            print(f"FAIL {name}.ipynb on {report}: {str(e)[-1500:]}")
            failures += 1
            continue
        for fig in figures:
            path = os.path.join(fig_dir, fig)
            size = os.path.getsize(path) if os.path.exists(path) else 0
            ok = size > 1000
            print(f"{'ok  ' if ok else 'FAIL'} {name}.ipynb on {report} -> {path} ({size} bytes)")
            failures += not ok
print(f"{max(runs - failures, 0)} notebook runs passed, {failures} failed")
sys.exit(1 if failures else 0)
