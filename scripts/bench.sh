#!/usr/bin/env bash
# Builds precsim (Release) if needed, runs every benchmark executable that exists (bench/*_bench)
# with JSON output into <build>/bench-results/ (gemm_bench holds OpenBLAS, its peer), runs PyTorch's
# training step beside train_bench (scripts/bench_peers.py), times the end-to-end `precsim quantize` on a
# 2^24-element .npy beside `cat`, and prints a summary with ratios to memcpy from the same run.
#   scripts/bench.sh                  everything
#   scripts/bench.sh quantize         only benchmarks whose executable name contains "quantize"
#   scripts/bench.sh python           only the Python section (scripts/bench_python.py)
#   scripts/bench.sh peers            only PyTorch's training steps beside train_bench and transformer_bench
#                                     (bench_peers.py)
#   scripts/bench.sh gemm             the GEMM kernels against OpenBLAS, each at 1 and 2 threads (the
#                                     2-thread speed-up column; quantize_bench's table has one too)
#   PRECSIM_BUILD_DIR=dir scripts/bench.sh    build and run in dir instead of build/
#   PRECSIM_BENCH_REPS=N              repetitions per benchmark (default 5; the summary uses the
#                                     fastest, the best estimate on a busy machine)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
build="${PRECSIM_BUILD_DIR:-build}"
reps="${PRECSIM_BENCH_REPS:-5}"
only="${1:-}"
py=/usr/bin/python3
out="$build/bench-results"

scripts/setup.sh
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
mkdir -p "$out"

