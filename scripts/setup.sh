#!/usr/bin/env bash
# Installs every dependency of precsim from Debian's packages. Idempotent: when everything is
# already present it prints nothing and touches nothing. The ml_dtypes venv is best effort:
# without PyPI the differential test against it reports itself skipped (and fails under
# scripts/test.sh, which requires it).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

packages=(
  build-essential cmake ninja-build pkg-config git
  libhwy-dev libeigen3-dev libboost-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev libomp-dev libssl-dev libopenmpi-dev openmpi-bin
  libopenblas-dev
  python3 python3-numpy python3-jsonschema python3-matplotlib python3-nbclient
  python3-ipykernel python3-nbformat python3-venv python3-scipy
  python3-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=""
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq >/dev/null
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The venv: ml_dtypes (the second independent implementation the format tests compare against),
# the Python package's build tools (nanobind, scikit-build-core), pytest and torch: PyPI's wheel,
# ~3 GB with its CUDA libraries, which runs on the CPU too (Debian's python3-torch is 1.13, built
# against Debian's NumPy 1.24, while ml_dtypes 0.7 brings NumPy 2 into the venv). ml_dtypes is best
# effort as before; a missing torch makes the Python tests fail under CI.
venv="$here/build/venv"
pins=("ml_dtypes==0.7.0" "nanobind==3.1.0" "scikit-build-core==1.1.2" "pytest==9.2.0" "torch==2.15.0"
      "hypothesis==6.170.17" "mypy==2.4.1")
if [ ! -x "$venv/bin/python" ]; then
  mkdir -p "$here/build"
  /usr/bin/python3 -m venv --system-site-packages "$venv" >/dev/null 2>&1 || true
fi
# ml_dtypes first and on its own: it is the format tests' oracle (they fail under CI without it),
# and a slow or failed torch download must not take it along.
if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -c "import ml_dtypes, sys; sys.exit(ml_dtypes.__version__ != '${pins[0]#ml_dtypes==}')" 2>/dev/null; then
  timeout 300 "$venv/bin/pip" install -q --disable-pip-version-check "${pins[0]}" >/dev/null 2>&1 ||
    echo "setup: ${pins[0]} could not be installed from PyPI; its differential test fails under scripts/test.sh" >&2
fi
# The package's build tools and pytest (small) on their own too: the package below needs nanobind,
# and a slow or failed torch download must not leave it out.
if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -c "import nanobind, scikit_build_core, pytest" 2>/dev/null; then
  timeout 300 "$venv/bin/pip" install -q --disable-pip-version-check "${pins[@]:1:3}" >/dev/null 2>&1 ||
    echo "setup: some of ${pins[*]:1:3} could not be installed from PyPI; the Python package is not built" >&2
fi
# hypothesis for the property tests (tests/python/test_props_*.py), on its own and pinned: the
# default suite's examples come from a fixed seed, and another version draws other examples.
if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -c "import hypothesis, sys; sys.exit(hypothesis.__version__ != '${pins[5]#hypothesis==}')" 2>/dev/null; then
  timeout 300 "$venv/bin/pip" install -q --disable-pip-version-check "${pins[5]}" >/dev/null 2>&1 ||
    echo "setup: ${pins[5]} could not be installed from PyPI; the property tests fail under CI" >&2
fi
# mypy for tests/python_types_test.py, pinned: another version finds other errors.
if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mypy') != '${pins[6]#mypy==}')" 2>/dev/null; then
  timeout 300 "$venv/bin/pip" install -q --disable-pip-version-check "${pins[6]}" >/dev/null 2>&1 ||
    echo "setup: ${pins[6]} could not be installed from PyPI; the type check fails under CI" >&2
fi
if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  echo "setup: installing ${pins[4]} into build/venv (~3 GB: minutes)" >&2
  timeout 1800 "$venv/bin/pip" install -q --disable-pip-version-check "${pins[4]}" >/dev/null 2>&1 ||
    echo "setup: ${pins[4]} could not be installed from PyPI; the torch tests fail under CI" >&2
fi
# matplotlib and scipy for the venv: Debian's python3-matplotlib and python3-scipy are built for
# NumPy 1 and fail to import beside the venv's NumPy 2, and precsim.plot (precsim-plot) and the
# notebooks (run on the venv's kernel) need them. Every compiled dependency is pinned too
# (contourpy, kiwisolver, pillow), since Debian's would satisfy pip and then fail the same way.
# Debian's matplotlib also loads its own mpl_toolkits at start-up (matplotlib-*-nspkg.pth); a .pth
# in the venv imports the wheel's first so that mplot3d matches the matplotlib it is loaded with.
# Best effort: without them precsim.plot names the missing package and the plot tests fail.
plot_pins=("matplotlib==3.11.2" "contourpy==1.3.3" "kiwisolver==1.5.1" "pillow==13.0.0" "fonttools==4.68.0"
           "cycler==0.12.1" "pyparsing==3.3.3" "python-dateutil==2.9.0.post0" "scipy==1.17.1")
if [ -x "$venv/bin/python" ] &&
   ! "$venv/bin/python" -c "import matplotlib, scipy.optimize, sys; sys.exit(matplotlib.__version__ != '${plot_pins[0]#matplotlib==}')" 2>/dev/null; then
  timeout 600 "$venv/bin/pip" install -q --disable-pip-version-check "${plot_pins[@]}" >/dev/null 2>&1 ||
    echo "setup: some of ${plot_pins[*]} could not be installed from PyPI; figures and notebooks fail" >&2
fi
vsite="$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" 2>/dev/null || true)"
if [ -n "$vsite" ] && [ -d "$vsite/mpl_toolkits" ] && [ ! -f "$vsite/mpl_toolkits-venv-first.pth" ]; then
  echo "import mpl_toolkits" >"$vsite/mpl_toolkits-venv-first.pth"
fi
# MMA-Sim: the Tensor Core models' test oracle (tests/mmasim_oracle_test.cpp), never a runtime
# dependency. Its own dependencies are torch (pinned above), setuptools and ninja (torch compiles its
# small CPU kernel at import), so it goes into the same venv without changing NumPy or torch. Best
# effort, after torch: without it the oracle test is skipped, or fails under scripts/test.sh.
mmasim_pins=("mmasim==2.1.1" "ninja==1.13.2")
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import torch" 2>/dev/null &&
   ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mmasim') != '${mmasim_pins[0]#mmasim==}')" 2>/dev/null; then
  timeout 600 "$venv/bin/pip" install -q --disable-pip-version-check "${mmasim_pins[@]}" >/dev/null 2>&1 ||
    echo "setup: ${mmasim_pins[*]} could not be installed from PyPI; the MMA-Sim oracle test fails under scripts/test.sh" >&2
fi
# mmaemu: the oracle of cuBLASLt's FP8 GEMM on the RTX 4060 and the H100 PCIe (fast and slow
# accumulation, split-K schemes, output conversion; tests/python/test_mmaemu_oracle.py), never a
# runtime dependency. It needs only numpy and torch (pinned above): --no-deps keeps them. Best effort.
mmaemu_pin="mmaemu==0.1.0"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import torch" 2>/dev/null &&
   ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mmaemu') != '${mmaemu_pin#mmaemu==}')" 2>/dev/null; then
  timeout 600 "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "$mmaemu_pin" >/dev/null 2>&1 ||
    echo "setup: $mmaemu_pin could not be installed from PyPI; the mmaemu oracle test fails under scripts/test.sh" >&2
fi
# transformers and torchvision: test dependencies only (tests/python/test_torch_intercept_models.py
# builds GPT-2, Llama, BERT, Mixtral and ResNet-18 from configs and checks that emulate() covers their
# matrix products). torchvision 0.29.2 takes torch >= 2.14, so torch stays the pinned one; the
# compiled dependencies of transformers are pinned too. Best effort, after torch: without them
# those tests are skipped, or fail under scripts/test.sh.
model_pins=("transformers==4.57.6" "torchvision==0.29.2" "tokenizers==0.22.2" "safetensors==0.8.0"
            "huggingface_hub==0.36.2" "regex==2026.11.19" "hf-xet==1.8.0")
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import torch" 2>/dev/null &&
   ! "$venv/bin/python" -c "import transformers, torchvision, sys; sys.exit(transformers.__version__ != '${model_pins[0]#transformers==}' or torchvision.__version__.split('+')[0] != '${model_pins[1]#torchvision==}')" 2>/dev/null; then
  timeout 600 "$venv/bin/pip" install -q --disable-pip-version-check "${model_pins[@]}" >/dev/null 2>&1 ||
    echo "setup: some of ${model_pins[*]} could not be installed from PyPI; the model coverage tests fail under scripts/test.sh" >&2
fi
# The package: CMake builds it in build/ (target precsim_python, the same libraries and objects as
# the CLI, so nothing is compiled twice) and a .pth file puts build/python on the venv's path. Only
# when `import precsim` fails; later builds of build/ keep it current. `pip install .` installs a
# copy into another environment instead (docs/python.md).
if "$venv/bin/python" -c "import nanobind" 2>/dev/null && ! (cd / && "$venv/bin/python" -c "import precsim" 2>/dev/null); then
  echo "setup: building the Python package precsim (build/, target precsim_python)" >&2
  launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  if [ ! -f "$here/build/build.ninja" ]; then
    cmake -S "$here" -B "$here/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
  fi
  cmake --build "$here/build" -j "$(nproc)" --target precsim_python >"$here/build/python-build.log" 2>&1 ||
    { echo "setup: building the Python package failed; see build/python-build.log" >&2; exit 1; }
  site="$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")"
  echo "$here/build/python" >"$site/precsim-build.pth"
fi
