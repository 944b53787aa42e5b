#!/bin/sh
# `pip install ./python` into a fresh virtual environment (offline: no build isolation, no
# dependency download; numpy comes from the system site packages), then the installed package
# plans and allreduces through the libsymmar it shipped (the build's, copied by setup.py), with
# SYMMAR_LIBRARY unset. Exit 77 (skipped) without a venv-capable python.
set -eu
SRC=${1:?usage: pip_install.sh PYTHON_SRC_DIR}
[ -n "${SYMMAR_LIBRARY:-}" ] || { echo "SYMMAR_LIBRARY is not set" >&2; exit 1; }
PY=""
for py in "${SYMMAR_PYTHON:-}" /usr/bin/python3 python3; do
  [ -n "$py" ] || continue
  if "$py" -c "import venv, ensurepip, numpy" >/dev/null 2>&1; then PY=$py; break; fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 with venv, ensurepip and numpy (set SYMMAR_PYTHON)" >&2; exit 77; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/symmar-pip.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
"$PY" -m venv --system-site-packages "$TMP/venv"
cp -r "$SRC" "$TMP/src"  # setuptools writes build files next to the sources
"$TMP/venv/bin/python" -m pip install --quiet --no-build-isolation --no-deps --no-index "$TMP/src"
cd "$TMP"
env -u SYMMAR_LIBRARY "$TMP/venv/bin/python" - <<'PYEOF'
import sys
import numpy as np
import symmar
assert symmar.__file__.startswith(sys.prefix), symmar.__file__
assert symmar.library_path().startswith(sys.prefix), symmar.library_path()  # the shipped copy
algo = symmar.plan(cc=(12, 0), link="pcie", world=4, multicast=False, count=7168, dtype="bfloat16", op="sum")
assert algo in ("oneshot", "twoshot"), algo
comms = symmar.Comm.init_all(1, devices=["cpu"])
x = np.arange(10, dtype=np.float32)
out = comms[0].all_reduce(x)
assert np.array_equal(out, x), out
comms[0].close()
print("pip-installed symmar:", symmar.__file__, "plan:", algo)
PYEOF
