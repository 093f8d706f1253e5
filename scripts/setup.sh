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
  python3 python3-numpy python3-jsonschema python3-matplotlib python3-nbclient
  python3-ipykernel python3-nbformat python3-venv python3-scipy
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

# ml_dtypes is the second independent implementation the format tests compare against.
venv="$here/build/venv"
# Pinned to the version the tests were checked with (its rounding of e8m0 changed between releases).
ml_dtypes_version=0.7.0
if [ ! -x "$venv/bin/python" ] ||
   ! "$venv/bin/python" -c "import ml_dtypes, sys; sys.exit(ml_dtypes.__version__ != '$ml_dtypes_version')" 2>/dev/null; then
  mkdir -p "$here/build"
  if /usr/bin/python3 -m venv --system-site-packages "$venv" >/dev/null 2>&1 &&
     timeout 300 "$venv/bin/pip" install -q --disable-pip-version-check "ml_dtypes==$ml_dtypes_version" >/dev/null 2>&1; then
    :
  else
    echo "setup: ml_dtypes could not be installed from PyPI; its differential test will be skipped (and fail under scripts/test.sh)" >&2
  fi
fi
