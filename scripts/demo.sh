#!/usr/bin/env bash
# Installs dependencies, builds in build/, runs the embedded default experiment and writes
# demo-report.json (extra arguments go to `precsim demo`), then its figure demo-report.png beside
# it (loss gap to FP64 over steps on a log scale, underflow fractions; docs/figures.md).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target precsim
build/precsim demo --out demo-report.json "$@"
# The figure needs the Python package (build/python) and the venv's matplotlib; setup.sh installs
# both where it can, and without them the demo's report is all there is.
py=build/venv/bin/python
if [ -x "$py" ] && cmake --build build -j "$(nproc)" --target precsim_python >build/python-build.log 2>&1 &&
   PYTHONPATH=build/python "$py" -m precsim.plot demo-report.json -o demo-report.png >/dev/null; then
  echo "demo: wrote $here/demo-report.png (the figure of demo-report.json)"
else
  echo "demo: no figure (needs build/venv with matplotlib and the Python package; see scripts/setup.sh)" >&2
fi
