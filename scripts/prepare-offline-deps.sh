#!/usr/bin/env bash
# Copies the sources of the build-only dependencies that an offline machine may lack (GoogleTest,
# nlohmann/json headers) from this machine's Debian packages into third_party/ (ignored by git),
# so they can travel with the working tree to a GPU box that has nvcc and cmake but no packages.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p third_party/nlohmann_json/include
rm -rf third_party/googletest
cp -r /usr/src/googletest third_party/googletest
cp -r /usr/include/nlohmann third_party/nlohmann_json/include/
du -sh third_party
