#!/usr/bin/env bash
# Configures and builds symmar into ./build (kernels for sm_90, sm_100 and sm_120 when nvcc exists).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/cuda/bin:$PATH"
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
fi
cmake --build build -j "$(nproc)"
