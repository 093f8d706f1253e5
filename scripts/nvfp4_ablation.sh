#!/usr/bin/env bash
# The NVFP4 / MXFP8 ablation at CPU scale (docs/recipes.md):
# trains experiments/nvfp4_ablation.json (tiny-gpt, 20 seeds, about 12 CPU-minutes), then prints
# each effect as a difference paired by seed with its 95% interval (precsim report compare), and
# the block error of 4/6 against 6-only and the clipped blocks of floor against rceil on Gaussian
# and heavy-tailed data (precsim analyze).
#   scripts/nvfp4_ablation.sh [BIN] [OUT_DIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(realpath "${1:-$here/build/precsim}")"
out="${2:-nvfp4-ablation}"
mkdir -p "$out"
report="$out/ablation.json"
[[ -f "$report" ]] || "$bin" train --config "$here/experiments/nvfp4_ablation.json" --deterministic --out "$report" >&2
# b - a of a metric for each effect: a positive difference means b ends with the higher loss.
effects=("nvfp4 nvfp4-no-rht" "nvfp4 nvfp4-no-2d" "nvfp4 nvfp4-no-sr" "nvfp4 nvfp4-sr-fwd"
         "nvfp4 nvfp4-4over6" "nvfp4 nvfp4-no-bf16-layers" "bf16-amp nvfp4" "mxfp8 mxfp8-ocp")
for metric in heldout_loss final_loss; do
  for e in "${effects[@]}"; do
    read -r a b <<<"$e"
    "$bin" report compare "$report" --a "$a" --b "$b" --metric "$metric" | grep -E "^(heldout|final)|^mean|^verdict"
  done
done
# Elements saturated by clipped blocks in the GEMM operands, per seed (rceil never clips).
echo "seed variant saturated_forward saturated_dgrad saturated_wgrad operand_count_forward"
jq -r '.results.runs[] | .seed as $s | .variants[] | select(.name | test("^(mxfp8|mxfp8-ocp|nvfp4|nvfp4-4over6)$"))
       | [$s, .name, .roles.gemm_in_forward.saturated, .roles.gemm_in_dgrad.saturated,
          .roles.gemm_in_wgrad.saturated, .roles.gemm_in_forward.count] | @tsv' "$report"
for dist in normal student-t:df=3; do
  "$bin" analyze --dist "$dist" --count 1048576 --seed 1 \
    --formats nvfp4,nvfp4:4over6,mxfp8_e4m3,mxfp8_e4m3:rule=rceil | tail -n 6
done
