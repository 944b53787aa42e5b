#include "host/add_rms_norm.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/numeric.h"
#include "host/simd_reduce.h"

namespace symmar {

void finishAddRmsNormRow(const AddRmsNormCall& c, size_t row, const void* const* rows, int nrows,
                         const AddRmsNormRowCopy* copy) {
  const size_t h = c.hidden;
  const size_t elem = symmarTypeSize(c.dtype);
  const size_t off = row * h;
  const void* residual = c.residual_in ? static_cast<const char*>(c.residual_in) + off * elem : nullptr;
  char* residual_out = static_cast<char*>(c.residual_out) + off * elem;
  // The statistics are over residual_out as stored, and the norm scales those stored values.
  const float squares =
      simdNormAddResidual(rows, nrows, residual, residual_out, copy ? copy->residual : nullptr, h, c.dtype);
  const float inv = 1.0f / std::sqrt(squares / static_cast<float>(h) + c.eps);
  char* norm_out = static_cast<char*>(c.norm_out) + off * elem;
  void* norm_copy = copy ? copy->norm : nullptr;
  if (!c.fp8_out) return simdNormScale(norm_out, norm_copy, residual_out, c.gamma, inv, h, c.dtype, nullptr);
  thread_local std::vector<float> y;
  y.resize(h);
  simdNormScale(norm_out, norm_copy, residual_out, c.gamma, inv, h, c.dtype, y.data());
  uint8_t* q = static_cast<uint8_t*>(c.fp8_out) + off;
  for (size_t i = 0; i < h; ++i) q[i] = floatToE4m3(y[i] / c.fp8_scale);
  if (copy) std::memcpy(copy->fp8, q, h);
}

}  // namespace symmar
