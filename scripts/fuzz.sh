#!/usr/bin/env bash
# Fuzzes precsim's readers with libFuzzer under clang's ASan + UBSan: reports, tensor files (.npy,
# .safetensors), report check's rules, train configs, recipe JSON, sweep files and the
# NAME[:k=v...] specs. Optional: the default test run replays the corpora instead
# (tests/report_fuzz_test.cpp, tensor_fuzz_test.cpp, config_fuzz_test.cpp, spec_fuzz_test.cpp).
#   scripts/fuzz.sh [SECONDS] [TARGET...]   default 60 s for each target, one after the other
# The build is CMake (build-fuzz/, -DPRECSIM_FUZZ=ON): only the fuzz targets and the libraries they
# need, in parallel, at -O0: with ASan, clang 14 spent minutes on one SIMD-heavy file at -O1 and
# seconds at -O0. Inputs that raise coverage go to build-fuzz/corpus/<target>/; a crashing input is
# written to build-fuzz/crash-* and the script exits non-zero. Copy what is worth keeping into the
# target's corpus (tests/fuzz/, corpus_of below).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-60}"
shift || true
targets=("$@")
all_targets=(report_reader_fuzz tensor_file_fuzz check_rules_fuzz train_config_fuzz recipe_json_fuzz sweep_file_fuzz spec_fuzz)
[[ ${#targets[@]} -gt 0 ]] || targets=("${all_targets[@]}")
corpus_of() {
  case "$1" in
    report_reader_fuzz) echo corpus ;;
    tensor_file_fuzz) echo tensor_corpus ;;
    check_rules_fuzz) echo rules_corpus ;;
    train_config_fuzz) echo train_config_corpus ;;
    recipe_json_fuzz) echo recipe_corpus ;;
    sweep_file_fuzz) echo sweep_corpus ;;
    spec_fuzz) echo spec_corpus ;;
  esac
}
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -eq 0 ]]; then
  echo "fuzz.sh: SECONDS must be a positive integer, got '$seconds'" >&2
  exit 2
fi
for t in "${targets[@]}"; do
  case "$t" in
    report_reader_fuzz|tensor_file_fuzz|check_rules_fuzz|train_config_fuzz|recipe_json_fuzz|sweep_file_fuzz|spec_fuzz) ;;
    *) echo "fuzz.sh: unknown target '$t'; allowed: ${all_targets[*]}" >&2; exit 2 ;;
  esac
done

# libFuzzer ships with clang's runtime libraries (Debian: libclang-rt-<version>-dev).
fuzzer_lib() { find /usr/lib/llvm-*/lib/clang -name 'libclang_rt.fuzzer-x86_64.a' 2>/dev/null | head -n1; }
if ! command -v clang++ >/dev/null || [[ -z "$(fuzzer_lib)" ]]; then
  echo "fuzz.sh: installing clang and libFuzzer (clang, libclang-rt-dev)" >&2
  sudo=""; [[ $(id -u) -eq 0 ]] || sudo=sudo
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq clang libclang-rt-dev libomp-dev
fi

out="$here/build-fuzz"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
cmake -S "$here" -B "$out" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -gline-tables-only" \
  -DPRECSIM_FUZZ=ON -DPRECSIM_CUDA=OFF -DPRECSIM_BUILD_TESTS=OFF -DPRECSIM_BUILD_BENCH=OFF \
  "${launcher[@]}" >/dev/null
cmake --build "$out" -j "$(nproc)" --target "${targets[@]}"

for t in "${targets[@]}"; do
  seeds="$here/tests/fuzz/$(corpus_of "$t")"
  mkdir -p "$out/corpus/$t"
  echo "fuzz.sh: $t for ${seconds}s (seeds: ${seeds#"$here"/})" >&2
  # -rss_limit_mb and -malloc_limit_mb make an input that asks for a huge allocation a finding;
  # -timeout an input that takes over 10 s (a hang). -jobs is 1: one process, on shared cores.
  (cd "$out" && "./$t" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 \
     -print_final_stats=1 "$out/corpus/$t" "$seeds")
done
