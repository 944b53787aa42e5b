#!/usr/bin/env bash
# Installs the Debian packages symmar builds and tests with (skips what is already there).
# The CUDA toolkit (nvcc) is expected under /usr/local/cuda; without it the host backend still builds.
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config libgtest-dev libbenchmark-dev nlohmann-json3-dev libhwy-dev
          libopenmpi-dev openmpi-bin libopenblas-dev python3 python3-numpy python3-pytest python3-matplotlib
          python3-venv clang libclang-rt-14-dev ccache)
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

# The Python binding's engine tests (symmar.torch, symmar.mpi) need PyTorch and mpi4py, from PyPI
# into a virtual environment kept outside any checkout and reused: PyPI's torch wheel pulls its
# CUDA libraries (about 5.4 GB installed, about a minute here); its CPU path needs no GPU. mpi4py is
# built against the Debian Open MPI above, so libsymmar_mpi and mpi4py share one MPI. A failed
# download leaves a warning: those tests then skip and say why.
venv=${SYMMAR_VENV:-/var/cache/symmar-venv}
if ! "$venv/bin/python" -c "import numpy, pytest, torch, mpi4py" >/dev/null 2>&1; then
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q numpy pytest || echo "WARNING: numpy/pytest not installed in $venv" >&2
  "$venv/bin/pip" install -q torch || echo "WARNING: torch not installed in $venv: its tests will skip" >&2
  MPICC=mpicc "$venv/bin/pip" install -q --no-binary mpi4py mpi4py ||
    echo "WARNING: mpi4py not installed in $venv: its tests will skip" >&2
fi
# scikit-build-core: the build backend of `pip install .` (pyproject.toml), for the wheel test.
if ! "$venv/bin/python" -c "import scikit_build_core" >/dev/null 2>&1; then
  "$venv/bin/pip" install -q "scikit-build-core>=0.10" ||
    echo "WARNING: scikit-build-core not installed in $venv: the wheel test will skip" >&2
fi

