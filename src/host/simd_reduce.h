// The host path's SIMD kernels: the reductions behind reduceRanks (host_reduce.h, simd_reduce.cc),
// a vector copy (simd_copy.cc), and the fused norm's rows (simd_norm.cc).
// Written once with Google Highway and compiled for every x86 (SSE4, AVX2, AVX-512) or Arm (NEON,
// SVE) target it knows; the best target the CPU supports is chosen at run time, so one binary runs
// anywhere and never executes an instruction the CPU lacks. Every target gives the same bits (see
// simd_reduce.cc).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "symmar/symmar.h"

namespace symmar {

/// reduceRanks' contract (host_reduce.h), at the best target this CPU supports.
void simdReduceRanks(void* dst, void* dst2, const void* const* srcs, int nsrc, size_t n, symmarDataType_t dtype,
                     symmarRedOp_t op);

/// memcpy's contract (no overlap) with vector loads and stores, at the best target of this CPU.
void simdCopy(void* dst, const void* src, size_t bytes);
/// The same with non-temporal (streaming) stores, fenced before it returns: dst's lines are not
/// taken into this core's cache, so a line another core holds is not fetched from it first.
void simdStreamCopy(void* dst, const void* src, size_t bytes);

/// The fused norm's first pass over a row of n elements (simd_norm.cc): the float32 sum of the nsrc
/// rows of dtype (float32, float16 or bfloat16) in rank order with reduceRanks' sum rules, plus
/// residual (a row of dtype, or null), rounded to dtype as reduceRanks rounds and stored to
/// residual_out (which may be residual), and to residual_copy too unless it is null (a second
/// destination, apart from every other row). Returns the sum of the squares of the stored values,
/// in 16 partial sums (element i to partial i % 16) combined pairwise: the same bits at every target.
float simdNormAddResidual(const void* const* srcs, int nsrc, const void* residual, void* residual_out,
                          void* residual_copy, size_t n, symmarDataType_t dtype);
/// The fused norm's second pass: out = (x * inv) * gamma, x and gamma rows of dtype, rounded to
/// dtype, stored to out and to out_copy unless it is null; `unrounded` (if not null) gets the
/// float32 values before rounding (the FP8 output's input).
void simdNormScale(void* out, void* out_copy, const void* x, const void* gamma, float inv, size_t n,
                   symmarDataType_t dtype, float* unrounded);

/// @name Targets, for the tests: each must give the same bits.
/// @{
/// The targets compiled in that this CPU supports (Highway's HWY_* target bits).
std::vector<int64_t> simdReduceTargets();
/// Restricts dispatch to target (one of simdReduceTargets()); 0 restores the normal choice.
void simdReduceForceTarget(int64_t target);
/// The target simdReduceRanks runs at now, and its name.
int64_t simdReduceCurrentTarget();
const char* simdReduceTargetName(int64_t target);
/// @}

}  // namespace symmar
