"""PyTorch beside precsim in one run, one thread (scripts/bench.sh runs it with the venv's Python).

Training step: the MLP 512-1024-1024-10 of bench/train_bench.cpp (ReLU, cross-entropy, AdamW
lr 1e-3, batch 256) in torch float32 and under bf16 autocast, against every train_bench case. The
rounds interleave the peer and precsim (torch, then one repetition of train_bench, R times), so
both see the same load; each ratio is the median over rounds of (precsim / torch float32) in the
same round, in wall time and in CPU time (the steadier one on a loaded machine). GEMM: torch.matmul 2048^3 float32 (OpenBLAS, the GEMM targets' peer, runs inside
gemm_bench itself). Load average is recorded with every round.

usage: bench_peers.py TRAIN_BENCH_EXE OUT_JSON [ROUNDS]"""
import json
import os
import statistics
import subprocess
import sys
import time

import torch

STEPS = 7  # timed torch steps per round (median), after one warm-up step


def median_time(fn, n):
    """Median wall and CPU seconds of n calls (torch runs on this thread: one thread)."""
    fn()
    wall, cpu = [], []
    for _ in range(n):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu)


def mlp_step(autocast):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    x = torch.randn(256, 512)
    y = torch.arange(256) % 10

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return step


def train_bench_ms(exe):
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
    out = subprocess.run([exe, "--benchmark_repetitions=1", "--benchmark_format=json"], env=env, check=True,
                         capture_output=True, text=True).stdout
    res = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("run_type", "iteration") == "iteration":
            scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
            res[b["run_name"].split("/", 1)[1]] = (b["real_time"] * scale, b["cpu_time"] * scale)
    return res


def main():
    exe, path = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    torch.set_num_threads(1)
    fp32, bf16 = mlp_step(False), mlp_step(True)
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    rows = []
    for _ in range(rounds):
        r = {"load": os.getloadavg()[0]}
        for key, fn, n in (("torch_fp32", fp32, STEPS), ("torch_bf16_autocast", bf16, STEPS),
                           ("torch_matmul_2048", lambda: torch.matmul(a, b), 3)):
            r[key + "_ms"], r[key + "_cpu_ms"] = (1e3 * t for t in median_time(fn, n))
        r["precsim_ms"] = train_bench_ms(exe)
        rows.append(r)
    med = lambda xs: statistics.median(xs)
    summary = {"torch": torch.__version__, "rounds": rows,
               "load": [min(r["load"] for r in rows), max(r["load"] for r in rows)], "precsim": {}}
    for key in ("torch_fp32_ms", "torch_bf16_autocast_ms", "torch_matmul_2048_ms", "torch_fp32_cpu_ms",
                "torch_bf16_autocast_cpu_ms", "torch_matmul_2048_cpu_ms"):
        summary[key] = med([r[key] for r in rows])
    # Wall-time and CPU-time ratios: on a loaded machine the CPU-time one is the steadier.
    for case in rows[0]["precsim_ms"]:
        summary["precsim"][case] = {
            "ms": med([r["precsim_ms"][case][0] for r in rows]),
            "cpu_ms": med([r["precsim_ms"][case][1] for r in rows]),
            "x_torch_fp32": med([r["precsim_ms"][case][0] / r["torch_fp32_ms"] for r in rows]),
            "x_torch_fp32_cpu": med([r["precsim_ms"][case][1] / r["torch_fp32_cpu_ms"] for r in rows])}
    json.dump(summary, open(path, "w"), indent=1)
    lo, hi = summary["load"]
    print(f"## Training step against PyTorch {torch.__version__}: MLP 512-1024-1024-10, batch 256, one thread, "
          f"median of {rounds} interleaved rounds (load average {lo:.1f}-{hi:.1f})\n")
    print("| step | ms | CPU ms | x torch float32 | x torch float32 (CPU) |\n|---|---|---|---|---|")
    print(f"| torch float32 | {summary['torch_fp32_ms']:.1f} | {summary['torch_fp32_cpu_ms']:.1f} | 1.00 | 1.00 |")
    print(f"| torch bf16 autocast | {summary['torch_bf16_autocast_ms']:.1f} | {summary['torch_bf16_autocast_cpu_ms']:.1f} | "
          f"{med([r['torch_bf16_autocast_ms'] / r['torch_fp32_ms'] for r in rows]):.2f} | "
          f"{med([r['torch_bf16_autocast_cpu_ms'] / r['torch_fp32_cpu_ms'] for r in rows]):.2f} |")
    for case, v in summary["precsim"].items():
        print(f"| precsim {case} | {v['ms']:.1f} | {v['cpu_ms']:.1f} | {v['x_torch_fp32']:.2f} | {v['x_torch_fp32_cpu']:.2f} |")
    print(f"\ntorch.matmul 2048^3 float32, one thread: {summary['torch_matmul_2048_ms']:.0f} ms "
          f"({summary['torch_matmul_2048_cpu_ms']:.0f} ms CPU)")


main()
