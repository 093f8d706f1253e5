#!/usr/bin/env bash
# The GPU check, run on the device machine from the bundle that gpu/build_device_bundle.sh built
# here: no network, no setup.sh, nothing compiled there. Under 4 minutes on an H200. Writes into
# OUTDIR (default $OUT) two files: precsim-device-check.tar.gz (every report and log) and
# summary.txt (one screen). Exit: 0 all ran, 1 a check failed, 3 no GPU.
#   gpu/device_check.sh [OUTDIR]
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="${PRECSIM_BUNDLE:-$here/gpu/bundle}"
out="${1:-${OUT:-}}"
if [ -z "$out" ]; then echo "usage: gpu/device_check.sh OUTDIR (or set OUT)" >&2; exit 2; fi
if [ ! -x "$bundle/bin/precsim" ]; then echo "device_check: no bundle at $bundle (run gpu/build_device_bundle.sh)" >&2; exit 2; fi
mkdir -p "$out"
work="$(mktemp -d)"
dir="$work/precsim-device-check"
mkdir -p "$dir/operands"
summary="$dir/summary.txt"

# CUDA 13 runtime and cuBLASLt from the image: the toolkit, else the pip wheels beside PyTorch.
libs="$bundle/lib"
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && libs="$libs:$d"; done
if command -v python3 >/dev/null; then
  py_libs="$(python3 -c 'import sys, os, glob; print(":".join(sorted({os.path.dirname(p) for s in sys.path for p in glob.glob(os.path.join(s, "nvidia", "*", "lib", "libcu*.so.13"))})))' 2>/dev/null || true)"
  [ -n "$py_libs" ] && libs="$libs:$py_libs"
fi
libs="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$bundle/lib/fallback"
export PRECSIM_GPU_LIBRARY="$bundle/lib/libprecsim_gpu.so"
# Only the bundle's programs get the bundle's libraries; python3 and torch keep the image's.
precsim=(env "LD_LIBRARY_PATH=$libs" "$bundle/bin/precsim")
gpu_test=(env "LD_LIBRARY_PATH=$libs" "$bundle/bin/gpu_device_test")
failed=0
start=$SECONDS

say() { echo "$*" | tee -a "$summary"; }
# step NAME TIMEOUT CMD...: runs with a deadline, log in NAME.log, one summary line.
step() {
  local name="$1" limit="$2"; shift 2
  timeout "$limit" "$@" >"$dir/$name.log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || failed=1
  say "$(printf '%-22s rc=%-3s %3ss' "$name" "$rc" "$((SECONDS - start))")"
  return $rc
}
finish() {
  say "total ${SECONDS}s; library path for precsim: $libs"
  cp "$bundle/BUNDLE.txt" "$dir/" 2>/dev/null
  tar czf "$out/precsim-device-check.tar.gz" -C "$work" precsim-device-check
  cp "$summary" "$out/summary.txt"
  rm -rf "$work"
  exit "$1"
}

say "precsim device check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
command -v nvidia-smi >/dev/null && nvidia-smi -L >"$dir/nvidia-smi.log" 2>&1
if ! step gpu-info 60 "${precsim[@]}" gpu info --out "$dir/gpu-info.json"; then
  say "NO GPU: $(tail -n 3 "$dir/gpu-info.log" | tr '\n' ' ')"
  finish 3
fi
sed -n '1,4p' "$dir/gpu-info.log" | tee -a "$summary"
step gpu-test 120 "${gpu_test[@]}" --gtest_brief=1
grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$dir/gpu-test.log" | tee -a "$summary"
step gpu-probe 120 "${precsim[@]}" gpu probe --out "$dir/gpu-probe.json"
grep -E '^(wmma|mma|wgmma|cublaslt)' "$dir/gpu-probe.log" | cut -c1-150 | tee -a "$summary"
gemm() {  # NAME ARGS...
  local name="$1"; shift
  mkdir -p "$dir/operands/$name"
  step "gemm-$name" 90 "${precsim[@]}" gpu gemm --m 128 --n 128 --k 1024 --save-operands "$dir/operands/$name" \
    --out "$dir/gpu-gemm-$name.json" "$@"
  # the best preset of each operand set (the CLI prints presets best first)
  awk -v n="$name" '/ algo /{set=$1; seen=0} /exact/{if (!seen++) printf "  %-11s %-14s %s\n", n, set, $0}' \
    "$dir/gemm-$name.log" | sed 's/  */ /g' | tee -a "$summary"
}
gemm bf16 --type bf16 --require-match h100
gemm fp16 --type fp16 --require-match h100
gemm fp16-acc16 --type fp16 --accumulate fp16
gemm tf32 --type tf32
gemm e4m3 --type e4m3
gemm e4m3-fast --type e4m3 --fast-accum
gemm e5m2-fast --type e5m2 --fast-accum
# Training: each recipe emulated and, from the same weights and batches, with its matrix products
# on cuBLASLt; one summary line per recipe with the largest per-step differences.
cat >"$dir/train-cuda-config.json" <<'JSON'
{"steps": 200, "batch": 64, "seed": 1, "shadow_every": 0,
 "data": {"kind": "gaussian-mixture", "features": 32, "classes": 8, "train_size": 4096, "heldout_size": 512},
 "model": {"hidden": [64, 64]}, "optimizer": {"kind": "adamw", "lr": 0.003},
 "recipes": ["fp32", "bf16-amp", "fp16-amp", "fp8-current", "fp8-delayed"]}
JSON
step train-cuda 150 "${precsim[@]}" train --backend cuda --config "$dir/train-cuda-config.json" \
  --out "$dir/train-cuda.json"
if command -v python3 >/dev/null && [ -f "$dir/train-cuda.json" ]; then
  python3 - "$dir/train-cuda.json" <<'PY' | tee -a "$summary"
import json, sys
for v in json.load(open(sys.argv[1]))["results"]["runs"][0]["variants"]:
    s = v["backend"]["summary"]
    print(f"  train {v['name']:<12} max|loss diff| {s['max_abs_loss_diff']} max weight rel err {s['max_weight_rel_err']}")
PY
fi
if command -v python3 >/dev/null && python3 -c 'import torch' 2>/dev/null; then
  for t in bf16 fp16 e4m3 e4m3-fast; do
    type="${t%-fast}"; fast=""; [ "$t" != "$type" ] && fast="--fast-accum"
    step "torch-$t" 90 python3 "$here/gpu/torch_check.py" "$dir/operands/$t" "$type" $fast
    grep -E '^  ' "$dir/torch-$t.log" | cut -c1-110 | tee -a "$summary"
  done
else
  say "torch: not importable here; the PyTorch ground truth was not run"
fi
finish "$failed"
