// Element-wise reduction of N rank buffers on the CPU: dst[i] = op(src[0][i], ..., src[N-1][i]),
// always in rank order, fp32 accumulation for fp16/bf16, in blocks the compiler vectorises.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "symmar/symmar.h"

namespace symmar {

inline float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

inline uint16_t floatToBf16(float f) {  // round to nearest even; NaN stays NaN
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float halfToFloat(uint16_t h) {
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

inline uint16_t floatToHalf(float f) {  // round to nearest even
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
inline double loadElement(const void* buf, symmarDataType_t dtype, size_t i) {
  switch (dtype) {
    case symmarFloat32: return static_cast<const float*>(buf)[i];
    case symmarFloat64: return static_cast<const double*>(buf)[i];
    case symmarInt32: return static_cast<const int32_t*>(buf)[i];
    case symmarFloat16: return halfToFloat(static_cast<const uint16_t*>(buf)[i]);
    default: return bf16ToFloat(static_cast<const uint16_t*>(buf)[i]);
  }
}

/// Stores v, rounded to dtype, as element i.
inline void storeElement(void* buf, symmarDataType_t dtype, size_t i, double v) {
  switch (dtype) {
    case symmarFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case symmarFloat64: static_cast<double*>(buf)[i] = v; break;
    case symmarInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case symmarFloat16: static_cast<uint16_t*>(buf)[i] = floatToHalf(static_cast<float>(v)); break;
    default: static_cast<uint16_t*>(buf)[i] = floatToBf16(static_cast<float>(v)); break;
  }
}

/// Reduces n elements of nsrc buffers into dst, and into dst2 as well when it is not null (one
/// pass writes both: two-shot's owner keeps its slice and publishes it). dst may alias a source.
void reduceRanks(void* dst, void* dst2, const void* const* srcs, int nsrc, size_t n, symmarDataType_t dtype,
                 symmarRedOp_t op);

}  // namespace symmar
