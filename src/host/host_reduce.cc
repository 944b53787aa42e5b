#include "host/host_reduce.h"

#include <cstdint>
#include <cstring>

#include "host/simd_reduce.h"

namespace symmar {

// One implementation: the Highway kernels, at the best SIMD target of this CPU. Ranks on CPUs of
// different generations get the same bits (simd_reduce.cc says why), so there is no scalar twin to
// keep in step; Highway's portable EMU128 target is the fallback below SSE4.
void reduceRanks(void* dst, void* dst2, const void* const* srcs, int nsrc, size_t n, symmarDataType_t dtype,
                 symmarRedOp_t op) {
  simdReduceRanks(dst, dst2, srcs, nsrc, n, dtype, op);
}

// memcpy, except where glibc's `rep movsb` meets the slow case (host_reduce.h): a size it copies
// with rep movsb (2 KiB and up; from 4 MiB on it streams with non-temporal stores instead) and a
// destination 1-63 bytes past the source modulo 4 KiB (measured slow for 1-31, 63 kept as margin).
// Elsewhere rep movsb is the faster copy here, also between the processes' caches, so it stays.
void copyBytes(void* dst, const void* src, size_t bytes) {
  constexpr size_t kRepMovsbFrom = 2 << 10;
  constexpr size_t kRepMovsbBelow = 4 << 20;
  const uintptr_t distance = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
  if (bytes >= kRepMovsbFrom && bytes < kRepMovsbBelow && distance >= 1 && distance < 64) {
    simdCopy(dst, src, bytes);
  } else if (bytes > 0) {
    std::memcpy(dst, src, bytes);
  }
}

}  // namespace symmar
