#!/bin/sh
# vllm_decode.py in the vLLM venv (scripts/install-vllm.sh; $SYMMAR_VLLM_VENV), bfloat16 then
# float32, with symmar's plugin entry point registered from this checkout (python/ on PYTHONPATH,
# SYMMAR_LIBRARY: this checkout's build/src/libsymmar.so unless set). Extra arguments go to the script.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${SYMMAR_VLLM_VENV:-/var/cache/symmar-vllm-venv}/bin/python
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
plugin_group=vllm.general_plugins plugin_target=symmar.integrations.vllm:register
. "$root/tests/engines/register_plugin.sh"
export SYMMAR_VLLM=1
export SYMMAR_LIBRARY=${SYMMAR_LIBRARY:-$root/build/src/libsymmar.so}
export VLLM_CPU_KVCACHE_SPACE=2 VLLM_CPU_OMP_THREADS_BIND='0|1'
# Each engine in a session of its own, killed with it: vLLM's workers outlive the script's exit.
reap='import os, signal, subprocess, sys
p = subprocess.Popen(sys.argv[1:], start_new_session=True)
rc = p.wait()
try:
    os.killpg(p.pid, signal.SIGKILL)
except ProcessLookupError:
    pass
sys.exit(rc)'
for dtype in bfloat16 float32; do
  "$py" -c "$reap" "$py" "$here/vllm_decode.py" --dtype "$dtype" "$@"
done
