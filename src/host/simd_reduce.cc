// reduceRanks' kernels with Google Highway, compiled once per SIMD target (HWY_TARGET_INCLUDE
// re-includes this file for each) and chosen at run time (HWY_DYNAMIC_DISPATCH).
//
// Why every target gives the same bits: each output element is computed from the same input lanes
// by the same IEEE operations in rank order (add, compare-and-select, integer bit arithmetic), one
// lane per element, with no reduction across lanes and no fused or reassociated arithmetic; what
// IEEE leaves to the hardware is fixed here explicitly:
//  - sum of floats, acc + x in rank order: a NaN result is x quieted when x is a NaN, else acc
//    quieted, or the negative default NaN when both are numbers (inf - inf): the NaN of the last
//    rank holding one. The hardware's choice depends on operand order, which the compiler picks
//    (the earlier scalar loops, built by GCC -O3, gave this rule for 2 sources and switched to acc
//    first for later ranks), and on the ISA (Arm's FADD prefers a signalling NaN and returns a
//    positive default NaN), so the NaN lanes are rebuilt here rather than left to the CPU.
//  - max/min: acc > x ? acc : x and acc < x ? acc : x as compare and select, never the CPU's max/min
//    instructions, whose NaN and signed-zero cases differ between ISAs and are not symmetric.
//  - int32 sum wraps (two's complement), added as uint32.
//  - fp16/bf16: decoded exactly and rounded once, to nearest even, as core/numeric.h does
//    (including its NaN encodings): bit arithmetic, or F16C where it gives the same bits (HalfFmt).
//  - the default floating-point environment (round to nearest, no flush to zero), as the scalar
//    loops assumed.
#include "host/simd_reduce.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "host/simd_reduce.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "host/simd_formats-inl.h"

