// Element traits and 16-byte vector helpers: raw bits in, fp32 math, raw bits out. Working on bits
// (not __half objects) keeps unions trivial and makes every rank round exactly the same way.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda/ptx.cuh"
#include "symmar/symmar.h"

namespace symmar {
namespace gpu {

struct F32 {
  using Bits = uint32_t;
  using Tag = ptx::F32Tag;
  static constexpr int kType = symmarFloat32;
  static constexpr Bits kNaN = 0x7fc00000u;  ///< the canonical quiet NaN (written over a failed call's outputs)
  static __device__ __forceinline__ float toFloat(Bits b) { return __uint_as_float(b); }
  static __device__ __forceinline__ Bits fromFloat(float f) { return __float_as_uint(f); }
};
struct F16 {
  using Bits = uint16_t;
  using Tag = ptx::F16Tag;
  static constexpr int kType = symmarFloat16;
  static constexpr Bits kNaN = 0x7e00u;  ///< the canonical quiet NaN (written over a failed call's outputs)
  static __device__ __forceinline__ float toFloat(Bits b) { return __half2float(__ushort_as_half(b)); }
  static __device__ __forceinline__ Bits fromFloat(float f) { return __half_as_ushort(__float2half_rn(f)); }
};
struct BF16 {
  using Bits = uint16_t;
  using Tag = ptx::BF16Tag;
  static constexpr int kType = symmarBfloat16;
  static constexpr Bits kNaN = 0x7fc0u;  ///< the canonical quiet NaN (written over a failed call's outputs)
  static __device__ __forceinline__ float toFloat(Bits b) { return __bfloat162float(__ushort_as_bfloat16(b)); }
  static __device__ __forceinline__ Bits fromFloat(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
};

/// Reduction in fp32. fmaxf/fminf treat a NaN operand as missing, the same on every rank.
template <int Op>
__device__ __forceinline__ float combine(float a, float b) {
  if (Op == symmarSum) return a + b;
  if (Op == symmarMax) return fmaxf(a, b);
  return fminf(a, b);
}

/// One 16-byte vector seen as elements.
template <typename T>
union Vec {
  static constexpr int kElems = 16 / sizeof(typename T::Bits);
  uint4 u;
  typename T::Bits e[kElems];
};

/// Loads a vector of user memory: one 16-byte access when aligned, element by element otherwise.
template <typename T>
__device__ __forceinline__ Vec<T> loadUser(const typename T::Bits* p, bool aligned) {
  Vec<T> v;
  if (aligned) {
    v.u = *reinterpret_cast<const uint4*>(p);
  } else {
#pragma unroll
    for (int i = 0; i < Vec<T>::kElems; ++i) v.e[i] = p[i];
  }
  return v;
}
template <typename T>
__device__ __forceinline__ void storeUser(typename T::Bits* p, const Vec<T>& v, bool aligned) {
  if (aligned) {
    *reinterpret_cast<uint4*>(p) = v.u;
  } else {
#pragma unroll
    for (int i = 0; i < Vec<T>::kElems; ++i) p[i] = v.e[i];
  }
}

/// Accumulator for one vector position across ranks, always in rank order 0..N-1.
template <typename T, int Op>
struct VecAcc {
  float f[Vec<T>::kElems];
  __device__ __forceinline__ void first(const Vec<T>& v) {
#pragma unroll
    for (int i = 0; i < Vec<T>::kElems; ++i) f[i] = T::toFloat(v.e[i]);
  }
  __device__ __forceinline__ void add(const Vec<T>& v) {
#pragma unroll
    for (int i = 0; i < Vec<T>::kElems; ++i) f[i] = combine<Op>(f[i], T::toFloat(v.e[i]));
  }
  __device__ __forceinline__ Vec<T> result() const {
    Vec<T> v;
#pragma unroll
    for (int i = 0; i < Vec<T>::kElems; ++i) v.e[i] = T::fromFloat(f[i]);
    return v;
  }
};

}  // namespace gpu
}  // namespace symmar
