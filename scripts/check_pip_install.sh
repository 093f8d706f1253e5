#!/usr/bin/env bash
# `pip install .` end to end, as a user runs it: the committed tree (git archive HEAD, so nothing
# built or ignored comes along) into a fresh venv holding only NumPy; pip's isolated build fetches
# scikit-build-core and nanobind (pyproject.toml pins them) and compiles the extension and the
# libraries it links. Then, from outside the source tree: the package imports from the venv, its
# type stubs and py.typed are installed, and a few values come out as the format rules say.
#
#   scripts/check_pip_install.sh [WORKDIR]   (default: a new temporary folder; kept for inspection)
#
# It compiles the whole library once (about half an hour on 2 busy cores), so CI does not run it;
# docs/python.md describes it. ccache, when present, is used as the launcher.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${1:-$(mktemp -d /tmp/precsim-pip.XXXXXX)}"
mkdir -p "$work/src"
git -C "$here" archive --format=tar HEAD | tar -x -C "$work/src"
/usr/bin/python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check numpy
if command -v ccache >/dev/null; then
  export CMAKE_ARGS="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"
fi
start=$(date +%s)
"$work/venv/bin/pip" install --disable-pip-version-check "$work/src" >"$work/pip.log" 2>&1 ||
  { tail -40 "$work/pip.log"; echo "check_pip_install: pip install failed; log: $work/pip.log" >&2; exit 1; }
echo "check_pip_install: pip install . took $(($(date +%s) - start)) s (log: $work/pip.log)"
cd /
"$work/venv/bin/python" - "$work/venv" <<'PY'
import pathlib, sys
import numpy as np
import precsim

pkg = pathlib.Path(precsim.__file__).resolve().parent
venv = pathlib.Path(sys.argv[1]).resolve()
assert venv in pkg.parents, f"precsim imported from {pkg}, not from the venv {venv}"
for f in ("_precsim.pyi", "py.typed", "torch/__init__.py"):
    assert (pkg / f).is_file(), f"{f} is not installed in {pkg}"
stub = (pkg / "_precsim.pyi").read_text()
assert "def analyze(" in stub and "class Format" in stub, "the stub lacks the module's functions"
# E4M3 round to nearest even: 0.1 -> 13/128, 300 -> 288 (the neighbours are 288 and 320), 500 ->
# NaN without saturation (above 464, the midpoint past the largest finite value 448).
y = precsim.quantize(np.array([1.0, 0.1, 300.0, 500.0], np.float32), "e4m3")
assert y[:3].tolist() == [1.0, 0.1015625, 288.0] and np.isnan(y[3]), y
a = precsim.analyze(np.arange(1, 65, dtype=np.float32), ["mxfp8_e4m3"])
assert a["schemes"][0]["blocks"] == 2 and a["count"] == 64, a
print(f"check_pip_install: ok: precsim {precsim.__name__} from {pkg}")
PY
