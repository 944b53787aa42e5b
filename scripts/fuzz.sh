#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz) into ./build-fuzz with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, and runs each for a bounded time through ctest (label fuzz).
# Usage: scripts/fuzz.sh [seconds per harness, default 20]. Longer runs: docs/verification.md.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
case "$seconds" in
  '' | *[!0-9]*) echo "usage: $0 [seconds per harness]" >&2; exit 2 ;;
esac
# fuzzer-no-link instruments the library for coverage without pulling in libFuzzer's main; the
# harnesses add -fsanitize=fuzzer themselves (tests/fuzz/CMakeLists.txt).
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# The parsers reach no reduction: the SIMD reductions are compiled for the baseline target only
# (Highway's HWY_COMPILE_ONLY_STATIC) instead of once per target under the sanitizers.
hwy="-DHWY_COMPILE_ONLY_STATIC"
# Host-only: no CUDA, MPI, benchmarks or examples, which the parsers do not need.
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_FLAGS="$san $hwy" \
  -DSYMMAR_WITH_CUDA=OFF -DSYMMAR_WITH_MPI=OFF -DSYMMAR_BUILD_BENCHMARKS=OFF -DSYMMAR_BUILD_EXAMPLES=OFF \
  -DSYMMAR_BUILD_FUZZERS=ON -DSYMMAR_FUZZ_SECONDS="$seconds"
# Only the harnesses and what they link: the GoogleTest suites in the same tree are not needed here.
cmake --build build-fuzz -j "$(nproc)" --target symmar_fuzzers
# Each harness runs in a process of its own: as many at once as there are cores.
ctest --test-dir build-fuzz -L fuzz --output-on-failure -j "$(nproc)"
