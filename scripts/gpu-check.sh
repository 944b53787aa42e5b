#!/usr/bin/env bash
# GPU check: configure for the GPU present, build, run the gpu-labelled tests and a short
# benchmark sweep, and write logs plus a summary table. Meant for an offline GPU box with nvcc,
# cmake and ninja but no GoogleTest package; finishes within ~8 minutes (every step is bounded).
#
# Environment (all optional):
#   OUT        where logs and summary.md go (default: ./gpu-results)
#   BUILD_DIR  build directory (default: ./build-gpucheck)
#   GTEST_SRC  GoogleTest source tree (default: third_party/googletest if present, else /usr/src/googletest)
#   CUDA_ARCH  CMAKE_CUDA_ARCHITECTURES (default: from nvidia-smi, else "native")
#   JOBS       build parallelism (default: nproc)
#   BUDGET_S   total time budget in seconds (default: 470)
#   PREBUILT   1: use BUILD_DIR as it is (scripts/gpu-prebuild.sh on a machine of the same CPU
#              architecture and CUDA major version), skipping configure and build; a tree built
#              at another path is linked from there; if its test binary does not start here,
#              it builds anew in BUILD_DIR-here
#   ARCHIVE    also pack every log and the summary into this .tar.gz (one file to send back)
#   WERROR     ON/OFF for SYMMAR_WERROR (default OFF: another host compiler may warn differently)
#   TARGETS    build targets (default: the GPU tests and the benchmarks; "all" for everything)
#   PLAN       full (default): every check below; settle: the short run of scripts/gpu-settle-plan.sh
#              (about 6 minutes: never-run code, the fused call, latency, bandwidth)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$PWD/gpu-results}
BUILD=${BUILD_DIR:-$PWD/build-gpucheck}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
BUDGET=${BUDGET_S:-470}
START=$(date +%s)
mkdir -p "$OUT"
SUMMARY="$OUT/summary.md"
ROWS=()

left() { echo $((BUDGET - ($(date +%s) - START))); }
# step NAME LOG LIMIT CMD...: runs CMD bounded by min(LIMIT, time left), records a summary row.
step() {
  local name=$1 log=$2 limit=$3
  shift 3
  local avail
  avail=$(left)
  if [ "$avail" -lt 20 ]; then
    ROWS+=("| $name | skipped (time budget spent) | 0 |")
    return 1
  fi
  [ "$limit" -gt "$avail" ] && limit=$avail
  local t0=$(date +%s) rc
  timeout --kill-after=10 "$limit" "$@" >"$OUT/$log" 2>&1
  rc=$?
  local dt=$(($(date +%s) - t0)) status="ok"
  [ $rc -ne 0 ] && status="FAILED (rc $rc)"
  [ $rc -eq 124 ] && status="TIMED OUT after ${limit}s"
  [ $rc -eq 77 ] && status="skipped (see $log)"
  ROWS+=("| $name | $status | $dt |")
  return $rc
}

# --- the machine ---
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo none)"
  nvidia-smi -L 2>&1
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv 2>&1
  nvidia-smi topo -m 2>&1
  command -v nvcc >/dev/null && nvcc --version | tail -2
  cmake --version | head -1
} >"$OUT/machine.log" 2>&1

if [ -z "${CUDA_ARCH:-}" ]; then
  CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  CUDA_ARCH=${CAP:+${CAP}-real}
  CUDA_ARCH=${CUDA_ARCH:-native}
fi
if [ -z "${GTEST_SRC:-}" ]; then
  if [ -f "$ROOT/third_party/googletest/CMakeLists.txt" ]; then GTEST_SRC=$ROOT/third_party/googletest
  else GTEST_SRC=/usr/src/googletest; fi
