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

#include <cstring>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "host/simd_reduce.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace symmar {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <typename T>
struct FloatBits;
template <>
struct FloatBits<float> {
  static constexpr uint32_t kQuiet = 0x00400000u;
  static constexpr uint32_t kDefaultNaN = 0xffc00000u;  // x86's "real indefinite" (Intel SDM vol. 1, 4.8.3.7)
};
template <>
struct FloatBits<double> {
  static constexpr uint64_t kQuiet = 0x0008000000000000ull;
  static constexpr uint64_t kDefaultNaN = 0xfff8000000000000ull;
};

// The NaN lanes of acc + x (a = acc, b = x; rare: kept off the main path by the caller).
template <class D, class V>
HWY_INLINE V SumNaNLanes(D d, V a, V b, V r) {
  using T = hn::TFromD<D>;
  const hn::RebindToUnsigned<D> du;
  const auto quiet = hn::Set(du, FloatBits<T>::kQuiet);
  const V qa = hn::BitCast(d, hn::Or(hn::BitCast(du, a), quiet));
  const V qb = hn::BitCast(d, hn::Or(hn::BitCast(du, b), quiet));
  const V dflt = hn::BitCast(d, hn::Set(du, FloatBits<T>::kDefaultNaN));
  return hn::IfThenElse(hn::IsNaN(b), qb, hn::IfThenElse(hn::IsNaN(a), qa, hn::IfThenElse(hn::IsNaN(r), dflt, r)));
}

struct SumOp {
  // Four independent lanes groups; one NaN test for all four (the exact path is lane-wise, so it
  // gives r itself in lanes without a NaN).
  template <class D, class V>
  static HWY_INLINE void Apply4(D d, V& a0, V& a1, V& a2, V& a3, V b0, V b1, V b2, V b3) {
    using T = hn::TFromD<D>;
    if constexpr (hwy::IsFloat<T>()) {
      const V r0 = hn::Add(a0, b0), r1 = hn::Add(a1, b1), r2 = hn::Add(a2, b2), r3 = hn::Add(a3, b3);
      const auto nan = hn::Or(hn::Or(hn::IsNaN(r0), hn::IsNaN(r1)), hn::Or(hn::IsNaN(r2), hn::IsNaN(r3)));
      if (HWY_UNLIKELY(!hn::AllFalse(d, nan))) {
        a0 = SumNaNLanes(d, a0, b0, r0);
        a1 = SumNaNLanes(d, a1, b1, r1);
        a2 = SumNaNLanes(d, a2, b2, r2);
        a3 = SumNaNLanes(d, a3, b3, r3);
      } else {
        a0 = r0, a1 = r1, a2 = r2, a3 = r3;
      }
    } else {
      a0 = Apply(d, a0, b0), a1 = Apply(d, a1, b1), a2 = Apply(d, a2, b2), a3 = Apply(d, a3, b3);
    }
  }
  template <class D, class V>
  static HWY_INLINE V Apply(D d, V a, V b) {
    using T = hn::TFromD<D>;
    if constexpr (hwy::IsFloat<T>()) {
      const V r = hn::Add(a, b);
      if (HWY_UNLIKELY(!hn::AllFalse(d, hn::IsNaN(r)))) return SumNaNLanes(d, a, b, r);
      return r;
    } else {
      const hn::RebindToUnsigned<D> du;
      return hn::BitCast(d, hn::Add(hn::BitCast(du, a), hn::BitCast(du, b)));
    }
  }
};
// max/min as compare and select: acc > x ? acc : x (kMax) or acc < x ? acc : x.
template <bool kMax>
struct SelectOp {
  template <class D, class V>
  static HWY_INLINE void Apply4(D d, V& a0, V& a1, V& a2, V& a3, V b0, V b1, V b2, V b3) {
    a0 = Apply(d, a0, b0), a1 = Apply(d, a1, b1), a2 = Apply(d, a2, b2), a3 = Apply(d, a3, b3);
  }
  template <class D, class V>
  static HWY_INLINE V Apply(D, V a, V b) {
    if constexpr (kMax) return hn::IfThenElse(hn::Gt(a, b), a, b);
    return hn::IfThenElse(hn::Lt(a, b), a, b);
  }
};
using MaxOp = SelectOp<true>;
using MinOp = SelectOp<false>;

