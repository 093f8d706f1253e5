"""The Python section of scripts/bench.sh: precsim.quantize on 2^24 float32 from Python against the
thinnest call of the same C++ kernel (the bare binding) and against quantize_bench's C++ figure from
the same run when there is one; against ml_dtypes' astype round trip; precsim.torch.Linear under
bf16-amp (forward and backward, 1024x1024, batch 256) against torch's own float32 nn.Linear; a
Hugging Face Llama training step under precsim.torch.emulate (bf16-amp, mxfp8, the h100
accumulation model) against torch's own FP32 step, one thread each; and
np.copyto of the same array, the memory-bandwidth floor of any one-pass quantizer.
Every ratio's two sides are measured interleaved (one call of each in turn, REPS rounds), so that
a change of the machine's load reaches both; each side's fastest round counts (the best estimate on
a busy machine). The load average at the start and the end goes into the output.

scripts/bench.sh runs it under OMP_WAIT_POLICY=passive (torch's and precsim's OpenMP teams share the
cores; the output records the policy).

usage: bench_python.py OUT_JSON [QUANTIZE_BENCH_JSON]"""
import json
import os
import sys
import time

import numpy as np

import precsim

REPS = int(os.environ.get("PRECSIM_BENCH_REPS", "5"))


def interleaved(fns, reps=REPS):
    """{name: fastest seconds} of the calls in `fns`, run one after another in each of `reps` rounds;
    the order rotates from round to round, so that no call always follows the same one (the first
    two-thread call after a one-thread one pays for waking the team)."""
    best = {k: float("inf") for k in fns}
    keys = list(fns)
    for r in range(reps):
        for k in keys[r % len(keys):] + keys[:r % len(keys)]:
            fn = fns[k]
            t = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t)
    return best


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
    for fmt, ml in (("e4m3", "float8_e4m3fn"), ("e2m1", "float4_e2m1fn"), ("bf16", "bfloat16")):
        f, o = precsim.Format(fmt), precsim.QuantOptions()
        fns = {"python_ns": lambda: precsim.quantize(x, fmt, out=y),
               "binding_ns": lambda: precsim._precsim.quantize_f32(f, x, y, o),
               # The memory floor: one read and one write of every element, any one-pass quantizer's.
               "copy_ns": lambda: np.copyto(y, x)}
        if ml_dtypes is not None:
            dt = getattr(ml_dtypes, ml)
            fns["ml_dtypes_ns"] = lambda: x.astype(dt).astype(np.float32)
        # ml_dtypes runs on one thread: precsim on one thread too, for the like-for-like ratio.
        fns["python_1t_ns"] = lambda: (precsim.set_num_threads(1), precsim.quantize(x, fmt, out=y),
                                       precsim.set_num_threads(threads))
        row = {k: v / n * 1e9 for k, v in interleaved(fns).items()}
        row.update(format=fmt, threads=threads, cxx_bench_ns=cxx_ns(qbench, fmt, threads))
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

    t = interleaved({"torch_fp32_s": lambda: step(ref), "precsim_bf16_amp_s": lambda: step(emu)})
    res["linear"] = {**t, "torch_threads": torch.get_num_threads(), "precsim_threads": precsim.get_num_threads()}


