#include "host/add_rms_norm.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "host/host_reduce.h"

namespace symmar {

uint8_t floatToE4m3(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  if (std::isnan(f)) return 0x7f;
  const float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7e;  // saturate (448 = 0x7e; 0x7f is NaN)
  // E4M3: bias 7, 3 mantissa bits; normals from 2^-6, subnormals in steps of 2^-9.
  if (a < std::ldexp(1.0f, -6)) {
    const float q = std::nearbyint(a * 512.0f);  // round to nearest even (default rounding mode)
    return sign | static_cast<uint8_t>(q);      // q == 8 is the smallest normal, 0x08: still right
  }
  int e = 0;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  // Mantissa with 3 bits after the leading one: m * 16 in [8, 16).
  float q = std::nearbyint(m * 16.0f);
  if (q == 16.0f) {
    q = 8.0f;
    ++e;
  }
  const int biased = e - 1 + 7;  // exponent of 1.xxx * 2^(e-1)
  const uint8_t out = static_cast<uint8_t>((biased << 3) | (static_cast<int>(q) - 8));
  return sign | (out > 0x7e ? 0x7e : out);
}

void toFloat(const void* src, symmarDataType_t dtype, size_t n, float* dst) {
  switch (dtype) {
    case symmarFloat32:
      std::memcpy(dst, src, n * 4);
      break;
    case symmarFloat16:
      for (size_t i = 0; i < n; ++i) dst[i] = halfToFloat(static_cast<const uint16_t*>(src)[i]);
      break;
    default:
      for (size_t i = 0; i < n; ++i) dst[i] = bf16ToFloat(static_cast<const uint16_t*>(src)[i]);
      break;
  }
}

void fromFloat(const float* src, symmarDataType_t dtype, size_t n, void* dst) {
  switch (dtype) {
    case symmarFloat32:
      std::memcpy(dst, src, n * 4);
      break;
    case symmarFloat16:
      for (size_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = floatToHalf(src[i]);
      break;
    default:
      for (size_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = floatToBf16(src[i]);
      break;
  }
}

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
