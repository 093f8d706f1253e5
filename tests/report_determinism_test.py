#!/usr/bin/python3
"""Reproducibility contract (docs/CONVENTIONS.md) for every command: two --deterministic runs give
byte-identical reports, on 1 thread and on 2; without --deterministic the digest of the results
is still the same on 1 and 2 threads (only the environment block differs). Training with the
transformer, split steps (micro-batches, SR and Kahan buffers), data parallelism (ring, FP32
accumulation, SyncBatchNorm) gives the same bytes on 1, 4 and 8 threads.

usage: report_determinism_test.py PRECSIM
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from checks import expect, finish  # noqa: E402

precsim = sys.argv[1]
def run(threads, args, deterministic):
    r = subprocess.run([precsim, "--threads", str(threads), *args, "--json", *(["--deterministic"] if deterministic else [])],
                       capture_output=True)
    if r.returncode != 0:
        raise SystemExit(f"precsim {' '.join(args)} exited {r.returncode}: {r.stderr.decode()[-500:]}")
    return r.stdout


with tempfile.TemporaryDirectory() as tmp:
    x = np.random.default_rng(3).standard_normal((64, 512)).astype(np.float32)
    npy = os.path.join(tmp, "x.npy")
    np.save(npy, x)
    cfg = os.path.join(tmp, "train.json")
    with open(cfg, "w") as f:
        json.dump({"steps": 12, "batch": 32, "seeds": 2, "shadow_every": 4, "recipes": ["fp32", "bf16-amp", "fp16-amp", "mxfp4"],
                   "data": {"kind": "gaussian-mixture", "features": 16, "classes": 4, "train_size": 512, "heldout_size": 128},
                   "model": {"hidden": [32]}}, f)
    train = ["train", "--config", cfg]
    commands = {
        "formats": ["formats"],
        "quantize": ["quantize", "-f", "e4m3", "--rounding", "stochastic", "--seed", "9", "--input", npy],
        "analyze generated": ["analyze", "--dist", "student-t:df=3", "--count", "200000", "--formats", "e4m3,mxfp4,nvfp4,fp8_e4m3:block128"],
        "analyze npy": ["analyze", "--input", npy, "--formats", "bf16,mxfp8_e4m3"],
        "dot": ["dot", "--model", "h100", "--a", "1,0x1p-12,3", "--b", "1,1,-1"],
        "gemm": ["gemm", "--m", "48", "--n", "40", "--sweep-k", "64,256", "--model", "fp32-seq,pairwise,h100", "--sample", "500"],
        "allreduce": ["allreduce", "-w", "3,8", "-n", "20000", "-f", "bf16,e4m3", "-a", "ring,tree", "--average", "nccl-avg"],
        "train": train,
        "demo": ["demo", "--steps", "2"],
    }
    gpt = os.path.join(tmp, "gpt.json")
    with open(gpt, "w") as f:
        json.dump({"steps": 4, "batch": 16, "shadow_every": 2,
                   "recipes": ["bf16-amp", "fp8-delayed", "ddp8-bf16-ring", "accum16-bf16-sr"],
                   "model": {"type": "transformer", "layers": 1, "heads": 2, "width": 16, "context": 16},
                   "data": {"kind": "sort"}}, f)
    split = os.path.join(tmp, "split.json")
    with open(split, "w") as f:
        json.dump({"steps": 6, "batch": 64, "shadow_every": 3,
                   "recipes": ["ddp8-bf16-ring", "ddp8-bf16-fp32acc", "accum16-bf16-sr", "accum16-bf16-kahan",
                               "ddp8-bn-sync"],
                   "data": {"features": 8, "classes": 4, "train_size": 256, "heldout_size": 64},
                   "model": {"hidden": [16], "batchnorm": True}}, f)
    for name, args in {"train transformer": ["train", "--config", gpt], "train split": ["train", "--config", split]}.items():
        one, four, eight = (run(t, args, True) for t in (1, 4, 8))
        expect(one == four == eight, f"{name}: --deterministic on 1, 4 and 8 threads is byte-identical")
    for name, args in commands.items():
        a = run(1, args, True)
        b = run(2, args, True)
        c = run(2, args, True)
        expect(b == c, f"{name}: two --deterministic runs on 2 threads are byte-identical")
        expect(a == b, f"{name}: --deterministic on 1 and 2 threads is byte-identical")
        d1, d2 = json.loads(run(1, args, False)), json.loads(run(2, args, False))
        expect(d1["digest"] == d2["digest"] == json.loads(a)["digest"], f"{name}: the same digest on 1 and 2 threads")
        expect(d1["environment"]["threads"] == 1 and d2["environment"]["threads"] == 2,
               f"{name}: the environment block records the thread count")

finish()
