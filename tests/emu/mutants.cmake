# Mutation check: copies of the kernel sources with one ordering step taken out, each of which the
# emulator suite (under ThreadSanitizer) must catch. A mutant whose text is no longer found in the
# sources stops the configuration, so a mutation never silently becomes the unchanged kernel.
#
# symmar_emu_mutant(name file "original text" "mutated text" [TESTS sources...] [FILTER gtest-filter]
#                   [THREADS n]): by default the allreduce and drift suites' one-shot, two-shot and
# drifting cases run it, at one warp a block; TESTS, FILTER and THREADS say otherwise. Target
# symmar_emu_mutants builds them all.
add_custom_target(symmar_emu_mutants)
function(symmar_emu_mutant name file original mutated)
  cmake_parse_arguments(MUT "" "FILTER;THREADS" "TESTS" ${ARGN})
  if(NOT MUT_THREADS)
    set(MUT_THREADS 32)
  endif()
  set(repeat 1)
  if(NOT MUT_TESTS)
    set(MUT_TESTS emu_allreduce_test.cc emu_drift_test.cc)
    set(MUT_FILTER Emulated/Kernels.*oneshot_f32_sum_n1000*:Emulated/Kernels.*twoshot_f32_sum_n1000*:Drift.TwoRanks*)
    # A missing acquire shows only where ThreadSanitizer still holds the peer's earlier access; on a
    # loaded machine one pass of these short cases can miss it (seen once), two rarely both do.
    set(repeat 2)
  endif()
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/mutant_${name})
  file(GLOB sources RELATIVE ${PROJECT_SOURCE_DIR}/cuda ${PROJECT_SOURCE_DIR}/cuda/*)
  foreach(f ${sources})
    configure_file(${PROJECT_SOURCE_DIR}/cuda/${f} ${dir}/cuda/${f} COPYONLY)
  endforeach()
  file(READ ${PROJECT_SOURCE_DIR}/cuda/${file} text)
  string(FIND "${text}" "${original}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "mutant ${name}: \"${original}\" is no longer in cuda/${file}; update tests/emu/mutants.cmake")
  endif()
  string(REPLACE "${original}" "${mutated}" text "${text}")
  file(WRITE ${dir}/cuda/${file} "${text}")
  symmar_emu_kernels(symmar_emu_kernels_${name} KERNELS ${dir} THREADS ${MUT_THREADS})
  add_executable(symmar_emu_mutant_${name} ${MUT_TESTS})
  target_link_libraries(symmar_emu_mutant_${name} PRIVATE symmar_emu_kernels_${name} GTest::gtest_main)
  add_dependencies(symmar_emu_mutants symmar_emu_mutant_${name})
  add_test(NAME emu_mutant_${name}
           COMMAND symmar_emu_mutant_${name} --gtest_filter=${MUT_FILTER} --gtest_repeat=${repeat})
  set_tests_properties(emu_mutant_${name} PROPERTIES LABELS emu WILL_FAIL TRUE TIMEOUT 600
                       ENVIRONMENT SYMMAR_EMU_LONG_CALLS=100)
endfunction()

# The wait on a peer's flag loads it relaxed instead of acquiring it: the peer's data is no longer
# ordered before this rank's reads of it.
symmar_emu_mutant(no_acquire sync.cuh
  "return sched::epochReached(ptx::ld_acquire_sys(flag), target);"
  "return sched::epochReached(ptx::ld_volatile_u32(flag), target);")
# The block barrier before a start flag is published: other threads' staging writes are no longer
# ordered before the release that tells peers to read them.
symmar_emu_mutant(no_syncthreads sync.cuh
  "  const int b = static_cast<int>(blockIdx.x);\n  __syncthreads();\n"
  "  const int b = static_cast<int>(blockIdx.x);\n")
# The fence before a block counts itself done: its reads of peers' memory are no longer ordered
# before the done flag the last block pushes (CUDA's atomics are relaxed).
symmar_emu_mutant(no_fence_before_done sync.cuh
  "      __threadfence();\n      const uint32_t prev = atomicAdd(&a.state->done_count, 1u);"
  "      const uint32_t prev = atomicAdd(&a.state->done_count, 1u);")
# The prologue's first look at a peer's done flag loads it relaxed: this call's staging writes are
# no longer ordered after the peer's reads of the previous call.
symmar_emu_mutant(no_acquire_done sync.cuh
  "const bool done = sched::epochReached(ptx::ld_acquire_sys(flag), calls);"
  "const bool done = sched::epochReached(ptx::ld_volatile_u32(flag), calls);")
# The barrier after a row's statistic is read: a warp's sum for the next row may overwrite the
# slot another warp is still reading (the blocks of several warps in the row-statistic test).
symmar_emu_mutant(no_row_statistic_barrier norm.cuh
  "  __syncthreads();  // every thread has read the slot before the next row's stores\n"
  ""
  TESTS emu_norm_test.cc FILTER RowStatistic.*)
# The barrier after a batch of rows is normalised: a warp's sum for the next batch's first row may
# overwrite a slot another warp is still reading. Only blocks of several warps can show it, so the
# fused suite runs at 64 threads a block here (64 rows on 3 blocks: three batches a block).
symmar_emu_mutant(no_row_batch_barrier add_rms_norm.cu
  "    __syncthreads();  // every slot read before the next batch's stores\n"
  ""
  TESTS emu_add_rms_norm_test.cc THREADS 64
  FILTER Emulated/FusedNorm.*oneshot_f32_64x128*:Emulated/FusedNorm.*twoshot_f32_64x128*:FusedNormRows.*)
# The fence before a block of a row group arrives at the group's barrier: its partial sums of
# squares are no longer ordered before the arrival its siblings wait for (CUDA's atomics are
# relaxed), so a sibling may add a stale part into the row's statistic.
symmar_emu_mutant(no_row_group_fence norm.cuh
  "    __threadfence();  // this block's sums before its arrival (CUDA's atomics are relaxed)\n"
  ""
  TESTS emu_add_rms_norm_test.cc
  FILTER Emulated/FusedNorm.*oneshot_f32_*_b*:Emulated/FusedNorm.*lamport_f32_*_b*)
