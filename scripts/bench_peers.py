"""PyTorch beside precsim in one run, one thread (scripts/bench.sh runs it with the venv's Python).

Training step: the MLP 512-1024-1024-10 of bench/train_bench.cpp (ReLU, cross-entropy, AdamW
lr 1e-3, batch 256) in torch float32 and under bf16 autocast, against every train_bench case. The
rounds interleave the peer and precsim (torch, then one repetition of train_bench, R times), so
both see the same load; each ratio is the median over rounds of (precsim / torch float32) in the
same round, in wall time and in CPU time (the steadier one on a loaded machine). GEMM: torch.matmul 2048^3 float32 (OpenBLAS, the GEMM targets' peer, runs inside
gemm_bench itself). Load average is recorded with every round.

Transformer step (when TRANSFORMER_BENCH_EXE is given): the GPT-2-shaped model of
bench/transformer_bench.cpp (2 pre-LayerNorm blocks, width 64, 4 heads, GELU-tanh MLP of 256, tied
output projection, vocabulary 12, 16 sequences of 32 tokens, token-mean cross-entropy, AdamW) as a
torch module, float32 and bf16 autocast, against every transformer_bench case in the same rounds.

usage: bench_peers.py TRAIN_BENCH_EXE OUT_JSON [ROUNDS [TRANSFORMER_BENCH_EXE]]"""
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


class Block(torch.nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(c), torch.nn.LayerNorm(c)
        self.qkv, self.proj = torch.nn.Linear(c, 3 * c), torch.nn.Linear(c, c)
        self.fc, self.fcproj = torch.nn.Linear(c, 4 * c), torch.nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(c, dim=2))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        return x + self.fcproj(torch.nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(torch.nn.Module):
    def __init__(self, vocab=12, context=32, c=64, heads=4, layers=2):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(vocab, c), torch.nn.Embedding(context, c)
        self.blocks = torch.nn.ModuleList(Block(c, heads) for _ in range(layers))
        self.lnf = torch.nn.LayerNorm(c)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        return self.lnf(x) @ self.wte.weight.t()  # tied output projection


def transformer_step(autocast):
    torch.manual_seed(1)
    model = Gpt()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    tokens = torch.randint(0, 12, (16, 32))
    targets = torch.randint(0, 12, (16, 32))

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(logits.float().view(-1, 12), targets.view(-1))
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
            res[b["run_name"].split("/", 1)[-1]] = (b["real_time"] * scale, b["cpu_time"] * scale)
    return res


def main():
    exe, path = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    tr_exe = sys.argv[4] if len(sys.argv) > 4 else None
    torch.set_num_threads(1)
    fp32, bf16 = mlp_step(False), mlp_step(True)
    tr32, tr16 = transformer_step(False), transformer_step(True)
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    rows = []
    for _ in range(rounds):
        r = {"load": os.getloadavg()[0]}
        for key, fn, n in (("torch_fp32", fp32, STEPS), ("torch_bf16_autocast", bf16, STEPS),
                           ("torch_matmul_2048", lambda: torch.matmul(a, b), 3)):
            r[key + "_ms"], r[key + "_cpu_ms"] = (1e3 * t for t in median_time(fn, n))
        r["precsim_ms"] = train_bench_ms(exe)
        if tr_exe:
            for key, fn in (("torch_tr_fp32", tr32), ("torch_tr_bf16_autocast", tr16)):
                r[key + "_ms"], r[key + "_cpu_ms"] = (1e3 * t for t in median_time(fn, 5 * STEPS))
            r["precsim_tr_ms"] = train_bench_ms(tr_exe)
        rows.append(r)
    lo, hi = min(r["load"] for r in rows), max(r["load"] for r in rows)
    summary = {"torch": torch.__version__, "rounds": rows, "load": [lo, hi]}
    summary["mlp"] = step_table(rows, "torch", "precsim_ms",
                                f"Training step against PyTorch {torch.__version__}: MLP 512-1024-1024-10, batch 256, "
                                f"one thread, median of {rounds} interleaved rounds (load average {lo:.1f}-{hi:.1f})")
    summary["torch_matmul_2048_ms"] = statistics.median(r["torch_matmul_2048_ms"] for r in rows)
    summary["torch_matmul_2048_cpu_ms"] = statistics.median(r["torch_matmul_2048_cpu_ms"] for r in rows)
    print(f"\ntorch.matmul 2048^3 float32, one thread: {summary['torch_matmul_2048_ms']:.0f} ms "
          f"({summary['torch_matmul_2048_cpu_ms']:.0f} ms CPU)\n")
    if tr_exe:
        summary["transformer"] = step_table(rows, "torch_tr", "precsim_tr_ms",
                                            "Transformer step against PyTorch: 2 blocks, width 64, 4 heads, 16 x 32 "
                                            "tokens, one thread, same rounds")
    json.dump(summary, open(path, "w"), indent=1)


def step_table(rows, torch_key, precsim_key, title):
    """Medians over the rounds and the per-round ratios to torch's float32 step, in wall time and in
    CPU time (on a loaded machine the CPU-time one is the steadier); prints the table."""
    med = statistics.median
    fp32, bf16 = torch_key + "_fp32", torch_key + "_bf16_autocast"
    t = {"precsim": {}}
    for key in (fp32, bf16):
        t[key + "_ms"] = med([r[key + "_ms"] for r in rows])
        t[key + "_cpu_ms"] = med([r[key + "_cpu_ms"] for r in rows])
    for case in rows[0][precsim_key]:
        t["precsim"][case] = {
            "ms": med([r[precsim_key][case][0] for r in rows]),
            "cpu_ms": med([r[precsim_key][case][1] for r in rows]),
            "x_torch_fp32": med([r[precsim_key][case][0] / r[fp32 + "_ms"] for r in rows]),
            "x_torch_fp32_cpu": med([r[precsim_key][case][1] / r[fp32 + "_cpu_ms"] for r in rows])}
    print(f"## {title}\n")
    print("| step | ms | CPU ms | x torch float32 | x torch float32 (CPU) |\n|---|---|---|---|---|")
    print(f"| torch float32 | {t[fp32 + '_ms']:.1f} | {t[fp32 + '_cpu_ms']:.1f} | 1.00 | 1.00 |")
    print(f"| torch bf16 autocast | {t[bf16 + '_ms']:.1f} | {t[bf16 + '_cpu_ms']:.1f} | "
          f"{med([r[bf16 + '_ms'] / r[fp32 + '_ms'] for r in rows]):.2f} | "
          f"{med([r[bf16 + '_cpu_ms'] / r[fp32 + '_cpu_ms'] for r in rows]):.2f} |")
    for case, v in t["precsim"].items():
        print(f"| precsim {case} | {v['ms']:.1f} | {v['cpu_ms']:.1f} | {v['x_torch_fp32']:.2f} | {v['x_torch_fp32_cpu']:.2f} |")
    return t


main()
