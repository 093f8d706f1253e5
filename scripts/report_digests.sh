#!/usr/bin/env bash
# Prints "NAME DIGEST" for the results of a fixed set of runs: the demo, the test configs, the
# documented examples (docs/) and every recipe preset on the MLP (LayerNorm, BatchNorm, regression, items)
# and on the transformer, all with --deterministic. Two builds that print the same lines computed
# the same numbers; a restructure or a speed-up must leave them unchanged:
#   scripts/report_digests.sh build/precsim > after.txt && diff before.txt after.txt
# Progress goes to stderr; each run's report stays in $PRECSIM_DIGEST_DIR (default: a temp dir).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(realpath "${1:-$here/build/precsim}")"
out="${PRECSIM_DIGEST_DIR:-$(mktemp -d)}"
mkdir -p "$out"
cd "$out"

presets=(fp32 bf16-amp fp16-amp fp16-amp-static fp16-noscale bf16-pure bf16-pure-sr bf16-pure-kahan
         fp8-delayed fp8-current fp8-blockwise mxfp8 mxfp8-ocp mxfp6 mxfp4 nvfp4 nvfp4-plain ddp8-bf16-ring ddp8-bf16-tree
         ddp8-bf16-fp32acc accum16-bf16-buffer accum16-bf16-sr accum16-bf16-kahan accum-hf-bug
         ddp8-bn-local ddp8-bn-sync)
as_json() { local s; s="$(printf '"%s",' "$@")"; echo "[${s%,}]"; }
recipes_json="$(as_json "${presets[@]}")"
# BatchNorm statistics presets need BatchNorm layers: the other models take the rest.
no_bn_json="$(as_json "${presets[@]/ddp8-bn-*/}" | sed 's/"",//g; s/,""//g')"

cat > split.json <<'EOF'
{"steps": 200, "batch": 64, "data": {"separation": 1.0},
 "items": {"mask_fraction": 0.2, "min_per_row": 1, "max_per_row": 40},
 "optimizer": {"kind": "sgd", "lr": 0.05, "momentum": 0.9},
 "recipes": ["fp32", "bf16-amp", "accum16-bf16-buffer", "accum16-bf16-kahan", "ddp8-bf16-ring",
             "ddp8-bf16-fp32acc", "accum-hf-bug",
             {"name": "hf-fixed", "preset": "fp32", "accumulation": {"micro_batches": 4}}]}
EOF
cat > syncbn.json <<'EOF'
{"steps": 200, "batch": 64, "data": {"separation": 1.0}, "model": {"batchnorm": true},
 "optimizer": {"kind": "sgd", "lr": 0.05, "momentum": 0.9},
 "recipes": ["fp32", "ddp8-bn-local", "ddp8-bn-sync",
             {"name": "bf16-bn-sync", "preset": "ddp8-bf16-ring", "parallel": {"batchnorm_stats": "sync"}}]}
EOF
cat > presets_ln.json <<EOF
{"steps": 24, "batch": 64, "shadow_every": 4, "log_every": 3, "eval_every": 8,
 "model": {"hidden": [48, 48], "layernorm": true, "residual": true},
 "optimizer": {"kind": "adamw", "lr": 0.003}, "recipes": $no_bn_json}
EOF
cat > presets_bn.json <<EOF
{"steps": 16, "batch": 64, "shadow_every": 5, "model": {"hidden": [32, 32], "batchnorm": true},
 "items": {"mask_fraction": 0.2, "min_per_row": 1, "max_per_row": 8},
 "optimizer": {"kind": "sgd", "lr": 0.05, "momentum": 0.9}, "recipes": $recipes_json}
EOF
cat > presets_gpt.json <<EOF
{"steps": 6, "batch": 16, "shadow_every": 2, "log_every": 1, "eval_every": 3,
 "model": {"type": "transformer", "layers": 1, "heads": 2, "width": 16, "context": 16},
 "data": {"kind": "sort"}, "recipes": $no_bn_json}
EOF

run() {  # name, then the command's arguments (the report goes to name.json)
  local name="$1"; shift
  echo "digests: $name" >&2
  "$bin" "$@" --deterministic --out "$name.json" >/dev/null
  printf '%s %s\n' "$name" "$(jq -r '.results_digest // .digest' "$name.json")"
}

run demo demo
run fp16_small_gradients train --config "$here/tests/data/fp16_small_gradients.json"
run split train --config split.json
run syncbn train --config syncbn.json
run presets_ln train --config presets_ln.json
run presets_bn train --config presets_bn.json
run presets_gpt train --config presets_gpt.json
run tiny_gpt train --experiment tiny-gpt --steps 40 --recipes fp32,bf16-amp,fp8-delayed,accum-hf-bug,ddp8-bf16-ring
run readme_train train --recipes fp32,bf16-amp,mxfp4 --steps 100 --seeds 2
run quantize quantize -f e4m3 448 464 465 -465 3.14159 0x1p-10
run analyze analyze --dist normal --count 65536 --seed 1 \
  --formats e4m3,bf16,mxfp8_e4m3,mxfp8_e4m3:rule=rceil,mxfp6_e2m3,mxfp4,mxfp4:rule=rceil,nvfp4,fp8_e4m3:tensor,fp8_e4m3:tile128,mxint8
run dot dot --model a100 --a 0x1p-12,0x1p-12 --b 0x1p-12,0x1p-12 --c 1
run gemm gemm --m 16 --n 16 --sweep-k 256,1024 --a-format e4m3 --b-format e4m3 \
  --model h100-fp8-fast,h100-fp8-promote,b200-fp8 --dist uniform:low=0,high=1
run allreduce allreduce -w 2,8 -f bf16 -a ring,tree,fp32-accumulate -n 4096
