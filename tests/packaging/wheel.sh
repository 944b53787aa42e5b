#!/bin/sh
# The wheel: `pip wheel` of the checkout (scikit-build-core runs the CMake build, host backend only
# to keep this test short; its build folder is kept under BUILD_DIR, so a rerun is incremental),
# installed into a fresh virtual environment, away from the checkout and with SYMMAR_LIBRARY and
# LD_LIBRARY_PATH unset. There the README's Python example allreduces across two processes, and the
# libraries loaded must be the wheel's own: libsymmar, and the libhwy it ships.
# Offline: no build isolation, no index; numpy comes from the system site packages.
# Exit 77 (skipped) without a python that has venv, pip, numpy and scikit-build-core.
#
#   wheel.sh SOURCE_DIR BUILD_DIR
set -eu
SRC=${1:?usage: wheel.sh SOURCE_DIR BUILD_DIR}
BIN=${2:?usage: wheel.sh SOURCE_DIR BUILD_DIR}
PY=""
for py in "${SYMMAR_PYTHON:-}" "${SYMMAR_VENV_PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$py" ] || continue
  if "$py" -c "import venv, ensurepip, pip, numpy, scikit_build_core" >/dev/null 2>&1; then PY=$py; break; fi
done
[ -n "$PY" ] || {
  echo "SKIP: no python3 with venv, pip, numpy and scikit-build-core (pip install scikit-build-core; set SYMMAR_PYTHON)" >&2
  exit 77
}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/symmar-wheel.XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM
unset SYMMAR_LIBRARY SYMMAR_MPI_LIBRARY LD_LIBRARY_PATH PYTHONPATH

echo "==== pip wheel $SRC ($("$PY" -c 'import scikit_build_core as s; print("scikit-build-core", s.__version__)'))"
"$PY" -m pip wheel "$SRC" --quiet --no-build-isolation --no-deps --no-index -w "$TMP/dist" \
  --config-settings=build-dir="$BIN/python-wheel" --config-settings=cmake.define.SYMMAR_WITH_CUDA=OFF
WHEEL=$(ls "$TMP"/dist/symmar-*.whl)

echo "==== install $(basename "$WHEEL") into a fresh venv"
"$PY" -m venv --system-site-packages "$TMP/venv"
"$TMP/venv/bin/python" -m pip install --quiet --no-deps --no-index "$WHEEL"

echo "==== the README's Python example, from $TMP"
cp "$SRC/examples/python/allreduce.py" "$TMP/"
cd "$TMP"
"$TMP/venv/bin/python" allreduce.py 2

"$TMP/venv/bin/python" - "$SRC" <<'PYEOF'
import os
import sys

import numpy as np

import symmar

site = os.path.dirname(os.path.realpath(symmar.__file__))
checkout = os.path.realpath(sys.argv[1])
assert site.startswith(os.path.realpath(sys.prefix)), "symmar imported from %s, not the venv" % site
assert symmar.library_path() == os.path.join(site, "libsymmar.so.0"), symmar.library_path()
assert symmar.__version__ == "%d.%d.%d" % symmar.version(), (symmar.__version__, symmar.version())
comms = symmar.Comm.init_all(1, devices=["cpu"])
assert np.array_equal(comms[0].all_reduce(np.arange(10, dtype=np.float16)), np.arange(10, dtype=np.float16))
comms[0].close()
maps = open("/proc/self/maps").read().split()
loaded = sorted({p for p in maps if p.startswith("/") and ("libsymmar" in p or "libhwy" in p)})
assert loaded, "no libsymmar or libhwy mapped"
for path in loaded:
    real = os.path.realpath(path)
    assert real.startswith(site + os.sep), "%s is not the wheel's (%s)" % (path, site)
    assert not real.startswith(checkout + os.sep), path
print("wheel %s: version %s, libraries %s" % (os.path.basename(site), symmar.__version__, ", ".join(loaded)))
PYEOF

# The compiled torch op kernels, when the build's Python had torch: the wheel's copy loads into
# that Python's torch (the fresh venv above has no torch) and serves a call.
if "$PY" -c 'import sys, zipfile; sys.exit("symmar/libsymmar_torch.so" not in zipfile.ZipFile(sys.argv[1]).namelist())' "$WHEEL"; then
  echo "==== the wheel's libsymmar_torch with $("$PY" -c 'import torch; print("torch", torch.__version__)')"
  SITE=$("$TMP/venv/bin/python" -c 'import os, symmar; print(os.path.dirname(os.path.dirname(symmar.__file__)))')
  PYTHONPATH="$SITE" "$PY" - <<'PYEOF'
import os

import torch

import symmar
import symmar.torch  # noqa: F401
from symmar import ops

assert os.path.dirname(symmar.library_path()) == os.path.dirname(symmar.__file__), symmar.library_path()
assert ops.compiled, "the wheel's libsymmar_torch did not load"
(comm,) = symmar.Comm.init_all(1, devices=["cpu"])
x = torch.arange(6, dtype=torch.bfloat16)
torch.ops.symmar.all_reduce_(x, ops.handle(comm))
assert torch.equal(x, torch.arange(6, dtype=torch.bfloat16))
comm.close()
print("wheel's libsymmar_torch: loaded and served a call")
PYEOF
else
  echo "==== no libsymmar_torch in the wheel (the build's Python has no torch)"
fi
