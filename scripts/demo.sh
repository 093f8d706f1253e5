#!/usr/bin/env bash
# Installs dependencies, builds in build/, runs the embedded default experiment and writes
# demo-report.json (extra arguments go to `precsim demo`).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target precsim
build/precsim demo --out demo-report.json "$@"
