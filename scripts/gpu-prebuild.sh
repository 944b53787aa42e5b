#!/usr/bin/env bash
# Builds the GPU check's tree on a machine without a GPU, for a GPU machine where building would
# eat the time it is lent for: `bash scripts/gpu-prebuild.sh`, then send the working tree with
# build-gpucheck/ and third_party/ and run `PREBUILT=1 bash scripts/gpu-check.sh` there, from the
# tree's root (any path: gpu-check.sh points this tree's paths there).
#
# The GPU machine needs the same CPU architecture (x86-64 here), a CUDA driver for this toolkit's
# major version, and a C++ runtime at least as new as this one; the binaries link no MPI (that
# machine may have none) and find Highway in third_party/. The test lists are made here too
# (ctest -N runs each test binary's discovery), so that CTest there needs nothing of this
# machine's CMake.
#
# Environment: BUILD_DIR (default ./build-gpucheck), CUDA_ARCH (default 90-real: H100/H200),
# JOBS (default nproc).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD_DIR:-$ROOT/build-gpucheck}
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ ! -f third_party/googletest/CMakeLists.txt ] || [ ! -d third_party/highway ]; then
  bash scripts/prepare-offline-deps.sh
fi
LAUNCH=()
if command -v ccache >/dev/null; then
  LAUNCH=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90-real}" -DSYMMAR_WITH_MPI=OFF -DSYMMAR_BUILD_TESTS=ON \
  -DSYMMAR_BUILD_BENCHMARKS=ON -DSYMMAR_BUILD_EXAMPLES=OFF -DSYMMAR_WERROR=OFF \
  -DSYMMAR_GTEST_SRC="$ROOT/third_party/googletest" -DCMAKE_PREFIX_PATH="$ROOT/third_party/highway" "${LAUNCH[@]}"
cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" --target symmar_gpu_tests symmar_perf symmar_norm_perf_gpu symmar_tune
ctest --test-dir "$BUILD" -N -L gpu | tail -1
du -sh "$BUILD" third_party
# A machine lent by the minute may take a bounded tree (64 MiB with the sources, for one): the
# object files and static libraries are needed only to build again, never to run the check.
total=$(du -scb "$BUILD" third_party | tail -1 | cut -f1)
if [ "$total" -gt $((56 << 20)) ]; then
  echo "note: $((total >> 20)) MiB to send; without the object files and static libraries (not needed to run):" \
    "find $BUILD -name '*.o' -o -name '*.a' | xargs rm -f (a later build here then compiles again, from ccache)"
fi
