#!/usr/bin/env bash
# scripts/gpu-check.sh over this build tree as a prebuilt one (PREBUILT=1, ARCHIVE), where no GPU
# is present: each step that runs GPU tests must find some (they skip, saying why) and pass, and
# the archive must hold the summary. A filter that matches no test name fails its step (CMake
# 3.25 names a parameterised test with a "  # GetParam() = ..." comment after the parameter, which
# once left the sweeps' filters with nothing to run). With a GPU present the whole check would run
# for minutes: skipped.
#   gpu_check_prebuilt.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -u
root=$1 build=$2 work=$3
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "a GPU is present: run scripts/gpu-check.sh itself"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work"
ARCHIVE="$work/logs.tgz" PREBUILT=1 BUILD_DIR="$build" OUT="$work/out" BUDGET_S=150 \
  bash "$root/scripts/gpu-check.sh" >"$work/check.log" 2>&1
summary="$work/out/summary.md"
[ -f "$summary" ] || { echo "no summary: see $work/check.log"; exit 1; }
steps=$(grep -cE '^\| gpu tests' "$summary")
failed=$(grep -E '^\| gpu tests' "$summary" | grep -v '| ok |')
if [ "$steps" -lt 5 ] || [ -n "$failed" ]; then
  echo "GPU test steps: $steps (5 or more expected); not ok:"
  echo "$failed"
  exit 1
fi
tar -tzf "$work/logs.tgz" | grep -q 'summary.md' || { echo "the archive lacks summary.md"; exit 1; }
echo "$steps GPU test steps found their tests and passed (skipped without a GPU); archive written"
