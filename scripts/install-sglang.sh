#!/usr/bin/env bash
# SGLang for the engine test (ctest sglang_engine, tests/engines/): PyPI's sglang 0.5.23 without its
# dependencies (CUDA kernels, FlashInfer: GPU serving needs them, the plugin check does not), into
# the vLLM venv that scripts/install-vllm.sh makes (torch, transformers), pinned in
# tests/engines/sglang-requirements.txt. About 40 MB more, under a minute here. Without it the test
# skips and says why.
set -euo pipefail
here=$(dirname "$0")
bash "$here/install-vllm.sh"
venv=${SYMMAR_VLLM_VENV:-/var/cache/symmar-vllm-venv}
if ! "$venv/bin/python" -c "import sglang.srt.distributed.parallel_state" >/dev/null 2>&1; then
  "$venv/bin/pip" install -q --no-deps -r "$here/../tests/engines/sglang-requirements.txt"
fi
