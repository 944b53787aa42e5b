#include "host/add_rms_norm.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/numeric.h"

namespace symmar {

void finishAddRmsNormRow(const AddRmsNormCall& c, size_t row, const float* sum) {
  const size_t h = c.hidden;
  const size_t elem = symmarTypeSize(c.dtype);
  const size_t off = row * h;
  thread_local std::vector<float> x, tmp, g;
  x.assign(sum, sum + h);
  if (c.residual_in) {
    tmp.resize(h);
    toFloat(static_cast<const char*>(c.residual_in) + off * elem, c.dtype, h, tmp.data());
    for (size_t i = 0; i < h; ++i) x[i] += tmp[i];
  }
  // residual_out as stored, and the statistics over exactly those values.
  char* res_out = static_cast<char*>(c.residual_out) + off * elem;
  fromFloat(x.data(), c.dtype, h, res_out);
  toFloat(res_out, c.dtype, h, x.data());
  float ss = 0;  // fp32 statistics, summed in element order: the same bits on every rank
  for (size_t i = 0; i < h; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(h) + c.eps);
  g.resize(h);
  toFloat(c.gamma, c.dtype, h, g.data());
  for (size_t i = 0; i < h; ++i) x[i] = x[i] * inv * g[i];
  fromFloat(x.data(), c.dtype, h, static_cast<char*>(c.norm_out) + off * elem);
  if (c.fp8_out) {
    uint8_t* q = static_cast<uint8_t*>(c.fp8_out) + off;
    for (size_t i = 0; i < h; ++i) q[i] = floatToE4m3(x[i] / c.fp8_scale);
  }
}

}  // namespace symmar
