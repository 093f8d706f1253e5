#!/usr/bin/env bash
# Builds, on this machine, what gpu/device_check.sh runs on a GPU machine that has no network and no
# -dev packages: precsim and the GPU test binary (C++ runtime linked statically, the other C++
# dependencies' shared libraries copied beside them), and libprecsim_gpu.so for sm_90a. The CUDA
# runtime and cuBLASLt are not bundled: they come from the device image's own CUDA 13.
#   gpu/build_device_bundle.sh [BUILD_DIR]     (default build-bundle; the bundle lands in gpu/bundle/)
# gpu/bundle/ is ignored by git; the device tool carries it with `carry: ["gpu/bundle"]`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-build-bundle}"
case "$build" in /*) ;; *) build="$here/$build" ;; esac
bundle="$here/gpu/bundle"
limit_mib=56  # the working tree travels within 64 MiB in all

export PATH="/usr/local/cuda/bin:$PATH"
command -v nvcc >/dev/null || { echo "build_device_bundle: nvcc not found (looked on PATH and /usr/local/cuda/bin)" >&2; exit 2; }
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPRECSIM_CUDA=ON \
  -DPRECSIM_CUDA_ARCHITECTURES=90a -DPRECSIM_BUILD_BENCH=OFF \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" \
  -DCMAKE_SHARED_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
cmake --build "$build" -j 2 --target precsim precsim_gpu gpu_device_test

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
cp "$build/precsim" "$build/tests/gpu_device_test" "$bundle/bin/"
cp "$build/libprecsim_gpu.so" "$bundle/lib/"
strip --strip-unneeded "$bundle/bin/"* "$bundle/lib/libprecsim_gpu.so"

# Shared libraries the binaries need beyond glibc and CUDA's own: copied so that the device needs
# none of the -dev packages.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libcuda|libcudart|libcublas|libnvidia)'
for f in "$bundle/bin/"* "$bundle/lib/libprecsim_gpu.so"; do
  ldd "$f" | awk '/=> \//{print $1" "$3}' | while read -r name path; do
    if ! [[ "$name" =~ $skip ]] && [ ! -e "$bundle/lib/$name" ] && [ ! -e "$bundle/lib/fallback/$name" ]; then
      # The C++ runtime goes last on the search path: a newer one on the device wins.
      case "$name" in libstdc++*|libgcc_s*) mkdir -p "$bundle/lib/fallback"; cp -L "$path" "$bundle/lib/fallback/$name" ;;
        *) cp -L "$path" "$bundle/lib/$name" ;; esac
    fi
  done
done

{
  echo "precsim device bundle"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  echo "commit: $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$here" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "nvcc: $(nvcc --version | tail -1)"
  echo "cuda architectures: 90a"
  echo "files:"; (cd "$bundle" && find . -type f | sort | xargs ls -l | awk '{print "  "$5"  "$9}')
} > "$bundle/BUNDLE.txt"
size_kib=$(du -sk "$bundle" | cut -f1)
echo "bundle: $bundle ($((size_kib / 1024)) MiB)"
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
  echo "build_device_bundle: the bundle is over ${limit_mib} MiB" >&2
  exit 1
fi
