// The host path's vector copy with Google Highway, compiled once per SIMD target and chosen at run
// time like the reductions in simd_reduce.cc: the copy that avoids glibc's slow rep movsb case
// (host_reduce.h, copyBytes).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "host/simd_reduce.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "host/simd_copy.cc"
#include "hwy/cache_control.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace symmar {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// A vector copy: loads and stores of whole vectors, four at a time, then the tail by memcpy. With
// kStream the stores are non-temporal, going to memory without first taking each line into this
// core's cache; they need dst aligned to a vector, so its unaligned head goes by memcpy first.
template <bool kStream>
HWY_INLINE void CopyVectors(void* dst_raw, const void* src_raw, size_t bytes) {
  uint8_t* HWY_RESTRICT dst = static_cast<uint8_t*>(dst_raw);
  const uint8_t* HWY_RESTRICT src = static_cast<const uint8_t*>(src_raw);
  const hn::ScalableTag<uint8_t> d;
  const size_t n = hn::Lanes(d);
  const auto store = [&](auto v, size_t at) {
    if constexpr (kStream) {
      hn::Stream(v, d, dst + at);
    } else {
      hn::StoreU(v, d, dst + at);
    }
  };
  size_t i = kStream ? std::min(bytes, (n - reinterpret_cast<uintptr_t>(dst) % n) % n) : 0;
  std::memcpy(dst, src, i);
  for (; i + 4 * n <= bytes; i += 4 * n) {
    const auto v0 = hn::LoadU(d, src + i), v1 = hn::LoadU(d, src + i + n);
    const auto v2 = hn::LoadU(d, src + i + 2 * n), v3 = hn::LoadU(d, src + i + 3 * n);
    store(v0, i), store(v1, i + n), store(v2, i + 2 * n), store(v3, i + 3 * n);
  }
  for (; i + n <= bytes; i += n) store(hn::LoadU(d, src + i), i);
  if (i < bytes) std::memcpy(dst + i, src + i, bytes - i);
}

HWY_NOINLINE void Copy(void* dst, const void* src, size_t bytes) { CopyVectors<false>(dst, src, bytes); }

// Non-temporal stores are ordered before later stores only after FlushStream.
HWY_NOINLINE void StreamCopy(void* dst, const void* src, size_t bytes) {
  CopyVectors<true>(dst, src, bytes);
  hwy::FlushStream();
}

}  // namespace HWY_NAMESPACE
}  // namespace symmar
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace symmar {

HWY_EXPORT(Copy);
HWY_EXPORT(StreamCopy);

void simdCopy(void* dst, const void* src, size_t bytes) { HWY_DYNAMIC_DISPATCH(Copy)(dst, src, bytes); }

void simdStreamCopy(void* dst, const void* src, size_t bytes) { HWY_DYNAMIC_DISPATCH(StreamCopy)(dst, src, bytes); }

}  // namespace symmar
#endif  // HWY_ONCE