def emulate_rows(res):
    """A Hugging Face Llama training step (forward, loss, backward) under precsim.torch.emulate, every
    product intercepted, against the same step in torch's FP32; torch and precsim on one thread."""
    try:
        import torch
        import transformers

        import precsim.torch as pt
    except ImportError as e:
        res["emulate"] = {"skipped": str(e)}
        return
    threads = torch.get_num_threads(), precsim.get_num_threads()
    torch.set_num_threads(1)
    precsim.set_num_threads(1)
    torch.manual_seed(0)
    c = transformers.LlamaConfig(num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4, hidden_size=256,
                                 intermediate_size=688, vocab_size=1024, max_position_embeddings=128)
    model = transformers.LlamaForCausalLM(c)
    ids = torch.randint(0, 1024, (4, 64))

    def step():
        model.zero_grad()
        model(input_ids=ids, labels=ids).loss.backward()

    h100 = precsim.Recipe.preset("bf16-amp").replace(gemm={p: {"accum": "h100"} for p in ("forward", "dgrad", "wgrad")})
    rows = {"torch_fp32_s": interleaved({"s": step}, 3)["s"]}
    for name, recipe in (("bf16-amp", "bf16-amp"), ("mxfp8", "mxfp8"), ("bf16-amp+h100", h100)):
        with pt.emulate(model, recipe):
            step()  # the engines of each product are made on the first step
            rows[name] = interleaved({"s": step}, 3)["s"]
    torch.set_num_threads(threads[0])
    precsim.set_num_threads(threads[1])
    res["emulate"] = rows


def print_emulate(rows):
    if "skipped" in rows:
        print(f"\nprecsim.torch.emulate: skipped ({rows['skipped']})")
        return
    print("\n## Python: a Llama training step under emulate (2 layers, 256 wide, 4 x 64 tokens, one thread)\n")
    print("| step | seconds | x torch float32 |\n|---|---|---|")
    for k, v in rows.items():
        print(f"| {'torch float32' if k == 'torch_fp32_s' else 'emulate ' + k} | {v:.3f} | "
              f"{v / rows['torch_fp32_s']:.2f} |")


def main():
    out, qbench = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
    res = {"quantize": [], "loadavg_start": os.getloadavg(), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")}
    quantize_rows(res, qbench)
    linear_rows(res)
    emulate_rows(res)
    res["loadavg_end"] = os.getloadavg()
    json.dump(res, open(out, "w"), indent=1)
    load = " / ".join(f"{a:.1f}" for a in res["loadavg_start"]) + " at the start, " + \
        " / ".join(f"{a:.1f}" for a in res["loadavg_end"]) + " at the end"
    print(f"## Python: precsim.quantize on 2^24 float32 ({res['quantize'][0]['threads']} threads), ns/element\n")
    print(f"Load average (1/5/15 min): {load}; OMP_WAIT_POLICY={res['omp_wait_policy'] or '(unset)'}; "
          "each row's columns measured interleaved.\n")
    print("| format | precsim.quantize | bare binding | x binding | C++ quantize_bench | x C++ | np.copyto | "
          "ml_dtypes astype round trip | ml_dtypes / precsim | precsim 1 thread | ml_dtypes / precsim 1 thread |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in res["quantize"]:
        c = r["cxx_bench_ns"]
        ml = r.get("ml_dtypes_ns")
        print(f"| {r['format']} | {r['python_ns']:.3f} | {r['binding_ns']:.3f} | {r['python_ns'] / r['binding_ns']:.2f} | "
              + (f"{c:.3f} | {r['python_ns'] / c:.2f}" if c else "- | -") + f" | {r['copy_ns']:.3f} | "
              + (f"{ml:.2f} | {ml / r['python_ns']:.1f}" if ml else "- | -") + f" | {r['python_1t_ns']:.3f} | "
              + (f"{ml / r['python_1t_ns']:.1f}" if ml else "-") + " |")
    lin = res["linear"]
    if "skipped" in lin:
        print(f"\nprecsim.torch.Linear: skipped ({lin['skipped']})")
    else:
        print(f"\n## Python: Linear 1024x1024, batch 256, forward + backward, interleaved (torch "
              f"{lin['torch_threads']} threads, precsim {lin['precsim_threads']})\n")
        print("| layer | seconds | x torch float32 |\n|---|---|---|")
        print(f"| torch.nn.Linear float32 | {lin['torch_fp32_s']:.4f} | 1.00 |")
        print(f"| precsim.torch.Linear bf16-amp | {lin['precsim_bf16_amp_s']:.4f} | "
              f"{lin['precsim_bf16_amp_s'] / lin['torch_fp32_s']:.2f} |")
    print_emulate(res["emulate"])


main()