// Storage formats: Load widens to the accumulator lanes of D, Encode rounds back, Put stores.
template <typename T>
struct PlainFmt {
  using Store = T;
  using Acc = T;
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const T* p) { return hn::LoadU(d, p); }
  template <class D>
  static HWY_INLINE hn::Vec<D> Encode(D, hn::Vec<D> v) { return v; }
  template <class D, class V>
  static HWY_INLINE void Put(D d, V v, T* p) { hn::StoreU(v, d, p); }
};

template <class D, class V>
HWY_INLINE void Put16(D, V v, uint16_t* p) {
  const hn::Rebind<uint16_t, D> d16;
  hn::StoreU(v, d16, p);
}

struct Bf16Fmt {
  using Store = uint16_t;
  using Acc = float;
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const uint16_t* p) {
    const hn::RebindToUnsigned<D> du;
    const hn::Rebind<uint16_t, D> d16;
    return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, p))));
  }
  // core/numeric.h's floatToBf16: NaN keeps its top payload bits and gets the quiet bit.
  template <class D>
  static HWY_INLINE auto Encode(D d, hn::Vec<D> v) {
    (void)d;
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const hn::Rebind<uint16_t, D> d16;
    const auto bits = hn::BitCast(du, v);
    const auto abs = hn::BitCast(di, hn::And(bits, hn::Set(du, 0x7fffffffu)));
    const auto nan = hn::RebindMask(du, hn::Gt(abs, hn::Set(di, 0x7f800000)));
    const auto hi = hn::ShiftRight<16>(bits);
    const auto rounded = hn::ShiftRight<16>(hn::Add(bits, hn::Add(hn::Set(du, 0x7fffu), hn::And(hi, hn::Set(du, 1u)))));
    const auto out = hn::IfThenElse(nan, hn::Or(hi, hn::Set(du, 0x40u)), rounded);
    return hn::DemoteTo(d16, hn::BitCast(di, out));  // values <= 0xffff: the demotion does not saturate
  }
  template <class D, class V>
  static HWY_INLINE void Put(D d, V v, uint16_t* p) { Put16(d, v, p); }
};

// x86 targets from AVX2 up have F16C (Highway's AVX2 target requires it): vcvtph2ps decodes every
// fp16 exactly (a signalling NaN comes out quiet, which no result can show: fp16 results store any
// NaN as sign | 0x7e00, and the choice between NaN operands depends only on which are NaN), and
// vcvtps2ph with Highway's immediate (_MM_FROUND_NO_EXC: round to nearest even, not MXCSR) rounds
// as floatToHalf does, NaNs aside. Below AVX2, Highway emulates these conversions without rounding
// to nearest, so the bit arithmetic below is used instead.
#undef SYMMAR_SIMD_F16C  // this file is compiled once per target
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
#define SYMMAR_SIMD_F16C 1
#else
#define SYMMAR_SIMD_F16C 0
#endif

struct HalfFmt {
  using Store = uint16_t;
  using Acc = float;
#if SYMMAR_SIMD_F16C
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const uint16_t* p) {
    const hn::Rebind<hwy::float16_t, D> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
  }
  template <class D>
  static HWY_INLINE auto Encode(D d, hn::Vec<D> v) {
    const hn::RebindToUnsigned<D> du;
    const hn::Rebind<hwy::float16_t, D> dh;
    const hn::Rebind<uint16_t, D> d16;
    // NaN lanes become sign | 0x7fc00000, which converts to sign | 0x7e00.
    const auto quiet = hn::Or(hn::And(hn::BitCast(du, v), hn::Set(du, 0x80000000u)), hn::Set(du, 0x7fc00000u));
    return hn::BitCast(d16, hn::DemoteTo(dh, hn::IfThenElse(hn::IsNaN(v), hn::BitCast(d, quiet), v)));
  }
