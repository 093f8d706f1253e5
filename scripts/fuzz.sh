#!/usr/bin/env bash
# Fuzzes the report reader with libFuzzer (clang, ASan + UBSan). Optional: the default test run
# replays tests/fuzz/corpus/ instead (tests/report_fuzz_test.cpp).
#   scripts/fuzz.sh [SECONDS]      default 60; new inputs that raise coverage go to build-fuzz/corpus
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-60}"
out="$here/build-fuzz"
mkdir -p "$out/generated" "$out/corpus"
cat > "$out/generated/precsim_commit.h" <<H
#pragma once
#define PRECSIM_GIT_COMMIT "fuzz"
H
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -ffp-contract=off -fopenmp
       -I"$here/formats/include" -I"$here/reports/include" -I"$out/generated"
       -DPRECSIM_VERSION='"fuzz"' -DPRECSIM_BUILD_TYPE='"fuzz"')
clang++ "${flags[@]}" "$here/tests/fuzz/report_reader_fuzz.cpp" "$here"/reports/src/*.cpp "$here"/formats/src/*.cpp \
  -o "$out/report_reader_fuzz" -lhwy -lfmt -lcrypto
cp -n "$here"/tests/fuzz/corpus/* "$out/corpus/" 2>/dev/null || true
"$out/report_reader_fuzz" -max_total_time="$seconds" -max_len=65536 "$out/corpus"
