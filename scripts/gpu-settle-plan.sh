# The short GPU run (PLAN=settle bash scripts/gpu-check.sh, sourced from there after the build):
# the questions a GPU answers, in order of what a loan is for, each step bounded. About 6 minutes
# of commands, so that a 15-minute loan leaves time to start and to run it once more.
#  1. correctness of code that has not run on a GPU: the back-to-back chain, the fused forms (several
#     rows a block over several chunks, unfused), kernel loading, ranks as threads (a mid-run
#     allocation included); the unfused kernel, FP8 and several-rows cases under memcheck; the fused
#     kernels' barriers (a block's rows in batches, the warp shuffles) under synccheck.
#  2. the fused call against the allreduce + a separate add + RMSNorm kernel, every form and the
#     planned one, hidden 7168 and 4096, 2/4/8 ranks; with PDL off at 4 ranks (twice the blocks);
#     symmar_tune's fused row (every form against the library's own unfused path, outputs checked).
#  3. latency: a 16-byte and a 14 KiB allreduce back to back (symmar_norm_perf_gpu's "allreduce
#     alone") and timed alone, one-shot and lamport, plain and graph-replayed (-G 1).
#  4. bandwidth at 32 MiB, staged and symmetric, PDL on and off, beside the device copy.
# Variables from gpu-check.sh: BUILD, OUT, GPU_TESTS, SANITIZER, PERF, NORM_PERF, ROOT; step().

step "settle 1: chain, fused, kernel loading, rank threads" settle_1_tests.log 150 env SYMMAR_CHAIN_CALLS=300 \
  ctest --test-dir "$BUILD" -L gpu -R '^(GpuChain|GpuFused|GpuKernelLoading|GpuRankThreads)\.' --output-on-failure \
  --no-tests=error
if [ -x "$SANITIZER" ] && [ -x "$GPU_TESTS" ]; then
  step "settle 1: memcheck, unfused + FP8 + several rows a block + lamport form + row groups" settle_1_memcheck.log 120 \
    "$SANITIZER" --tool memcheck --error-exitcode 1 "$GPU_TESTS" \
    --gtest_filter='GpuFused.UnfusedPastTheLastThresholdMatchesTheReference:GpuFused.TwoShotFp8OddHidden:GpuFused.SeveralRowsABlockAndAPartialLastChunk:GpuFused.SymmetricInputsAreReadInPlace:GpuFused.LamportFormSeveralRowsABlock:GpuFused.ARowSpreadOverAGroupOfBlocks'
  step "settle 1: synccheck, fused forms (rows a block in batches, a row over a group)" settle_1_synccheck.log 90 \
    "$SANITIZER" --tool synccheck --error-exitcode 1 "$GPU_TESTS" \
    --gtest_filter='GpuFused.AddRmsNormMatchesTheReference:GpuFused.SeveralRowsABlockAndAPartialLastChunk:GpuFused.LamportFormSeveralRowsABlock:GpuFused.ARowSpreadOverAGroupOfBlocks'
fi
if [ -x "$NORM_PERF" ]; then
  for n in 2 4 8; do
    step "settle 2: fused, local world $n, hidden 7168" "settle_2_norm_world${n}_h7168.log" 40 \
      "$NORM_PERF" --local-world "$n" --hidden 7168 --tokens 1,2,4,8,16,32,64,128,256,512 -n 60 \
      --out "$OUT/fused_row_world$n.json"
  done
  step "settle 2: fused, local world 4, hidden 4096" settle_2_norm_world4_h4096.log 40 \
    "$NORM_PERF" --local-world 4 --hidden 4096 --tokens 1,2,4,8,16,32,64,128,256,512 -n 60
  step "settle 2: fused, local world 4, SYMMAR_PDL=0" settle_2_norm_world4_pdl0.log 30 env SYMMAR_PDL=0 \
    "$NORM_PERF" --local-world 4 --hidden 7168 --tokens 16,32,64 -n 60
  # Few rows: a row over a group of blocks (world 2's runs above) against a block a row.
  step "settle 2: fused, local world 2, a block a row" settle_2_norm_world2_parts1.log 25 env SYMMAR_FUSED_ROW_PARTS=1 \
    "$NORM_PERF" --local-world 2 --hidden 7168 --tokens 1,2,4,8,16 -n 60
  if [ -x "$BUILD/benchmarks/symmar_tune" ]; then
    step "settle 2: symmar_tune -C addrmsnorm, local world 4" settle_2_tune_fused_world4.log 40 \
      "$BUILD/benchmarks/symmar_tune" -C addrmsnorm --device gpu --local-world 4 --hidden 7168 \
      --tokens 1,4,16,64,256 -n 30 --out "$OUT/tuned_fused_world4.json"
  fi
  for algo in oneshot lamport; do
    for n in 2 8; do
      step "settle 3: 16-byte allreduce back to back, $algo, local world $n" "settle_3_b2b_${algo}_world$n.log" 20 \
        env SYMMAR_ALGO=$algo "$NORM_PERF" --local-world "$n" --hidden 8 --tokens 1 -n 200
    done
  done
  step "settle 3: 16-byte one-shot back to back, local world 2, SYMMAR_PDL=0" settle_3_b2b_oneshot_world2_pdl0.log 20 \
    env SYMMAR_PDL=0 SYMMAR_ALGO=oneshot "$NORM_PERF" --local-world 2 --hidden 8 --tokens 1 -n 200
fi
if [ -x "$PERF" ]; then
  for n in 2 8; do
    for graph in 0 1; do
      step "settle 3: 16 B and 14 KiB timed alone, local world $n, -G $graph" "settle_3_perf_world${n}_g$graph.log" 25 \
        "$PERF" --device gpu --local-world "$n" -A oneshot,lamport -b 16 -e 14336 -f 896 -n 100 -G "$graph"
    done
  done
  step "settle 4: 32 MiB staged" settle_4_perf_32m.log 30 \
    "$PERF" --device gpu --local-world 2 -A oneshot,twoshot -b 32M -e 32M -n 20
  step "settle 4: 32 MiB symmetric" settle_4_perf_32m_symmetric.log 30 \
    "$PERF" --device gpu --local-world 2 -A oneshot,twoshot -b 32M -e 32M -n 20 --symmetric
  step "settle 4: 32 MiB staged, SYMMAR_PDL=0" settle_4_perf_32m_pdl0.log 30 env SYMMAR_PDL=0 \
    "$PERF" --device gpu --local-world 2 -A oneshot,twoshot -b 32M -e 32M -n 20
fi
step "settle 4: device-to-device copy bandwidth (torch)" settle_4_copy.log 30 \
  python3 "$ROOT/benchmarks/gpu_copy_bandwidth.py" --min 32M --max 32M
