#!/usr/bin/env bash
# Installs dependencies, builds in build/ and runs the whole test suite.
#   scripts/test.sh               default run (under 20 minutes on 2 cores)
#   scripts/test.sh --sanitize    the same tests in an ASan+UBSan build (build-sanitize/)
#   scripts/test.sh --full        also the exhaustive 2^32 sweeps (PRECSIM_FULL_SWEEP=1; hours)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
build=build
# CI compiles one CUDA architecture (the plain CMake default builds 80;89;90;90a).
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DPRECSIM_CUDA_ARCHITECTURES=80)
for arg in "$@"; do
  case "$arg" in
    --sanitize) build=build-sanitize; cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DPRECSIM_SANITIZE=ON -DPRECSIM_BUILD_BENCH=OFF -DPRECSIM_CUDA=OFF) ;;
    --full) export PRECSIM_FULL_SWEEP=1 ;;
    *) echo "test.sh: unknown option '$arg'; allowed: --sanitize, --full" >&2; exit 2 ;;
  esac
done
scripts/setup.sh
cmake -S . -B "$build" -G Ninja "${cmake_args[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)"
export PRECSIM_VENV_PYTHON="$here/build/venv/bin/python"
ctest --test-dir "$build" -j "$(nproc)" --output-on-failure