# Each benchmark is built on its own, so one that does not build yet never stops the others.
ran=()
for src in bench/*_bench.cpp; do
  name="$(basename "$src" .cpp)"
  [[ -n "$only" && "$name" != *"$only"* ]] && continue
  if ! cmake --build "$build" --target "$name" -j "$(nproc)" >"$out/$name.build.log" 2>&1; then
    echo "bench: $name does not build (see $out/$name.build.log); skipped" >&2
    continue
  fi
  exe="$build/bench/$name"
  [ -x "$exe" ] || exe="$build/$name"
  if [ ! -x "$exe" ]; then
    echo "bench: $build/bench/$name not found; skipped" >&2
    continue
  fi
  echo "bench: running $name ($reps repetitions)" >&2
  # Interleaved repetitions: a peer in the same executable (gemm_bench's OpenBLAS) and precsim see
  # the same load.
  OMP_WAIT_POLICY=passive "$exe" --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true \
    --benchmark_enable_random_interleaving=true \
    --benchmark_out="$out/$name.json" --benchmark_out_format=json >/dev/null
  ran+=("$name")
done

# End to end: the CLI on a 2^24-element float32 .npy against cat of the same file.
e2e="$out/e2e.json"
rm -f "$e2e"
if [[ -z "$only" || "e2e" == *"$only"* || "quantize" == *"$only"* ]] &&
   cmake --build "$build" --target precsim -j "$(nproc)" >"$out/precsim.build.log" 2>&1; then
  echo "bench: end-to-end precsim quantize vs cat" >&2
  "$py" - "$build/precsim" "$out" "$e2e" <<'EOF'
import json, os, subprocess, sys, time
import numpy as np
cli, out, path = sys.argv[1:4]
x = os.path.join(out, "e2e_in.npy")
np.save(x, np.random.default_rng(1).standard_normal(1 << 24, dtype=np.float32))

def best(cmd, runs, stdout=subprocess.DEVNULL):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=stdout, stderr=subprocess.DEVNULL, shell=isinstance(cmd, str))
        times.append(time.perf_counter() - t)
    return min(times)

res = {"elements": 1 << 24, "bytes": os.path.getsize(x)}
res["cat_s"] = best(f"cat '{x}' > '{os.path.join(out, 'e2e_cat.npy')}'", 7)
# The same bytes written as precsim writes every file (docs/CONVENTIONS.md): a temporary file beside
# the target, fsynced, renamed onto it, the folder fsynced.
tmp, dst = os.path.join(out, ".e2e_cat.npy.tmp"), os.path.join(out, "e2e_cat.npy")
res["cat_durable_s"] = best(f"cat '{x}' > '{tmp}' && sync '{tmp}' && mv '{tmp}' '{dst}' && sync '{out}'", 7)
# The same bytes through one 64 MiB buffer, the shape of precsim's read-round-write (cat streams
# 128 KiB at a time).
res["dd_64m_s"] = best(f"dd if='{x}' of='{dst}' bs=64M status=none", 7)
for fmt, mode in [("e4m3", "nearest-even"), ("bf16", "nearest-even"), ("e4m3", "stochastic")]:
    y = os.path.join(out, "e2e_out.npy")
    res[f"precsim_quantize_{fmt}_{mode}_s"] = best(
        [cli, "quantize", "--format", fmt, "--rounding", mode, "--input", x, "--output", y], 7)
res["precsim_start_s"] = best([cli, "--help"], 20)
venv_py = "build/venv/bin/python"
if os.path.exists(venv_py):  # the peer a user would script: ml_dtypes in the project's venv
    y = os.path.join(out, "e2e_out.npy")
    code = ("import sys, numpy as np, ml_dtypes; x = np.load(sys.argv[1]); "
            "np.save(sys.argv[2], x.astype(ml_dtypes.float8_e4m3fn).astype(np.float32))")
    try:
        res["ml_dtypes_s"] = best([venv_py, "-c", code, x, y], 7)
    except subprocess.CalledProcessError:
        pass
json.dump(res, open(path, "w"), indent=1)
for f in ("e2e_in.npy", "e2e_cat.npy", "e2e_out.npy"):
    p = os.path.join(out, f)
    if os.path.exists(p):
        os.remove(p)
EOF
fi

# Summary: one table per benchmark file; quantize_bench rows get their ratio to memcpy.
"$py" - "$out" "$e2e" "${ran[@]+"${ran[@]}"}" <<'EOF'
import json, os, re, subprocess, sys
out, e2e, names = sys.argv[1], sys.argv[2], sys.argv[3:]
cpu = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
            if l.startswith("Model name")), "unknown CPU")
print(f"# precsim benchmarks on {cpu}, {os.cpu_count()} CPUs; fastest of the repetitions\n")
for name in names:
    doc = json.load(open(os.path.join(out, name + ".json")))
    rows = [b for b in doc["benchmarks"] if b.get("aggregate_name") == "min"] or \
           [b for b in doc["benchmarks"] if b.get("run_type") == "iteration"]
    ctx = doc["context"]
    print(f"## {name}  (load average {ctx.get('load_avg', '?')}, {ctx.get('num_cpus', '?')} CPUs"
          + "".join(f", {k} {ctx[k]}" for k in ("quantize_simd_target", "stats") if k in ctx) + ")\n")
    if name == "quantize_bench":
        # ns_per_elem is stored in seconds; CPU time is the main thread's, so shown for 1 thread.
        n = float(ctx.get("elements", 1 << 24))
        scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
        ns = lambda b: b["ns_per_elem"] * 1e9
        cpu = lambda b: b["cpu_time"] * scale[b["time_unit"]] / n
        threads = lambda b: re.search(r"threads:(\d+)", b["run_name"]).group(1)
        memcpy = {threads(b): b for b in rows if b["run_name"].startswith("memcpy")}
        label = lambda b: re.sub(r"/threads:\d+.*", "", b["run_name"])
        one = {label(b): b for b in rows if threads(b) == "1"}
        print("| benchmark | threads | ns/element | x memcpy | CPU ns/element (1 thread) | x memcpy (CPU) | 2 threads speed-up (target 1.8) |")
        print("|---|---|---|---|---|---|---|")
        for b in rows:
            t = threads(b)
            m = memcpy.get(t)
            ratio = f"{ns(b) / ns(m):.2f}" if m else "-"
            cpu_cols = f"{cpu(b):.3f} | {cpu(b) / cpu(m):.2f}" if t == "1" and m else "- | -"
            o = one.get(label(b))
            speedup = f"{ns(o) / ns(b):.2f}" if t != "1" and o else ""
            print(f"| {label(b)} | {t} | {ns(b):.3f} | {ratio} | {cpu_cols} | {speedup} |")
    elif name == "gemm_bench":
        # Median of the interleaved repetitions; ratio to OpenBLAS at the same size and threads (wall
        # and main-thread CPU time, the steadier on a loaded machine), and each kernel's 2-thread
        # speed-up over its own 1-thread wall time.
        med = {b["run_name"].replace("/real_time", ""): b for b in doc["benchmarks"] if b.get("aggregate_name") == "median"}
        print("| benchmark | ms (median) | CPU ms | x OpenBLAS | x OpenBLAS (CPU) | 2 threads speed-up (target 1.8) |")
        print("|---|---|---|---|---|---|")
        def key(n):  # OpenBLAS first, then each kernel by size and threads
            kernel, size, threads = re.match(r"BM_(\w+)/size:(\d+)/threads:(\d+)", n).groups()
            return (kernel != "OpenBlasSgemm", kernel, int(size), int(threads))
        for n in sorted(med, key=key):
            b = med[n]
            kernel, size, threads = re.match(r"BM_(\w+)/size:(\d+)/threads:(\d+)", n).groups()
            peer = med.get(f"BM_OpenBlasSgemm/size:{size}/threads:{threads}")
            one = med.get(f"BM_{kernel}/size:{size}/threads:1")
            ratio = f"{b['real_time'] / peer['real_time']:.2f} | {b['cpu_time'] / peer['cpu_time']:.2f}" if peer else "- | -"
            speedup = f"{one['real_time'] / b['real_time']:.2f}" if threads != "1" and one else ""
            print(f"| {kernel} {size}^3, {threads} thread(s) | {b['real_time']:.1f} | {b['cpu_time']:.1f} | {ratio} | {speedup} |")
    else:
        print("| benchmark | time | unit |\n|---|---|---|")
        for b in rows:
            print(f"| {b['run_name']} | {b['real_time']:.4g} | {b['time_unit']} |")
    print()
if os.path.exists(e2e):
    r = json.load(open(e2e))
    print(f"## end to end: precsim quantize --input x.npy --output y.npy, {r['elements']} float32 ({r['bytes'] / 2**20:.0f} MiB)\n")
    print("| command | seconds | x cat |\n|---|---|---|")
    print(f"| cat x.npy > y.npy | {r['cat_s']:.3f} | 1.00 |")
    if "cat_durable_s" in r:
        print(f"| cat to a temporary file, sync, mv onto y.npy, sync the folder (how precsim writes) | "
              f"{r['cat_durable_s']:.3f} | {r['cat_durable_s'] / r['cat_s']:.2f} |")
    if "dd_64m_s" in r:
        print(f"| dd bs=64M (one 64 MiB buffer) | {r['dd_64m_s']:.3f} | {r['dd_64m_s'] / r['cat_s']:.2f} |")
    for k, v in r.items():
        if k.startswith("precsim_quantize_"):
            print(f"| precsim quantize {k[len('precsim_quantize_'):-2].replace('_', ' ')} | {v:.3f} | {v / r['cat_s']:.2f} |")
    if "ml_dtypes_s" in r:
        print(f"| numpy load, ml_dtypes float8_e4m3fn astype and back, save | {r['ml_dtypes_s']:.3f} | {r['ml_dtypes_s'] / r['cat_s']:.2f} |")
    print(f"| precsim --help (start-up) | {r['precsim_start_s']:.4f} | |")
EOF

# Sweeps: 16 short units (700 steps: about 1 s each on one thread) on 1 and 2 MPI ranks and on 1 and 2 local
# worker processes, one thread per rank or worker. Overhead: 16 one-step units through each
# executor against 16 times the same unit run alone (`precsim train`, its process start and
# report included): what the executor adds per unit (plan, dispatch, unit report, merge).
if [[ -z "$only" || "sweep" == *"$only"* ]] &&
   cmake --build "$build" --target precsim -j "$(nproc)" >"$out/precsim.build.log" 2>&1; then
  echo "bench: precsim sweep, 16 units on 1 and 2 ranks" >&2
  "$py" - "$build/precsim" "$out" <<'EOF2'
import json, os, shutil, subprocess, sys, time
cli, out = sys.argv[1:3]
mpirun = shutil.which("mpirun")
base = {"steps": 700, "batch": 32, "seed": 1, "shadow_every": 0,
        "data": {"kind": "gaussian-mixture", "features": 16, "classes": 4, "train_size": 1024, "heldout_size": 128},
        "model": {"hidden": [48, 48]}, "optimizer": {"kind": "sgd", "lr": 0.05}, "recipes": ["bf16-amp", "fp8-current"]}
def plan(steps, name):
    p = os.path.join(out, name)
    json.dump({"base": dict(base, steps=steps), "grid": [{"path": "seed", "values": list(range(1, 17))}]}, open(p, "w"))
    return p
def best(cmd, runs=3, out_dir=True):
    times = []
    d = os.path.join(out, "sweep-bench-dir")
    for _ in range(runs):
        shutil.rmtree(d, ignore_errors=True)
        t = time.perf_counter()
        subprocess.run([*cmd, *(["--out-dir", d] if out_dir else [])], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    shutil.rmtree(d, ignore_errors=True)
    return min(times)
long_plan, short_plan = plan(700, "sweep-bench-16.json"), plan(1, "sweep-bench-1step.json")
unit = os.path.join(out, "sweep-bench-unit.json")
json.dump(dict(base, steps=1), open(unit, "w"))
one = [cli, "--threads", "1"]
mpi = [mpirun, "--oversubscribe", "--allow-run-as-root", "-n"] if mpirun else None
r = {"load_before": os.getloadavg()[0]}
for n in (1, 2):
    r[f"local_jobs{n}_s"] = best([*one, "sweep", long_plan, "--jobs", str(n)])
    if mpi:
        r[f"mpi_ranks{n}_s"] = best([*mpi, str(n), *one, "sweep", long_plan])
r["unit_alone_s"] = best([*one, "train", "--config", unit, "--out", os.path.join(out, "sweep-bench-unit-report.json")], 5, False)
r["local_1step_per_unit_s"] = best([*one, "sweep", short_plan, "--jobs", "1"]) / 16
if mpi:
    r["mpi_1step_per_unit_s"] = best([*mpi, "1", *one, "sweep", short_plan]) / 16
r["load_after"] = os.getloadavg()[0]
json.dump(r, open(os.path.join(out, "sweep.json"), "w"), indent=1)
print(f"## precsim sweep: 16 units, one thread per worker or rank (load average {r['load_before']:.1f} -> {r['load_after']:.1f})\n")
print("| executor | 1 | 2 | speed-up |\n|---|---|---|---|")
print(f"| local --jobs (s) | {r['local_jobs1_s']:.2f} | {r['local_jobs2_s']:.2f} | {r['local_jobs1_s'] / r['local_jobs2_s']:.2f} |")
if mpi:
    print(f"| mpirun -n (s) | {r['mpi_ranks1_s']:.2f} | {r['mpi_ranks2_s']:.2f} | {r['mpi_ranks1_s'] / r['mpi_ranks2_s']:.2f} |")
ms = lambda s: f"{1000 * s:.1f} ms"
print(f"\none-step unit alone (precsim train): {ms(r['unit_alone_s'])}; per unit in a sweep of 16: local "
      f"{ms(r['local_1step_per_unit_s'])} (overhead {ms(r['local_1step_per_unit_s'] - r['unit_alone_s'])})"
      + (f", MPI one rank {ms(r['mpi_1step_per_unit_s'])} (overhead {ms(r['mpi_1step_per_unit_s'] - r['unit_alone_s'])}, "
         "mpirun's start included)" if mpi else ""))
EOF2
fi

# PyTorch beside precsim's training step, interleaved rounds (scripts/bench_peers.py).
if [[ -z "$only" || "peers" == *"$only"* || "train" == *"$only"* ]] && [ -x build/venv/bin/python ] &&
   build/venv/bin/python -c "import torch" 2>/dev/null &&
   cmake --build "$build" --target train_bench -j "$(nproc)" >"$out/train_bench.build.log" 2>&1; then
  echo "bench: PyTorch peers" >&2
  tr=""
  cmake --build "$build" --target transformer_bench -j "$(nproc)" >"$out/transformer_bench.build.log" 2>&1 &&
    tr="$build/bench/transformer_bench"
  build/venv/bin/python scripts/bench_peers.py "$build/bench/train_bench" "$out/peers.json" "$reps" $tr
fi

# Python: the package from this build tree (target precsim_python) in the project's venv.
if [[ -z "$only" || "python" == *"$only"* ]] && [ -x build/venv/bin/python ] &&
   cmake --build "$build" --target precsim_python -j "$(nproc)" >"$out/precsim_python.build.log" 2>&1; then
  echo "bench: Python section" >&2
  # Passive OpenMP waiting: torch and precsim each run a team of OpenMP threads in this one process,
  # and with libgomp's default spinning each team's idle threads burn the cores the other's need
  # (on 2 cores under load: torch's Linear 6x and precsim's 4x slower than with passive waiting).
  OMP_WAIT_POLICY=passive PYTHONPATH="$build/python" build/venv/bin/python scripts/bench_python.py "$out/python.json" \
    "$out/quantize_bench.json"
fi
