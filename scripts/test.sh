#!/usr/bin/env bash
# Installs dependencies, builds in build/ and runs the whole test suite.
#   scripts/test.sh               default run (under 20 minutes on 2 cores)
#   scripts/test.sh --sanitize    ASan+UBSan build (build-sanitize/, -O1 -g1) of the libraries, the
#                                 CLI and a subset of the tests: every command through the CLI tests
#                                 and the schema/interrupt/determinism scripts, the report,
#                                 tensor-file and fuzz-corpus tests, and the core format units (see
#                                 sanitize_tests); docs/testing.md has its measured time
#   scripts/test.sh --sanitize-all  the same build with every test (hours on 2 cores; docs/testing.md)
#   scripts/test.sh --full        also the exhaustive 2^32 sweeps (PRECSIM_FULL_SWEEP=1; docs/testing.md)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
build=build
# CI compiles one CUDA architecture (the plain CMake default builds 80;89;90;90a).
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DPRECSIM_CUDA_ARCHITECTURES=80)
# CTest's timeout per test (tests/CMakeLists.txt): the default stops a hung test; the sanitized and
# the exhaustive runs are slower by design.
timeout=1800
for arg in "$@"; do
  case "$arg" in
    --sanitize|--sanitize-all)
      build=build-sanitize
      [[ "$arg" == --sanitize-all ]] || subset=1
      cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DPRECSIM_SANITIZE=ON -DPRECSIM_BUILD_BENCH=OFF -DPRECSIM_CUDA=OFF
                  -DPRECSIM_PYTHON=OFF)
      timeout=7200 ;;
    --full) export PRECSIM_FULL_SWEEP=1; full=1 ;;
    *) echo "test.sh: unknown option '$arg'; allowed: --sanitize, --sanitize-all, --full" >&2; exit 2 ;;
  esac
done
# The --sanitize subset: the whole CLI under the sanitizers (the Python tests run every command),
# the code that reads untrusted files, and the format core everything else is built on.
sanitize_tests=(
  report_check_test report_cli_test report_series_test report_train_stream_test report_fuzz_test
  tensor_fuzz_test safetensors_test analyze_test quantize_cli_test gemm_cli_test dot_cli_test
  rounding_modes_test format_roundtrip_test block_scaling_test train_test
)
sanitize_scripts=(report_schema_test report_interrupt_test report_determinism_test)
scripts/setup.sh
if [[ "$build" == build-sanitize ]] && command -v ccache >/dev/null; then
  cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
[[ -z "${full:-}" ]] || timeout=14400
cmake -S . -B "$build" -G Ninja "${cmake_args[@]}" -DPRECSIM_TEST_TIMEOUT="$timeout" >/dev/null
export PRECSIM_VENV_PYTHON="$here/build/venv/bin/python"
# The differential oracles (ml_dtypes) must run here: a missing one fails instead of skipping.
export PRECSIM_REQUIRE_ORACLES=1
if [[ -n "${subset:-}" ]]; then
  cmake --build "$build" -j "$(nproc)" --target precsim precsim_gpu_fake "${sanitize_tests[@]}"
  names=("${sanitize_tests[@]}" "${sanitize_scripts[@]}")
  regex="^($(IFS='|'; echo "${names[*]}"))\$"
  ctest --test-dir "$build" -j "$(nproc)" --output-on-failure -R "$regex"
else
  cmake --build "$build" -j "$(nproc)"
  ctest --test-dir "$build" -j "$(nproc)" --output-on-failure
fi
