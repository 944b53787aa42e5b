#!/bin/sh
# Runs the Python binding's tests with the first interpreter that has numpy and pytest:
# $SYMMAR_PYTHON, $SYMMAR_VENV_PYTHON (ctest sets it: the install step's venv), python3 on PATH,
# /usr/bin/python3. Exit 77 (ctest: skipped) if there is none.
# SYMMAR_LIBRARY must point at the built libsymmar (ctest sets it).
set -eu
TESTS=${1:?usage: run_pytest.sh PYTHON_TESTS_DIR}
[ -n "${SYMMAR_LIBRARY:-}" ] || { echo "SYMMAR_LIBRARY is not set" >&2; exit 1; }
for py in "${SYMMAR_PYTHON:-}" "${SYMMAR_VENV_PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$py" ] || continue
  command -v "$py" >/dev/null 2>&1 || continue
  if "$py" -c "import numpy, pytest" >/dev/null 2>&1; then
    echo "python: $(command -v "$py") ($("$py" --version 2>&1)); SYMMAR_LIBRARY=$SYMMAR_LIBRARY"
    exec "$py" -m pytest -q -rs -p no:cacheprovider "$TESTS"
  fi
done
echo "SKIP: no python3 with numpy and pytest (set SYMMAR_PYTHON)" >&2
exit 77
