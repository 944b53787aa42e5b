// The arithmetic of the fused allreduce + residual add + RMSNorm (+ FP8), on the CPU: one row at a
// time, from the ranks' rows of that row, summed here in fp32 in rank order. One home for the
// host executors and the API's unfused fallback, so every path rounds the same way. The conversions
// are the SIMD ones of simd_reduce.h, which give core/numeric.h's bits; the FP8 E4M3 encoder is
// core/numeric.h's, included here for the callers.
#pragma once
#include <cstddef>

#include "core/backend.h"
#include "core/numeric.h"
#include "symmar/symmar.h"

namespace symmar {

/// A second place for one finished row's outputs, written in the same pass as the call's outputs
/// (the two-shot publishes the rows it finishes for its peers): a row each of residual_out's and
/// norm_out's values, and of fp8_out's when the call has one.
struct AddRmsNormRowCopy {
  void* residual;
  void* norm;
  void* fp8;
};

/// Finishes row `row` of the call from rows[0..nrows): the ranks' input rows of it (c.dtype, hidden
/// elements each), whose fp32 sum in rank order is the allreduce (one row: an allreduce already
/// done). Writes residual_out, norm_out and fp8_out of that row, and the same values to `copy`
/// unless it is null. residual_in of the row is read before any output of the row is written (in
/// place allowed).
void finishAddRmsNormRow(const AddRmsNormCall& c, size_t row, const void* const* rows, int nrows,
                         const AddRmsNormRowCopy* copy = nullptr);

}  // namespace symmar
