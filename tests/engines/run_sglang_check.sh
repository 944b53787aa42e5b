#!/bin/sh
# ctest sglang_engine: check_sglang_plugin.py in the venv scripts/install-sglang.sh fills
# ($SYMMAR_VLLM_VENV, default /var/cache/symmar-vllm-venv), with symmar's plugin entry point
# registered by a dist-info of its own (the checkout's python/ on PYTHONPATH, this build's libsymmar
# through SYMMAR_LIBRARY, which ctest sets). Exit 77 (skipped, with the reason) without SGLang there.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${SYMMAR_VLLM_VENV:-/var/cache/symmar-vllm-venv}/bin/python
if ! [ -x "$py" ] || ! "$py" -c "import sglang.srt.distributed.parallel_state" >/dev/null 2>&1; then
  echo "SKIP: no SGLang in ${py%/bin/python} (scripts/install-sglang.sh installs it there)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
plugin_group=sglang.srt.plugins plugin_target=symmar.integrations.sglang:register
. "$here/register_plugin.sh"
exec "$py" "$here/check_sglang_plugin.py" "$work"
