#include "host/host_reduce.h"

#include "host/simd_reduce.h"

namespace symmar {

// One implementation: the Highway kernels, at the best SIMD target of this CPU. Ranks on CPUs of
// different generations get the same bits (simd_reduce.cc says why), so there is no scalar twin to
// keep in step; Highway's portable EMU128 target is the fallback below SSE4.
void reduceRanks(void* dst, void* dst2, const void* const* srcs, int nsrc, size_t n, symmarDataType_t dtype,
                 symmarRedOp_t op) {
  simdReduceRanks(dst, dst2, srcs, nsrc, n, dtype, op);
}

}  // namespace symmar
