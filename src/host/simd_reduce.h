// The host path's SIMD kernels: the reductions behind reduceRanks (host_reduce.h, simd_reduce.cc),
// and copies and fp16/bf16 conversions (simd_convert.cc). Written once with Google Highway and compiled
// for every x86 (SSE4, AVX2, AVX-512) or Arm (NEON, SVE) target it knows; the best target the CPU
// supports is chosen at run time, so one binary runs anywhere and never executes an instruction the
// CPU lacks. Every target gives the same bits (see simd_reduce.cc).
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

/// The float32 sum, not rounded, of n elements of nsrc buffers of dtype (float32, float16 or
/// bfloat16), in rank order with reduceRanks' sum rules; nsrc = 1 converts. Decoding is exact.
void simdSumToFloat(float* dst, const void* const* srcs, int nsrc, size_t n, symmarDataType_t dtype);
/// n float32 values rounded to dtype (float32, float16 or bfloat16) as reduceRanks rounds: the
/// same bits as core/numeric.h's fromFloat.
void simdFromFloat(void* dst, const float* src, size_t n, symmarDataType_t dtype);

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