HWY_BEFORE_NAMESPACE();
namespace symmar {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Elements [i, i + Lanes(d)) of every source, combined in rank order; the sources are read before
// dst is written, so dst may be one of them.
template <class Fmt, class Op, class D>
HWY_INLINE void ReduceLanes(D d, typename Fmt::Store* dst, typename Fmt::Store* dst2, const void* const* srcs,
                            int nsrc, size_t i) {
  using S = typename Fmt::Store;
  auto acc = Fmt::Load(d, static_cast<const S*>(srcs[0]) + i);
  for (int r = 1; r < nsrc; ++r) acc = Op::Apply(d, acc, Fmt::Load(d, static_cast<const S*>(srcs[r]) + i));
  const auto out = Fmt::Encode(d, acc);
  Fmt::Put(d, out, dst + i);
  if (dst2) Fmt::Put(d, out, dst2 + i);
}

// The same for four vectors at [i, i + 4 * Lanes(d)).
template <class Fmt, class Op, class D>
HWY_INLINE void ReduceLanes4(D d, typename Fmt::Store* dst, typename Fmt::Store* dst2, const void* const* srcs,
                             int nsrc, size_t i) {
  using S = typename Fmt::Store;
  const size_t n = hn::Lanes(d);
  const S* s0 = static_cast<const S*>(srcs[0]) + i;
  auto a0 = Fmt::Load(d, s0), a1 = Fmt::Load(d, s0 + n), a2 = Fmt::Load(d, s0 + 2 * n), a3 = Fmt::Load(d, s0 + 3 * n);
  bool maybe_nan = true;  // the last Apply4 tells (a NaN stays a NaN through later sums)
  for (int r = 1; r < nsrc; ++r) {
    const S* s = static_cast<const S*>(srcs[r]) + i;
    maybe_nan = Op::Apply4(d, a0, a1, a2, a3, Fmt::Load(d, s), Fmt::Load(d, s + n), Fmt::Load(d, s + 2 * n),
                           Fmt::Load(d, s + 3 * n));
  }
  const auto put = [&](auto o0, auto o1, auto o2, auto o3) {
    Fmt::Put(d, o0, dst + i), Fmt::Put(d, o1, dst + i + n), Fmt::Put(d, o2, dst + i + 2 * n);
    Fmt::Put(d, o3, dst + i + 3 * n);
    if (dst2) {
      Fmt::Put(d, o0, dst2 + i), Fmt::Put(d, o1, dst2 + i + n), Fmt::Put(d, o2, dst2 + i + 2 * n);
      Fmt::Put(d, o3, dst2 + i + 3 * n);
    }
  };
  if (HWY_LIKELY(!maybe_nan)) {  // no NaN lane: the encoding's NaN rules have nothing to do
    put(Fmt::EncodeNoNaN(d, a0), Fmt::EncodeNoNaN(d, a1), Fmt::EncodeNoNaN(d, a2), Fmt::EncodeNoNaN(d, a3));
  } else {
    put(Fmt::Encode(d, a0), Fmt::Encode(d, a1), Fmt::Encode(d, a2), Fmt::Encode(d, a3));
  }
}

// Elements [from, n).
template <class Fmt, class Op>
HWY_NOINLINE void ReduceTyped(void* dst_raw, void* dst2_raw, const void* const* srcs, int nsrc, size_t n,
                              size_t from = 0) {
  using S = typename Fmt::Store;
  using A = typename Fmt::Acc;
  S* dst = static_cast<S*>(dst_raw);
  S* dst2 = static_cast<S*>(dst2_raw);
  const hn::ScalableTag<A> d;
  const size_t lanes = hn::Lanes(d);
  size_t i = from;
  for (; i + 4 * lanes <= n; i += 4 * lanes) ReduceLanes4<Fmt, Op>(d, dst, dst2, srcs, nsrc, i);
  for (; i + lanes <= n; i += lanes) ReduceLanes<Fmt, Op>(d, dst, dst2, srcs, nsrc, i);
  const hn::CappedTag<A, 1> d1;  // the tail, one element at a time, same operations
  for (; i < n; ++i) ReduceLanes<Fmt, Op>(d1, dst, dst2, srcs, nsrc, i);
}

// bfloat16 without widening or narrowing: a 32-bit lane holds two bf16 elements, and each is a
// float32 as it stands: the upper one with the lower half masked off, the lower one shifted up.
// Both halves are reduced as float32 lanes by the same Op, rounded as Bf16Fmt::Encode rounds (the
// result's bits in the upper half), and put back together in place. Every element goes through the
// same operations as on the widening path, so the bits are the same; only the cross-lane packing
// that widening and narrowing need on x86 is gone.
// kSources: the number of sources when known at compile time (2, the common case: the loop over
// sources unrolled and its accumulators kept in place; 2 ranks, bf16, 16-256 KiB in symmar_micro,
// 5-10% faster than the loop), else 0.
template <class Op, int kSources>
HWY_NOINLINE size_t ReduceBf16Pairs(uint16_t* dst, uint16_t* dst2, const void* const* srcs, int nsrc, size_t n) {
  if constexpr (kSources != 0) nsrc = kSources;
  const hn::ScalableTag<uint32_t> du;
  const hn::RebindToFloat<decltype(du)> df;
  const size_t lanes = hn::Lanes(du);
  const auto load = [&](int r, size_t at) {
    return hn::LoadU(du, reinterpret_cast<const uint32_t*>(static_cast<const uint16_t*>(srcs[r]) + at));
  };
  size_t i = 0;
  for (; i + 4 * lanes <= n; i += 4 * lanes) {  // 2 vectors of pairs = 4 * lanes elements
    auto w0 = load(0, i), w1 = load(0, i + 2 * lanes);
    auto lo0 = Bf16PairLower(df, w0), hi0 = Bf16PairUpper(df, w0);
    auto lo1 = Bf16PairLower(df, w1), hi1 = Bf16PairUpper(df, w1);
    bool maybe_nan = true;  // the last Apply4 tells (a NaN stays a NaN through later sums)
    for (int r = 1; r < nsrc; ++r) {
      const auto v0 = load(r, i), v1 = load(r, i + 2 * lanes);
      maybe_nan = Op::Apply4(df, lo0, hi0, lo1, hi1, Bf16PairLower(df, v0), Bf16PairUpper(df, v0),
                             Bf16PairLower(df, v1), Bf16PairUpper(df, v1));
    }
    hn::Vec<decltype(du)> o0, o1;
    if (HWY_LIKELY(!maybe_nan || !AnyNaN4(df, lo0, hi0, lo1, hi1))) {
      o0 = RoundAndPackBf16NoNaN(hn::BitCast(du, lo0), hn::BitCast(du, hi0));
      o1 = RoundAndPackBf16NoNaN(hn::BitCast(du, lo1), hn::BitCast(du, hi1));
    } else {
      o0 = PackBf16Pair(Bf16RoundHighNaN(du, hn::BitCast(du, lo0)), Bf16RoundHighNaN(du, hn::BitCast(du, hi0)));
      o1 = PackBf16Pair(Bf16RoundHighNaN(du, hn::BitCast(du, lo1)), Bf16RoundHighNaN(du, hn::BitCast(du, hi1)));
    }
    hn::StoreU(o0, du, reinterpret_cast<uint32_t*>(dst + i));
    hn::StoreU(o1, du, reinterpret_cast<uint32_t*>(dst + i + 2 * lanes));
    if (dst2) {
      hn::StoreU(o0, du, reinterpret_cast<uint32_t*>(dst2 + i));
      hn::StoreU(o1, du, reinterpret_cast<uint32_t*>(dst2 + i + 2 * lanes));
    }
  }
  return i;
}

template <class Op>
HWY_INLINE void ReduceBf16(void* dst, void* dst2, const void* const* srcs, int nsrc, size_t n) {
  uint16_t* const out = static_cast<uint16_t*>(dst);
  uint16_t* const out2 = static_cast<uint16_t*>(dst2);
  const size_t done =
      nsrc == 2 ? ReduceBf16Pairs<Op, 2>(out, out2, srcs, nsrc, n) : ReduceBf16Pairs<Op, 0>(out, out2, srcs, nsrc, n);
  if (done < n) ReduceTyped<Bf16Fmt, Op>(dst, dst2, srcs, nsrc, n, done);  // the tail, widened
}

template <class Fmt>
HWY_INLINE void ReduceFmt(void* dst, void* dst2, const void* const* srcs, int nsrc, size_t n, int op) {
  switch (op) {
    case symmarSum: return ReduceTyped<Fmt, SumOp>(dst, dst2, srcs, nsrc, n);
    case symmarMax: return ReduceTyped<Fmt, MaxOp>(dst, dst2, srcs, nsrc, n);
    default: return ReduceTyped<Fmt, MinOp>(dst, dst2, srcs, nsrc, n);
  }
}

void Reduce(void* dst, void* dst2, const void* const* srcs, int nsrc, size_t n, int dtype, int op) {
  switch (dtype) {
    case symmarFloat32: return ReduceFmt<PlainFmt<float>>(dst, dst2, srcs, nsrc, n, op);
    case symmarFloat64: return ReduceFmt<PlainFmt<double>>(dst, dst2, srcs, nsrc, n, op);
    case symmarInt32: return ReduceFmt<PlainFmt<int32_t>>(dst, dst2, srcs, nsrc, n, op);
    case symmarFloat16: return ReduceFmt<HalfFmt>(dst, dst2, srcs, nsrc, n, op);
    default:
      switch (op) {
        case symmarSum: return ReduceBf16<SumOp>(dst, dst2, srcs, nsrc, n);
        case symmarMax: return ReduceBf16<MaxOp>(dst, dst2, srcs, nsrc, n);
        default: return ReduceBf16<MinOp>(dst, dst2, srcs, nsrc, n);
      }
  }
}

int64_t CurrentTarget() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace symmar
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace symmar {

HWY_EXPORT(Reduce);
HWY_EXPORT(CurrentTarget);

void simdReduceRanks(void* dst, void* dst2, const void* const* srcs, int nsrc, size_t n, symmarDataType_t dtype,
                     symmarRedOp_t op) {
  HWY_DYNAMIC_DISPATCH(Reduce)(dst, dst2, srcs, nsrc, n, static_cast<int>(dtype), static_cast<int>(op));
}

std::vector<int64_t> simdReduceTargets() { return hwy::SupportedAndGeneratedTargets(); }

void simdReduceForceTarget(int64_t target) { hwy::SetSupportedTargetsForTest(target); }

int64_t simdReduceCurrentTarget() { return HWY_DYNAMIC_DISPATCH(CurrentTarget)(); }

const char* simdReduceTargetName(int64_t target) { return hwy::TargetName(target); }

}  // namespace symmar
#endif  // HWY_ONCE
