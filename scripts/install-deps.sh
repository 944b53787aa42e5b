#!/usr/bin/env bash
# Installs the Debian packages symmar builds and tests with (skips what is already there).
# The CUDA toolkit (nvcc) is expected under /usr/local/cuda; without it the host backend still builds.
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config libgtest-dev libbenchmark-dev nlohmann-json3-dev
          libopenmpi-dev openmpi-bin libopenblas-dev python3 python3-numpy python3-pytest python3-matplotlib
          python3-venv clang libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