#else
  // core/numeric.h's halfToFloat: exact; subnormals as mantissa * 2^-24 (exact in fp32, a normal).
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const uint16_t* p) {
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const hn::Rebind<uint16_t, D> d16;
    const auto h = hn::PromoteTo(du, hn::LoadU(d16, p));
    const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
    const auto exp = hn::And(h, hn::Set(du, 0x7c00u));
    const auto e = hn::ShiftLeft<13>(hn::And(h, hn::Set(du, 0x7fffu)));
    const auto normal = hn::Add(e, hn::Set(du, 112u << 23));  // rebias 15 -> 127
    const auto infnan = hn::Add(e, hn::Set(du, 224u << 23));  // exponent 31 -> 255
    const auto man = hn::BitCast(di, hn::And(h, hn::Set(du, 0x3ffu)));
    const auto sub = hn::BitCast(du, hn::Mul(hn::ConvertTo(d, man), hn::Set(d, 5.9604644775390625e-8f)));  // 2^-24
    const auto mag = hn::IfThenElse(hn::Eq(exp, hn::Zero(du)), sub,
                                    hn::IfThenElse(hn::Eq(exp, hn::Set(du, 0x7c00u)), infnan, normal));
    return hn::BitCast(d, hn::Or(mag, sign));
  }
  // core/numeric.h's floatToHalf: NaN -> sign | 0x7e00, overflow to infinity, subnormals rounded
  // to nearest even by adding 0.5f, whose ulp (2^-24) is fp16's subnormal step.
  template <class D>
  static HWY_INLINE auto Encode(D d, hn::Vec<D> v) {
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const hn::Rebind<uint16_t, D> d16;
    const auto bits = hn::BitCast(du, v);
    const auto absu = hn::And(bits, hn::Set(du, 0x7fffffffu));
    const auto abs = hn::BitCast(di, absu);
    const auto sign = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 0x8000u));
    const auto v13 = hn::Sub(absu, hn::Set(du, 0x38000000u));  // rebias 127 -> 15
    const auto odd = hn::And(hn::ShiftRight<13>(v13), hn::Set(du, 1u));
    const auto normal = hn::ShiftRight<13>(hn::Add(v13, hn::Add(hn::Set(du, 0xfffu), odd)));
    const auto small = hn::RebindMask(du, hn::Lt(abs, hn::Set(di, 0x38800000)));
    const auto tiny = hn::BitCast(d, hn::IfThenElseZero(small, absu));  // only small lanes reach the add
    const auto sub = hn::Sub(hn::BitCast(du, hn::Add(tiny, hn::Set(d, 0.5f))), hn::Set(du, 0x3f000000u));
    auto mag = hn::IfThenElse(small, sub, normal);
    mag = hn::IfThenElse(hn::RebindMask(du, hn::Gt(abs, hn::Set(di, 0x477fefff))), hn::Set(du, 0x7c00u), mag);
    mag = hn::IfThenElse(hn::RebindMask(du, hn::Gt(abs, hn::Set(di, 0x7f800000))), hn::Set(du, 0x7e00u), mag);
    return hn::DemoteTo(d16, hn::BitCast(di, hn::Or(mag, sign)));
  }
