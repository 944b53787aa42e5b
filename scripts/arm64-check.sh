#!/usr/bin/env bash
# The host library built for 64-bit Arm and its unit tests run under qemu-aarch64, as on a Graviton
# or Grace server: the SIMD kernels at every Arm target Highway dispatches to (NEON, SVE, SVE2, and
# SVE_256 and SVE2_128 where the vector length is 256 or 128 bits) against the scalar reference,
# bit for bit. Installs Debian's cross compiler, qemu-user and the arm64 libraries where missing
# (root or sudo; adds the arm64 architecture to dpkg).
#   BUILD=<dir>  the build tree (default build-arm64)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-arm64}

missing=()
for p in g++-aarch64-linux-gnu qemu-user libc6:arm64 libhwy-dev:arm64 libgtest-dev:arm64; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

mkdir -p "$BUILD"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
  -DSYMMAR_WITH_CUDA=OFF -DSYMMAR_WITH_MPI=OFF -DSYMMAR_WITH_NCCL=OFF \
  -DSYMMAR_BUILD_BENCHMARKS=OFF -DSYMMAR_BUILD_EXAMPLES=OFF > "$BUILD/configure.log" ||
  { cat "$BUILD/configure.log"; exit 1; }
cmake --build "$BUILD" -j "$(nproc)" --target symmar_unit_tests

# qemu's default CPU has SVE2 with 512-bit vectors: every unit test, the SIMD ones at SVE2, SVE and
# NEON. Then the SIMD tests again where other targets or vector lengths come into play. Each run is
# one single-threaded qemu: they run side by side, as many at once as there are cores, each into a
# log of its own, printed in order once all are done. The staging ring's long multi-rank sequences
# are left to the native runs: under qemu their spinning rank threads took 350 of the default run's
# 440 s, and qemu on an x86 host keeps the host's strong memory order, so they test nothing Arm's
# weaker order could break that the native runs do not.
tests="$BUILD/tests/symmar_unit_tests"
runs=("default" 16 32 256)  # 128-bit (SVE2_128), 256-bit (SVE_256), 2048-bit vectors
run_one() {
  if [ "$1" = default ]; then
    qemu-aarch64 "$tests" --gtest_brief=1 \
      --gtest_filter='-StagingRing.CallsAroundTheRingMatchTheReference:StagingRing.CallsAcrossTheCallNumberWrapMatchTheReference:StagingRing.RanksThatDisagreeAllStageAtTheStartOfTheHalf'
  else
    echo "SIMD tests at $(($1 * 8))-bit SVE vectors:"
    QEMU_CPU="max,sve-default-vector-length=$1" qemu-aarch64 "$tests" --gtest_filter='Simd*' --gtest_brief=1
  fi
}
failed=0
per=$(nproc)
for ((i = 0; i < ${#runs[@]}; i += per)); do  # a batch of runs, one a core
  batch=("${runs[@]:i:per}")
  pids=()
  for r in "${batch[@]}"; do
    run_one "$r" > "$BUILD/qemu-$r.log" 2>&1 &
    pids+=($!)
  done
  for j in "${!batch[@]}"; do
    wait "${pids[$j]}" || failed=1
    cat "$BUILD/qemu-${batch[$j]}.log"
  done
done
[ "$failed" -eq 0 ] || { echo "arm64 unit tests under qemu failed"; exit 1; }
