#!/usr/bin/env bash
# Copies the dependencies that an offline machine may lack (GoogleTest, nlohmann/json headers,
# Highway) from this machine's Debian packages into third_party/ (ignored by git), so they can
# travel with the working tree to a GPU box that has nvcc and cmake but no packages.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p third_party/nlohmann_json/include
rm -rf third_party/googletest
cp -r /usr/src/googletest third_party/googletest
cp -r /usr/include/nlohmann third_party/nlohmann_json/include/
# Highway in the package's own layout, so its CMake package's relative paths hold: configure with
# -DCMAKE_PREFIX_PATH=third_party/highway, run with its lib/<multiarch> on LD_LIBRARY_PATH
# (libsymmar.so needs libhwy.so.1; scripts/gpu-check.sh does both).
multiarch=$(gcc -print-multiarch)
rm -rf third_party/highway
mkdir -p third_party/highway/include "third_party/highway/lib/$multiarch/cmake"
cp -r /usr/include/hwy third_party/highway/include/
cp -a /usr/lib/"$multiarch"/libhwy*.so* "third_party/highway/lib/$multiarch/"
cp -r /usr/lib/"$multiarch"/cmake/hwy "third_party/highway/lib/$multiarch/cmake/"
du -sh third_party