#endif
  template <class D, class V>
  static HWY_INLINE void Put(D d, V v, uint16_t* p) { Put16(d, v, p); }
};

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
  for (int r = 1; r < nsrc; ++r) {
    const S* s = static_cast<const S*>(srcs[r]) + i;
    Op::Apply4(d, a0, a1, a2, a3, Fmt::Load(d, s), Fmt::Load(d, s + n), Fmt::Load(d, s + 2 * n),
               Fmt::Load(d, s + 3 * n));
  }
  const auto o0 = Fmt::Encode(d, a0), o1 = Fmt::Encode(d, a1), o2 = Fmt::Encode(d, a2), o3 = Fmt::Encode(d, a3);
  Fmt::Put(d, o0, dst + i), Fmt::Put(d, o1, dst + i + n), Fmt::Put(d, o2, dst + i + 2 * n);
  Fmt::Put(d, o3, dst + i + 3 * n);
  if (dst2) {
    Fmt::Put(d, o0, dst2 + i), Fmt::Put(d, o1, dst2 + i + n), Fmt::Put(d, o2, dst2 + i + 2 * n);
    Fmt::Put(d, o3, dst2 + i + 3 * n);
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
// Bf16Fmt::Encode's rounding of float32 bits, the result in the upper half: to nearest even, a
// NaN keeping its upper payload bits with the quiet bit set. Without NaN lanes (the caller checks
// for a whole block at once) the rounding alone.
template <class D32>
HWY_INLINE hn::Vec<D32> Bf16RoundHigh(D32 du, hn::Vec<D32> bits) {
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  return hn::And(hn::Add(bits, hn::Add(hn::Set(du, 0x7fffu), lsb)), hn::Set(du, 0xffff0000u));
}
template <class D32>
HWY_INLINE hn::Vec<D32> Bf16RoundHighNaN(D32 du, hn::Vec<D32> bits) {
  const hn::RebindToSigned<D32> di;
  const auto abs = hn::BitCast(di, hn::And(bits, hn::Set(du, 0x7fffffffu)));
  const auto nan = hn::RebindMask(du, hn::Gt(abs, hn::Set(di, 0x7f800000)));
  const auto quiet = hn::And(hn::Or(bits, hn::Set(du, 0x00400000u)), hn::Set(du, 0xffff0000u));
  return hn::IfThenElse(nan, quiet, Bf16RoundHigh(du, bits));
}

template <class Op>
HWY_NOINLINE size_t ReduceBf16Pairs(uint16_t* dst, uint16_t* dst2, const void* const* srcs, int nsrc, size_t n) {
  const hn::ScalableTag<uint32_t> du;
  const hn::RebindToFloat<decltype(du)> df;
  const size_t lanes = hn::Lanes(du);
  const auto high = hn::Set(du, 0xffff0000u);
  const auto load = [&](int r, size_t at) {
    return hn::LoadU(du, reinterpret_cast<const uint32_t*>(static_cast<const uint16_t*>(srcs[r]) + at));
  };
  size_t i = 0;
  for (; i + 4 * lanes <= n; i += 4 * lanes) {  // 2 vectors of pairs = 4 * lanes elements
    auto w0 = load(0, i), w1 = load(0, i + 2 * lanes);
    auto lo0 = hn::BitCast(df, hn::ShiftLeft<16>(w0)), hi0 = hn::BitCast(df, hn::And(w0, high));
    auto lo1 = hn::BitCast(df, hn::ShiftLeft<16>(w1)), hi1 = hn::BitCast(df, hn::And(w1, high));
    for (int r = 1; r < nsrc; ++r) {
      const auto v0 = load(r, i), v1 = load(r, i + 2 * lanes);
      Op::Apply4(df, lo0, hi0, lo1, hi1, hn::BitCast(df, hn::ShiftLeft<16>(v0)), hn::BitCast(df, hn::And(v0, high)),
                 hn::BitCast(df, hn::ShiftLeft<16>(v1)), hn::BitCast(df, hn::And(v1, high)));
    }
    const auto nan = hn::Or(hn::Or(hn::IsNaN(lo0), hn::IsNaN(hi0)), hn::Or(hn::IsNaN(lo1), hn::IsNaN(hi1)));
    hn::Vec<decltype(du)> o0, o1;
    if (HWY_LIKELY(hn::AllFalse(df, nan))) {
      o0 = hn::Or(hn::ShiftRight<16>(Bf16RoundHigh(du, hn::BitCast(du, lo0))), Bf16RoundHigh(du, hn::BitCast(du, hi0)));
      o1 = hn::Or(hn::ShiftRight<16>(Bf16RoundHigh(du, hn::BitCast(du, lo1))), Bf16RoundHigh(du, hn::BitCast(du, hi1)));
    } else {
      o0 = hn::Or(hn::ShiftRight<16>(Bf16RoundHighNaN(du, hn::BitCast(du, lo0))),
                  Bf16RoundHighNaN(du, hn::BitCast(du, hi0)));
      o1 = hn::Or(hn::ShiftRight<16>(Bf16RoundHighNaN(du, hn::BitCast(du, lo1))),
                  Bf16RoundHighNaN(du, hn::BitCast(du, hi1)));
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
  const size_t done = ReduceBf16Pairs<Op>(static_cast<uint16_t*>(dst), static_cast<uint16_t*>(dst2), srcs, nsrc, n);
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

int64_t CurrentTarget() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace symmar
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace symmar {

HWY_EXPORT(Reduce);
HWY_EXPORT(Copy);
HWY_EXPORT(CurrentTarget);

void simdReduceRanks(void* dst, void* dst2, const void* const* srcs, int nsrc, size_t n, symmarDataType_t dtype,
                     symmarRedOp_t op) {
  HWY_DYNAMIC_DISPATCH(Reduce)(dst, dst2, srcs, nsrc, n, static_cast<int>(dtype), static_cast<int>(op));
}

void simdCopy(void* dst, const void* src, size_t bytes) { HWY_DYNAMIC_DISPATCH(Copy)(dst, src, bytes); }

std::vector<int64_t> simdReduceTargets() { return hwy::SupportedAndGeneratedTargets(); }

void simdReduceForceTarget(int64_t target) { hwy::SetSupportedTargetsForTest(target); }

int64_t simdReduceCurrentTarget() { return HWY_DYNAMIC_DISPATCH(CurrentTarget)(); }

const char* simdReduceTargetName(int64_t target) { return hwy::TargetName(target); }

}  // namespace symmar
#endif  // HWY_ONCE