fi
# Highway from third_party/ (scripts/prepare-offline-deps.sh) where the machine has none: found by
# the configure step, and its runtime library by every binary.
HWY_PREFIX=()
for hwy_lib in "$ROOT"/third_party/highway/lib/*/; do
  [ -d "$hwy_lib" ] || continue
  export LD_LIBRARY_PATH="${hwy_lib%/}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  HWY_PREFIX=(-DCMAKE_PREFIX_PATH="$ROOT/third_party/highway")
done
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
# NCCL for the fallback: the pip wheel's library when no system one is configured.
if [ -z "${SYMMAR_NCCL_LIB:-}" ]; then
  lib=$(python3 -c 'import nvidia.nccl as n, os; print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
  [ -n "$lib" ] && [ -f "$lib" ] && export SYMMAR_NCCL_LIB=$lib
fi
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)

configured=0
built=0
if [ "${PREBUILT:-0}" = 1 ] && [ -f "$BUILD/CTestTestfile.cmake" ]; then
  # A tree built at another path (scripts/gpu-prebuild.sh) names that path's files in CTest's
  # scripts: where that path is free here, it becomes a link to this tree's root.
  built_root=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
  if [ -n "$built_root" ] && [ "$built_root" != "$ROOT" ] && [ ! -e "$built_root" ]; then
    mkdir -p "$(dirname "$built_root")" && ln -s "$ROOT" "$built_root"
  fi
  # Test lists made where the tree was built are kept only while newer than their binaries; a copy
  # need not keep the times, and rediscovery would need that machine's CMake modules.
  find "$BUILD" -name '*_tests.cmake' -exec touch {} +
  # Binaries from another machine's image may miss a library here: then build here after all, in
  # a tree of its own, rather than lose the run.
  if "$BUILD/tests/gpu/symmar_gpu_tests" --gtest_list_tests >"$OUT/prebuilt_check.log" 2>&1; then
    ROWS+=("| prebuilt $BUILD (configure and build skipped; built at ${built_root:-?}) | ok | 0 |")
    configured=1
    built=1
  else
    ROWS+=("| prebuilt $BUILD does not run here (prebuilt_check.log): built in $BUILD-here | FAILED | 0 |")
    BUILD=$BUILD-here
  fi
fi
if [ $configured -eq 0 ]; then
  step "configure (arch $CUDA_ARCH)" configure.log 120 \
    cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$NVCC" \
    -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" -DSYMMAR_BUILD_TESTS=ON -DSYMMAR_BUILD_BENCHMARKS=ON \
    -DSYMMAR_BUILD_EXAMPLES=OFF -DSYMMAR_WERROR="${WERROR:-OFF}" -DSYMMAR_GTEST_SRC="$GTEST_SRC" "${HWY_PREFIX[@]}" \
    && configured=1
fi

if [ $configured -eq 1 ] && [ $built -eq 0 ]; then
  read -r -a targets <<<"${TARGETS:-symmar_gpu_tests symmar_perf symmar_norm_perf_gpu symmar_tune}"
  step "build (-j$JOBS)" build.log 300 cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" && built=1
fi

TESTS="not run"
GPU_TESTS="$BUILD/tests/gpu/symmar_gpu_tests"
SANITIZER=$(command -v compute-sanitizer || echo "$(dirname "$NVCC")/compute-sanitizer")
NORM_PERF="$BUILD/benchmarks/symmar_norm_perf_gpu"
PERF="$BUILD/benchmarks/symmar_perf"
full=$built  # 1: the full plan's steps below run
if [ "${PLAN:-full}" = settle ]; then
  [ $built -eq 1 ] && . "$ROOT/scripts/gpu-settle-plan.sh"
  full=0
fi
if [ $full -eq 1 ]; then
  # Quick single-purpose checks first, the long sweeps last, so a slow sweep cannot crowd the
  # hardening checks out of the budget: probes, fused and host-staged; the fused two-shot form with
  # FP8 output at odd hidden sizes under compute-sanitizer (a misaligned access is caught there);
  # calls back to back with PDL on and off (SYMMAR_CHAIN_CALLS per chain); lamport across its wrap,
  # graphs, epochs, failures and NCCL; then the sweeps at worlds 2 and 8.
  step "gpu tests: topology, co-scheduling, fused, host-staged, errors" ctest_gpu_1_quick.log 60 \
    ctest --test-dir "$BUILD" -L gpu -R '^(GpuTopology|GpuCoSchedule|GpuFused|GpuHostStaged|GpuErrors)\.' \
    --output-on-failure --no-tests=error
  if [ -x "$SANITIZER" ] && [ -x "$GPU_TESTS" ]; then
    step "fused two-shot FP8, odd hidden, compute-sanitizer memcheck" sanitizer_fp8.log 60 \
      "$SANITIZER" --tool memcheck --error-exitcode 1 "$GPU_TESTS" --gtest_filter=GpuFused.TwoShotFp8OddHidden
  else
    ROWS+=("| compute-sanitizer | not found (skipped) | 0 |")
  fi
  # Ranks as threads, each issuing its own calls early in a comm's life (a hang seen on the first
  # run, before comm creation loaded every kernel): as built, then with every module loaded at
  # start and without programmatic dependent launch, so that one run tells which it follows.
  step "gpu tests: kernels loaded at creation, early calls from rank threads" ctest_gpu_1b_rank_threads.log 45 \
    ctest --test-dir "$BUILD" -L gpu -R '^(GpuKernelLoading|GpuRankThreads)\.' --output-on-failure --no-tests=error
  if [ -x "$GPU_TESTS" ]; then
    step "early calls from rank threads, CUDA_MODULE_LOADING=EAGER" rank_threads_eager.log 45 \
      env CUDA_MODULE_LOADING=EAGER "$GPU_TESTS" --gtest_filter='GpuRankThreads.*'
    step "early calls from rank threads, SYMMAR_PDL=0" rank_threads_pdl_off.log 45 \
      env SYMMAR_PDL=0 "$GPU_TESTS" --gtest_filter='GpuRankThreads.*'
  fi
  step "gpu tests: back-to-back chain, PDL on and off" ctest_gpu_2_chain.log 150 env SYMMAR_CHAIN_CALLS=600 \
    ctest --test-dir "$BUILD" -L gpu -R '^GpuChain\.' --output-on-failure --no-tests=error
  step "gpu tests: lamport wrap, graphs, epochs, failures, NCCL" ctest_gpu_3_state.log 90 \
    ctest --test-dir "$BUILD" -L gpu -R '^(GpuEpochs|GpuGraph|GpuFailure|GpuNccl)\.' --output-on-failure --no-tests=error
  # torch.ops.symmar with CUDA tensors: eager, torch.compile(fullgraph) and CUDA graph replay.
  step "torch ops on a GPU comm: eager, compiled, graph replay" torch_ops_gpu.log 90 \
    env SYMMAR_LIBRARY="$BUILD/src/libsymmar.so" python3 "$ROOT/python/tests/gpu_torch_check.py"
  # A parameterised test's name ends in its world, or, as CMake 3.25 discovers it, in a comment
  # with the parameter after it ("..._world2  # GetParam() = (1, 2)").
  step "gpu tests: sweeps at worlds 2 and 8" ctest_gpu_4_sweep.log 120 \
    ctest --test-dir "$BUILD" -L gpu -R 'SharedGpuSweep.*_world(2|8)( |$)' --output-on-failure --no-tests=error
  step "gpu tests: reduce-scatter and all-gather at worlds 2 and 8" ctest_gpu_5_scatter_gather.log 60 \
    ctest --test-dir "$BUILD" -L gpu -R 'SharedGpuScatterGather.*world(2|8)( |$)' --output-on-failure --no-tests=error
fi

# A benchmark whose ranks stop meeting fails after this bound, not the default 30 s.
export SYMMAR_TIMEOUT_MS=${SYMMAR_TIMEOUT_MS:-5000}
# The start-up log of a shared-GPU comm: driver vs toolkit (driver entry points asked at their ABI
# version), the co-scheduling probe's verdict, the NCCL communicator made with the comm.
if [ $full -eq 1 ] && [ -x "$PERF" ]; then
  step "start-up log (INFO)" startup_info.log 60 env SYMMAR_DEBUG=INFO \
    "$PERF" --device gpu --local-world 4 -A oneshot -b 8 -e 8 -n 5 -w 1
fi
# The host-memory path (what PCIe boxes without working P2P run), forced on this GPU, next to the
# peer path; NCCL cannot put two ranks on one GPU, so its NCCL_P2P_DISABLE=1 comparison needs 2+ GPUs.
if [ $full -eq 1 ] && [ -x "$PERF" ]; then
  step "symmar_perf local world 4, SYMMAR_P2P=off (host memory)" perf_hoststaged_world4.log 40 env SYMMAR_P2P=off \
    "$PERF" --device gpu --local-world 4 -A oneshot,twoshot -b 8 -e 16M -f 4
fi
# The barrier-free lamport one-shot against the barrier one-shot over the decode range.
if [ $full -eq 1 ] && [ -x "$PERF" ]; then
  step "symmar_perf local world 4, lamport vs oneshot" perf_lamport_world4.log 40 \
    "$PERF" --device gpu --local-world 4 -A lamport,oneshot -b 4 -e 256K -f 4
  # The same run again: it timed out at its first call in about half the runs until symmar_perf
  # settled each rank's set-up before the ranks met (docs/gpu-results.md).
  for i in 1 2 3 4 5; do
    step "symmar_perf local world 4, lamport vs oneshot, repeat $i" "perf_lamport_world4_repeat$i.log" 20 \
      "$PERF" --device gpu --local-world 4 -A lamport,oneshot -b 4 -e 256K -f 4
  done
fi
if [ $full -eq 1 ] && [ -x "$PERF" ]; then
  for n in 2 4 8; do
    step "symmar_perf local world $n" "perf_world$n.log" 45 \
      "$PERF" --device gpu --local-world "$n" -A all -b 8 -e 64M -f 4
  done
  # The latencies docs/gpu-results.md quotes at exactly 16 KiB and 256 KiB (the sweep steps past them).
  for n in 2 4 8; do
    step "symmar_perf local world $n at 16 KiB and 256 KiB" "perf_16k_256k_world$n.log" 20 \
      "$PERF" --device gpu --local-world "$n" -A oneshot,twoshot,lamport -b 16K -e 256K -f 16
  done
elif [ $full -eq 1 ]; then
  ROWS+=("| symmar_perf | not built (skipped) | 0 |")
fi
# The large-message ceiling: this GPU's own device-to-device copy, next to the sweeps above.
if [ $full -eq 1 ]; then
  step "device-to-device copy bandwidth (torch)" gpu_copy_bandwidth.log 30 \
    python3 "$ROOT/benchmarks/gpu_copy_bandwidth.py" --min 1M --max 1G
fi
# The fused call against an allreduce + an engine's add + RMSNorm kernel, decode shapes; each
# token count first checks that the two agree.
if [ $full -eq 1 ] && [ -x "$NORM_PERF" ]; then
  for n in 2 4 8; do
    step "fused vs allreduce + separate pass, local world $n, hidden 7168 bf16" "norm_perf_world$n.log" 45 \
      "$NORM_PERF" --local-world "$n" --hidden 7168 --tokens 1,2,4,8,16,32,64
  done
fi
# Reduce-scatter and all-gather, last (what time is left): the kernels, and NCCL's where it runs
# (it needs a GPU per rank; on one GPU the step shows the kernels alone).
if [ $full -eq 1 ] && [ -x "$PERF" ]; then
  for coll in reducescatter allgather; do
    step "symmar_perf local world 4, $coll" "perf_${coll}_world4.log" 40 \
      "$PERF" --device gpu --local-world 4 -C "$coll" -A all -b 8 -e 16M -f 4
  done
fi

# The sweeps at the other worlds (3, 4, 5), with what time is left.
if [ $full -eq 1 ]; then
  step "gpu tests: sweeps at worlds 3, 4 and 5" ctest_gpu_6_sweep_more.log 90 \
    ctest --test-dir "$BUILD" -L gpu -R 'SharedGpu(Sweep|ScatterGather).*_?world[345]( |$)' --output-on-failure \
    --no-tests=error
fi

# With what time is left: table files measured here, for ranks sharing this GPU (docs/tuning.md).
TUNE="$BUILD/benchmarks/symmar_tune"
if [ $full -eq 1 ] && [ -x "$TUNE" ]; then
  for n in 2 4 8; do
    step "symmar_tune local world $n" "tune_world$n.log" 60 \
      "$TUNE" --device gpu --local-world "$n" -b 8 -e 16M -f 4 -n 20 -w 3 --out "$OUT/tuned_world$n.json"
    step "symmar_tune -C addrmsnorm local world $n" "tune_fused_world$n.log" 60 \
      "$TUNE" -C addrmsnorm --device gpu --local-world "$n" --hidden 7168 -n 30 --out "$OUT/tuned_fused_world$n.json"
  done
fi

if [ $built -eq 1 ]; then
  TESTS=$(cat "$OUT"/ctest_gpu*.log "$OUT"/settle_1_tests.log 2>/dev/null | grep -E "tests passed|tests failed" | tr '\n' ';')
  cat "$OUT"/ctest_gpu*.log "$OUT"/settle_1_tests.log 2>/dev/null | grep -E "Test +#[0-9]+:" | sed -E 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: //' \
    >"$OUT/ctest_gpu_results.txt"
fi
{
  echo "# symmar GPU check"
  echo
  echo "GPU: $(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null | head -1)"
  echo "CUDA architectures: $CUDA_ARCH; GoogleTest sources: $GTEST_SRC; total $(($(date +%s) - START)) s"
  echo
  echo "| step | result | seconds |"
  echo "|---|---|---|"
  printf '%s\n' "${ROWS[@]}"
  echo
  echo "ctest: ${TESTS:-no summary line}"
  if [ -s "$OUT/ctest_gpu_results.txt" ]; then
    echo
    echo "| test | result |"
    echo "|---|---|"
    sed -E 's/^([^ ]+) [ .*]+ *(Passed|\*\*\*Failed|\*\*\*Timeout|\*\*\*Skipped|Not Run|[A-Za-z*]+)(.*)$/| \1 | \2\3 |/' \
      "$OUT/ctest_gpu_results.txt"
  fi
  echo
  echo "## hardening checks"
  echo
  for t in GpuCoSchedule.RanksSharingAGpuKeepTheKernels GpuTopology.SharedGpuReportsPeerLink \
    GpuFailure.AfterATimeoutTheLateRankProducesNoData GpuFailure.MissingRankTimesOut GpuNccl.FirstCallInsideACapture \
    GpuHostStaged.P2pOffRunsTheKernelsThroughHostMemory GpuFused.AddRmsNormMatchesTheReference \
    GpuFused.TwoShotFp8OddHidden GpuChain.BackToBackMixedCallsPdlOn GpuChain.BackToBackMixedCallsPdlOff \
    GpuEpochs.LamportCallNumberWraps GpuKernelLoading.CommCreationLoadsEveryKernelACallCanLaunch \
    GpuRankThreads.EarlyCallsOfEachKindFromTheirOwnThreads GpuErrors.AFailureSymmarReportsIsNotLeftInTheRuntimesLastError; do
    echo "- $t: $(grep -E "symmar_gpu_tests.*$t|$t" "$OUT/ctest_gpu_results.txt" 2>/dev/null | head -1 | grep -oE "Passed|Failed|Skipped|Timeout" || echo "not run")"
  done
  if [ -f "$OUT/startup_info.log" ]; then
    echo "- driver vs toolkit: $(grep -m1 -oE "CUDA driver [0-9.]+, toolkit [0-9.]+" "$OUT/startup_info.log" || echo "no line")"
    echo "- co-scheduling probe: $(grep -m1 -oE "co-scheduling probe: .*" "$OUT/startup_info.log" || echo "no line")"
    echo "- grid / blocks: $(grep -m1 -oE "CUDA backend ready: .*" "$OUT/startup_info.log" || echo "no line")"
  fi
  for f in "$OUT"/perf_world*.log "$OUT"/perf_16k_256k*.log "$OUT"/perf_hoststaged*.log "$OUT"/perf_lamport_world4.log "$OUT"/gpu_copy_bandwidth.log \
    "$OUT"/norm_perf_world*.log "$OUT"/settle_[234]_*.log; do
    [ -f "$f" ] || continue
    echo
    echo "## $(basename "$f" .log)"
    echo '```'
    tail -40 "$f"
    echo '```'
  done
} >"$SUMMARY"
cat "$SUMMARY"
if [ -n "${ARCHIVE:-}" ]; then tar -czf "$ARCHIVE" -C "$OUT" . || echo "could not write $ARCHIVE"; fi
grep -q "FAILED\|TIMED OUT" "$SUMMARY" && exit 1
exit 0
