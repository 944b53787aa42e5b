// The arithmetic of the fused allreduce + residual add + RMSNorm (+ FP8), on the CPU: one row at a
// time, from the fp32 sum of the ranks' rows (summed by the caller in rank order). One home for the
// host executors and the API's unfused fallback, so every path rounds the same way. The FP8 E4M3
// encoder is exact (round to nearest even, saturation at 448) and is the tests' reference too.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/backend.h"
#include "symmar/symmar.h"

namespace symmar {

/// E4M3 (no infinities, max 448, NaN 0x7f): round to nearest even, saturating.
uint8_t floatToE4m3(float f);

/// Finishes row `row` of the call: sum[hidden] holds the fp32 allreduce of the ranks' input rows.
/// Writes residual_out, norm_out and fp8_out of that row. residual_in of the row is read before any
/// output of the row is written (in place allowed).
void finishAddRmsNormRow(const AddRmsNormCall& c, size_t row, const float* sum);

/// Converts n elements of dtype (f32/f16/bf16) to fp32, and rounds back.
void toFloat(const void* src, symmarDataType_t dtype, size_t n, float* dst);
void fromFloat(const float* src, symmarDataType_t dtype, size_t n, void* dst);

}  // namespace symmar
