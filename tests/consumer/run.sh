#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs the consumer project against it.
set -euo pipefail
build="$1"; src="$2"; link_flags="${3:-}"  # the sanitizer runtimes, for a sanitized build
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/tests/consumer" -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXE_LINKER_FLAGS="$link_flags" >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer_test"
