// The host path's conversions and copies with Google Highway, compiled once per SIMD target and
// chosen at run time, like the reductions in simd_reduce.cc (whose comment says why every target
// gives the same bits): float32 sums of fp16/bf16 rows and their rounding back for the fused norm,
// and the copy that avoids glibc's slow rep movsb case (host_reduce.h, copyBytes).
#include <cstring>

#include "host/simd_reduce.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "host/simd_convert.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "host/simd_formats-inl.h"

HWY_BEFORE_NAMESPACE();
namespace symmar {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The float32 sum, unrounded, of nsrc buffers of a storage format (nsrc = 1: the conversion alone),
// with SumOp's rules, in rank order: the fused norm's input.
template <class Fmt>
HWY_NOINLINE void SumToFloatTyped(float* dst, const void* const* srcs, int nsrc, size_t n) {
  using S = typename Fmt::Store;
  const auto one = [&](auto d, size_t i) {
    auto acc = Fmt::Load(d, static_cast<const S*>(srcs[0]) + i);
    for (int r = 1; r < nsrc; ++r) acc = SumOp::Apply(d, acc, Fmt::Load(d, static_cast<const S*>(srcs[r]) + i));
    hn::StoreU(acc, d, dst + i);
  };
  const hn::ScalableTag<float> d;
  size_t i = 0;
  for (; i + hn::Lanes(d) <= n; i += hn::Lanes(d)) one(d, i);
  for (; i < n; ++i) one(hn::CappedTag<float, 1>(), i);
}

// float32 values rounded to a storage format, as Encode rounds them for the reductions.
template <class Fmt>
HWY_NOINLINE void FromFloatTyped(void* dst_raw, const float* src, size_t n) {
  typename Fmt::Store* dst = static_cast<typename Fmt::Store*>(dst_raw);
  const auto one = [&](auto d, size_t i) { Fmt::Put(d, Fmt::Encode(d, hn::LoadU(d, src + i)), dst + i); };
  const hn::ScalableTag<float> d;
  size_t i = 0;
  for (; i + hn::Lanes(d) <= n; i += hn::Lanes(d)) one(d, i);
  for (; i < n; ++i) one(hn::CappedTag<float, 1>(), i);
}

void SumToFloat(float* dst, const void* const* srcs, int nsrc, size_t n, int dtype) {
  switch (dtype) {
    case symmarFloat32: return SumToFloatTyped<PlainFmt<float>>(dst, srcs, nsrc, n);
    case symmarFloat16: return SumToFloatTyped<HalfFmt>(dst, srcs, nsrc, n);
    default: return SumToFloatTyped<Bf16Fmt>(dst, srcs, nsrc, n);
  }
}

void FromFloat(void* dst, const float* src, size_t n, int dtype) {
  switch (dtype) {
    case symmarFloat32: return FromFloatTyped<PlainFmt<float>>(dst, src, n);
    case symmarFloat16: return FromFloatTyped<HalfFmt>(dst, src, n);
    default: return FromFloatTyped<Bf16Fmt>(dst, src, n);
  }
}

// A plain vector copy: loads and stores of whole vectors, four at a time, then the tail by memcpy.
HWY_NOINLINE void Copy(void* dst_raw, const void* src_raw, size_t bytes) {
  uint8_t* HWY_RESTRICT dst = static_cast<uint8_t*>(dst_raw);
  const uint8_t* HWY_RESTRICT src = static_cast<const uint8_t*>(src_raw);
  const hn::ScalableTag<uint8_t> d;
  const size_t n = hn::Lanes(d);
  size_t i = 0;
  for (; i + 4 * n <= bytes; i += 4 * n) {
    const auto v0 = hn::LoadU(d, src + i), v1 = hn::LoadU(d, src + i + n);
    const auto v2 = hn::LoadU(d, src + i + 2 * n), v3 = hn::LoadU(d, src + i + 3 * n);
    hn::StoreU(v0, d, dst + i), hn::StoreU(v1, d, dst + i + n);
    hn::StoreU(v2, d, dst + i + 2 * n), hn::StoreU(v3, d, dst + i + 3 * n);
  }
  for (; i + n <= bytes; i += n) hn::StoreU(hn::LoadU(d, src + i), d, dst + i);
  if (i < bytes) std::memcpy(dst + i, src + i, bytes - i);
}

}  // namespace HWY_NAMESPACE
}  // namespace symmar
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace symmar {

HWY_EXPORT(Copy);
HWY_EXPORT(SumToFloat);
HWY_EXPORT(FromFloat);

void simdCopy(void* dst, const void* src, size_t bytes) { HWY_DYNAMIC_DISPATCH(Copy)(dst, src, bytes); }

void simdSumToFloat(float* dst, const void* const* srcs, int nsrc, size_t n, symmarDataType_t dtype) {
  HWY_DYNAMIC_DISPATCH(SumToFloat)(dst, srcs, nsrc, n, static_cast<int>(dtype));
}

void simdFromFloat(void* dst, const float* src, size_t n, symmarDataType_t dtype) {
  HWY_DYNAMIC_DISPATCH(FromFloat)(dst, src, n, static_cast<int>(dtype));
}

}  // namespace symmar
#endif  // HWY_ONCE
