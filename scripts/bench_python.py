"""The Python section of scripts/bench.sh: precsim.quantize on 2^24 float32 from Python against the
thinnest call of the same C++ kernel (the bare binding) and against quantize_bench's C++ figure from
the same run when there is one; against ml_dtypes' astype round trip; precsim.torch.Linear under
bf16-amp (forward and backward, 1024x1024, batch 256) against torch's own float32 nn.Linear; and
np.copyto of the same array, the memory-bandwidth floor of any one-pass quantizer.
Fastest of the repetitions (the best estimate on a busy machine).

usage: bench_python.py OUT_JSON [QUANTIZE_BENCH_JSON]"""
import json
import os
import sys
import time

import numpy as np

import precsim

REPS = int(os.environ.get("PRECSIM_BENCH_REPS", "5"))


def best(fn, reps=REPS):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def cxx_ns(path, fmt, threads):
    """quantize_bench's fastest ns/element for fmt, nearest-even, normal inputs, at `threads`."""
    if not path or not os.path.exists(path):
        return None
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") == "min" and b["run_name"] == f"quantize/{fmt}/nearest-even/normal/threads:{threads}":
            return b["ns_per_elem"] * 1e9
    return None


def quantize_rows(res, qbench):
    n = 1 << 24
    x = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
    y = np.empty_like(x)
    threads = os.cpu_count()
    precsim.set_num_threads(threads)
    try:
        import ml_dtypes
    except ImportError:
        ml_dtypes = None
    # The memory floor: one read and one write of every element, what any one-pass quantizer costs.
    res["copy_ns"] = best(lambda: np.copyto(y, x)) / n * 1e9
    for fmt, ml in (("e4m3", "float8_e4m3fn"), ("e2m1", "float4_e2m1fn"), ("bf16", "bfloat16")):
        f, o = precsim.Format(fmt), precsim.QuantOptions()
        api = best(lambda: precsim.quantize(x, fmt, out=y)) / n * 1e9
        bare = best(lambda: precsim._precsim.quantize_f32(f, x, y, o)) / n * 1e9
        row = {"format": fmt, "threads": threads, "python_ns": api, "binding_ns": bare,
               "cxx_bench_ns": cxx_ns(qbench, fmt, threads)}
        if ml_dtypes is not None:
            dt = getattr(ml_dtypes, ml)
            row["ml_dtypes_ns"] = best(lambda: x.astype(dt).astype(np.float32), max(2, REPS // 2)) / n * 1e9
        res["quantize"].append(row)


def linear_rows(res):
    try:
        import torch

        import precsim.torch as pt
    except ImportError as e:
        res["linear"] = {"skipped": str(e)}
        return
    torch.manual_seed(0)
    x = torch.randn(256, 1024, requires_grad=True)
    g = torch.randn(256, 1024)
    ref = torch.nn.Linear(1024, 1024)
    emu = pt.Linear.from_linear(ref, "bf16-amp")

    def step(m):
        x.grad = None
        m.weight.grad = m.bias.grad = None
        m(x).backward(g)

    res["linear"] = {"torch_fp32_s": best(lambda: step(ref)), "precsim_bf16_amp_s": best(lambda: step(emu)),
                     "torch_threads": torch.get_num_threads()}


def main():
    out, qbench = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
    res = {"quantize": []}
    quantize_rows(res, qbench)
    linear_rows(res)
    json.dump(res, open(out, "w"), indent=1)
    print(f"## Python: precsim.quantize on 2^24 float32 ({res['quantize'][0]['threads']} threads), ns/element\n")
    print("| format | precsim.quantize | bare binding | x binding | C++ quantize_bench | x C++ | ml_dtypes astype round trip | ml_dtypes / precsim |")
    print("|---|---|---|---|---|---|---|---|")
    for r in res["quantize"]:
        c = r["cxx_bench_ns"]
        ml = r.get("ml_dtypes_ns")
        print(f"| {r['format']} | {r['python_ns']:.3f} | {r['binding_ns']:.3f} | {r['python_ns'] / r['binding_ns']:.2f} | "
              + (f"{c:.3f} | {r['python_ns'] / c:.2f}" if c else "- | -") + " | "
              + (f"{ml:.2f} | {ml / r['python_ns']:.1f}" if ml else "- | -") + " |")
    print(f"\nnp.copyto of the same array (one read, one write: the floor of a one-pass quantizer): "
          f"{res['copy_ns']:.3f} ns/element")
    lin = res["linear"]
    if "skipped" in lin:
        print(f"\nprecsim.torch.Linear: skipped ({lin['skipped']})")
    else:
        print(f"\n## Python: Linear 1024x1024, batch 256, forward + backward (torch {lin['torch_threads']} threads)\n")
        print("| layer | seconds | x torch float32 |\n|---|---|---|")
        print(f"| torch.nn.Linear float32 | {lin['torch_fp32_s']:.4f} | 1.00 |")
        print(f"| precsim.torch.Linear bf16-amp | {lin['precsim_bf16_amp_s']:.4f} | "
              f"{lin['precsim_bf16_amp_s'] / lin['torch_fp32_s']:.2f} |")


main()
