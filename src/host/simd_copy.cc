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

// The same with non-temporal stores to dst, which go to memory without first taking each line
// into this core's cache: dst's unaligned head and tail by memcpy, the rest by whole vectors.
// Ordered before later stores only after FlushStream (simdStreamCopy makes it).
HWY_NOINLINE void StreamCopy(void* dst_raw, const void* src_raw, size_t bytes) {
  uint8_t* HWY_RESTRICT dst = static_cast<uint8_t*>(dst_raw);
  const uint8_t* HWY_RESTRICT src = static_cast<const uint8_t*>(src_raw);
  const hn::ScalableTag<uint8_t> d;
  const size_t n = hn::Lanes(d);
  const size_t head = std::min(bytes, (n - reinterpret_cast<uintptr_t>(dst) % n) % n);
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 4 * n <= bytes; i += 4 * n) {
    const auto v0 = hn::LoadU(d, src + i), v1 = hn::LoadU(d, src + i + n);
    const auto v2 = hn::LoadU(d, src + i + 2 * n), v3 = hn::LoadU(d, src + i + 3 * n);
    hn::Stream(v0, d, dst + i), hn::Stream(v1, d, dst + i + n);
    hn::Stream(v2, d, dst + i + 2 * n), hn::Stream(v3, d, dst + i + 3 * n);
  }
  for (; i + n <= bytes; i += n) hn::Stream(hn::LoadU(d, src + i), d, dst + i);
  if (i < bytes) std::memcpy(dst + i, src + i, bytes - i);
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
