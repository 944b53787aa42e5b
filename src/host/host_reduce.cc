#include "host/host_reduce.h"

#include <algorithm>
#include <cstdint>

#include "core/numeric.h"

namespace symmar {
namespace {

constexpr size_t kBlock = 1024;

struct Sum {
  template <typename T>
  static T apply(T a, T b) { return a + b; }
  // Integer sums wrap (two's complement) instead of overflowing, as NCCL and MPI do in practice.
  static int32_t apply(int32_t a, int32_t b) {
    return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  }
};
struct Max {
  template <typename T>
  static T apply(T a, T b) { return a > b ? a : b; }
};
struct Min {
  template <typename T>
  static T apply(T a, T b) { return a < b ? a : b; }
};

// Storage type S, accumulation type A, with load/store conversions.
template <typename S, typename A>
struct Plain {
  using Store = S;
  using Acc = A;
  static A load(S v) { return static_cast<A>(v); }
  static S store(A v) { return static_cast<S>(v); }
};
struct Bf16 {
  using Store = uint16_t;
  using Acc = float;
  static float load(uint16_t v) { return bf16ToFloat(v); }
  static uint16_t store(float v) { return floatToBf16(v); }
};
struct Half {
  using Store = uint16_t;
  using Acc = float;
  static float load(uint16_t v) { return halfToFloat(v); }
  static uint16_t store(float v) { return floatToHalf(v); }
};

template <typename Conv, typename Op>
void reduceTyped(void* dst_raw, void* dst2_raw, const void* const* srcs, int nsrc, size_t n) {
  using S = typename Conv::Store;
  using A = typename Conv::Acc;
  S* dst = static_cast<S*>(dst_raw);
  S* dst2 = static_cast<S*>(dst2_raw);
  A acc[kBlock];
  for (size_t i0 = 0; i0 < n; i0 += kBlock) {
    size_t m = std::min(kBlock, n - i0);
    const S* s0 = static_cast<const S*>(srcs[0]) + i0;
    for (size_t i = 0; i < m; ++i) acc[i] = Conv::load(s0[i]);
    for (int r = 1; r < nsrc; ++r) {
      const S* s = static_cast<const S*>(srcs[r]) + i0;
      for (size_t i = 0; i < m; ++i) acc[i] = Op::apply(acc[i], Conv::load(s[i]));
    }
    S* d = dst + i0;
    for (size_t i = 0; i < m; ++i) d[i] = Conv::store(acc[i]);
    if (dst2) std::copy_n(d, m, dst2 + i0);  // still in L1
  }
}

template <typename Conv>
void reduceOp(void* dst, void* dst2, const void* const* srcs, int nsrc, size_t n, symmarRedOp_t op) {
  switch (op) {
    case symmarSum: return reduceTyped<Conv, Sum>(dst, dst2, srcs, nsrc, n);
    case symmarMax: return reduceTyped<Conv, Max>(dst, dst2, srcs, nsrc, n);
    default: return reduceTyped<Conv, Min>(dst, dst2, srcs, nsrc, n);
  }
}

}  // namespace

void reduceRanks(void* dst, void* dst2, const void* const* srcs, int nsrc, size_t n, symmarDataType_t dtype,
                 symmarRedOp_t op) {
  switch (dtype) {
    case symmarFloat32: return reduceOp<Plain<float, float>>(dst, dst2, srcs, nsrc, n, op);
    case symmarFloat64: return reduceOp<Plain<double, double>>(dst, dst2, srcs, nsrc, n, op);
    case symmarInt32: return reduceOp<Plain<int32_t, int32_t>>(dst, dst2, srcs, nsrc, n, op);
    case symmarFloat16: return reduceOp<Half>(dst, dst2, srcs, nsrc, n, op);
    default: return reduceOp<Bf16>(dst, dst2, srcs, nsrc, n, op);
  }
}

}  // namespace symmar
