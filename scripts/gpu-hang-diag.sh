#!/usr/bin/env bash
# Runs a command and, if it is still running after WAIT_S seconds (a run that passes ends sooner),
# attaches cuda-gdb once to record where it stands: the kernels resident on the GPU and every
# host thread's stack. Then lets the command finish on its own (its timeouts end a hang).
#
#   WAIT_S=4 bash scripts/gpu-hang-diag.sh <log prefix> <command> [args...]
#
# Writes <prefix>.out (the command's output) and, for a run caught running, <prefix>.gdb.
# Exits with the command's status. Needs cuda-gdb on PATH or next to nvcc.
set -u
prefix=$1
shift
wait_s=${WAIT_S:-4}
gdb=$(command -v cuda-gdb || echo "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")/cuda-gdb")
"$@" >"$prefix.out" 2>&1 &
pid=$!
for _ in $(seq 1 $((wait_s * 10))); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$pid" 2>/dev/null; then
  timeout --kill-after=5 60 "$gdb" -q -batch -p "$pid" -ex "info cuda kernels" -ex "info cuda blocks" \
    -ex "thread apply all bt 24" -ex detach >"$prefix.gdb" 2>&1
  echo "caught running after ${wait_s}s; cuda-gdb status $?" >>"$prefix.gdb"
fi
wait "$pid"
