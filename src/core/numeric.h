// The number formats of the library on the CPU: fp16 and bf16 <-> fp32 (round to nearest even),
// element access by dtype, row conversions, and the FP8 E4M3 encoder of the fused norm. One
// definition for the host executors, the API's fallbacks, libsymmar_mpi, the benchmarks and the
// tests that drive the library, so every CPU path rounds the same way.
//
// The scalar conversions and the element access compile for the device too (SYMMAR_HD); the
// kernels themselves convert with CUDA's intrinsics (cuda/vec.cuh), which round finite values the
// same way. The tests check both against references written from the IEEE definitions
// (tests/common/reference.h, tests/e4m3_reference.h), never against this file.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/host_device.h"
#include "symmar/symmar.h"

namespace symmar {

/// bf16 bits -> fp32 (exact).
SYMMAR_HD float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

/// fp32 -> bf16 bits: round to nearest even; NaN stays NaN.
SYMMAR_HD uint16_t floatToBf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

/// fp16 bits -> fp32 (exact, subnormals included).
SYMMAR_HD float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while ((man & 0x400u) == 0);
    bits = sign | ((112u - e) << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

/// fp32 -> fp16 bits: round to nearest even, overflow to infinity, NaN stays NaN.
SYMMAR_HD uint16_t floatToHalf(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;        // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;       // rounds to infinity
  if (abs < 0x38800000u) {                             // subnormal or zero in half
    if (abs < 0x33000000u) return sign;                // below half the smallest subnormal
    uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(abs >> 23);     // 14..24
    uint32_t rounded = man >> shift;
    uint32_t rest = man & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (rounded & 1u))) ++rounded;
    return sign | static_cast<uint16_t>(rounded);
  }
  uint32_t v = abs - 0x38000000u;  // rebias exponent 127 -> 15
  v += 0xfffu + ((v >> 13) & 1u);
  return sign | static_cast<uint16_t>(v >> 13);
}

/// Element i of a buffer of dtype, as a double (tests and tools: fill and check buffers).
SYMMAR_HD double loadElement(const void* buf, symmarDataType_t dtype, size_t i) {
  switch (dtype) {
    case symmarFloat32: return static_cast<const float*>(buf)[i];
    case symmarFloat64: return static_cast<const double*>(buf)[i];
    case symmarInt32: return static_cast<const int32_t*>(buf)[i];
    case symmarFloat16: return halfToFloat(static_cast<const uint16_t*>(buf)[i]);
    default: return bf16ToFloat(static_cast<const uint16_t*>(buf)[i]);
  }
}

/// Stores v, rounded to dtype, as element i.
SYMMAR_HD void storeElement(void* buf, symmarDataType_t dtype, size_t i, double v) {
  switch (dtype) {
    case symmarFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case symmarFloat64: static_cast<double*>(buf)[i] = v; break;
    case symmarInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case symmarFloat16: static_cast<uint16_t*>(buf)[i] = floatToHalf(static_cast<float>(v)); break;
    default: static_cast<uint16_t*>(buf)[i] = floatToBf16(static_cast<float>(v)); break;
  }
}

/// Converts n elements of dtype (f32/f16/bf16) to fp32. The dtype switch sits outside the loop, so
/// each loop is one conversion the compiler can vectorise.
inline void toFloat(const void* src, symmarDataType_t dtype, size_t n, float* dst) {
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

/// Rounds n fp32 values to dtype (f32/f16/bf16).
inline void fromFloat(const float* src, symmarDataType_t dtype, size_t n, void* dst) {
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

/// fp32 -> FP8 E4M3 (no infinities, max 448, NaN 0x7f): round to nearest even, saturating at
/// 448. Exact bit arithmetic; the tests compare it with the search-based tests/e4m3_reference.h.
inline uint8_t floatToE4m3(float f) {
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

}  // namespace symmar
