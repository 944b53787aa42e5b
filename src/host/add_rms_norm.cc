#include "host/add_rms_norm.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/numeric.h"
#include "host/host_reduce.h"
#include "host/simd_reduce.h"

namespace symmar {

// The sum of squares in 16 interleaved float32 partial sums, combined pairwise in a fixed order:
// the same bits on every rank and CPU (this file is compiled without FMA contraction), and 16
// independent additions in flight instead of one chain of `hidden` dependent ones.
float sumOfSquares(const float* x, size_t n) {
  constexpr size_t kParts = 16;
  float part[kParts] = {};
  size_t i = 0;
  for (; i + kParts <= n; i += kParts) {
    for (size_t j = 0; j < kParts; ++j) part[j] += x[i + j] * x[i + j];
  }
  for (size_t j = 0; i < n; ++i, ++j) part[j] += x[i] * x[i];
  for (size_t width = kParts / 2; width > 0; width /= 2) {
    for (size_t j = 0; j < width; ++j) part[j] += part[j + width];
  }
  return part[0];
}

void finishAddRmsNormRow(const AddRmsNormCall& c, size_t row, const float* sum) {
  const size_t h = c.hidden;
  const size_t elem = symmarTypeSize(c.dtype);
  const size_t off = row * h;
  thread_local std::vector<float> x, tmp, g;
  x.resize(h);
  if (c.residual_in) {
    tmp.resize(h);
    const void* residual = static_cast<const char*>(c.residual_in) + off * elem;
    simdSumToFloat(tmp.data(), &residual, 1, h, c.dtype);
    for (size_t i = 0; i < h; ++i) x[i] = sum[i] + tmp[i];
  } else {
    copyBytes(x.data(), sum, h * sizeof(float));  // two malloc'ed rows: memcpy's slow case is likely
  }
  // residual_out as stored, and the statistics over exactly those values.
  char* res_out = static_cast<char*>(c.residual_out) + off * elem;
  simdFromFloat(res_out, x.data(), h, c.dtype);
  const void* stored = res_out;
  simdSumToFloat(x.data(), &stored, 1, h, c.dtype);
  const float inv = 1.0f / std::sqrt(sumOfSquares(x.data(), h) / static_cast<float>(h) + c.eps);
  g.resize(h);
  const void* gamma = c.gamma;
  simdSumToFloat(g.data(), &gamma, 1, h, c.dtype);
  for (size_t i = 0; i < h; ++i) x[i] = x[i] * inv * g[i];
  simdFromFloat(static_cast<char*>(c.norm_out) + off * elem, x.data(), h, c.dtype);
  if (c.fp8_out) {
    uint8_t* q = static_cast<uint8_t*>(c.fp8_out) + off;
    for (size_t i = 0; i < h; ++i) q[i] = floatToE4m3(x[i] / c.fp8_scale);
  }
}

}  // namespace symmar
