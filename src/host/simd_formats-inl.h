// The storage formats and the operations shared by the host SIMD kernels (simd_reduce.cc,
// simd_norm.cc), compiled once per Highway target: included after hwy/foreach_target.h, so it
// is re-entered for every target (Highway's -inl.h convention). Why every target gives the same
// bits is said in simd_reduce.cc.
#if defined(SYMMAR_HOST_SIMD_FORMATS_INL_H_) == defined(HWY_TARGET_TOGGLE)  // NOLINT
#ifdef SYMMAR_HOST_SIMD_FORMATS_INL_H_
#undef SYMMAR_HOST_SIMD_FORMATS_INL_H_
#else
#define SYMMAR_HOST_SIMD_FORMATS_INL_H_
#endif

#include <cstdint>

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

// Whether a lane of a, b, c or e may hold a NaN: a NaN makes their sum a NaN, so one compare
// replaces four and their ORs of masks (which GCC spills to the stack on AVX2). Opposite infinities
// also give a NaN: the caller's NaN-aware path is exact in every lane, so that costs time only.
template <class D, class V>
HWY_INLINE bool AnyNaN4(D d, V a, V b, V c, V e) {
  return !hn::AllFalse(d, hn::IsNaN(hn::Add(hn::Add(a, b), hn::Add(c, e))));
}

struct SumOp {
  // Four independent lanes groups; one NaN test for all four (the exact path is lane-wise, so it
  // gives r itself in lanes without a NaN). Returns false when no result lane is a NaN.
  template <class D, class V>
  static HWY_INLINE bool Apply4(D d, V& a0, V& a1, V& a2, V& a3, V b0, V b1, V b2, V b3) {
    using T = hn::TFromD<D>;
    if constexpr (hwy::IsFloat<T>()) {
      const V r0 = hn::Add(a0, b0), r1 = hn::Add(a1, b1), r2 = hn::Add(a2, b2), r3 = hn::Add(a3, b3);
      if (HWY_UNLIKELY(AnyNaN4(d, r0, r1, r2, r3))) {
        a0 = SumNaNLanes(d, a0, b0, r0);
        a1 = SumNaNLanes(d, a1, b1, r1);
        a2 = SumNaNLanes(d, a2, b2, r2);
        a3 = SumNaNLanes(d, a3, b3, r3);
        return true;
      }
      a0 = r0, a1 = r1, a2 = r2, a3 = r3;
    } else {
      a0 = Apply(d, a0, b0), a1 = Apply(d, a1, b1), a2 = Apply(d, a2, b2), a3 = Apply(d, a3, b3);
    }
    return false;
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
  static HWY_INLINE bool Apply4(D d, V& a0, V& a1, V& a2, V& a3, V b0, V b1, V b2, V b3) {
    a0 = Apply(d, a0, b0), a1 = Apply(d, a1, b1), a2 = Apply(d, a2, b2), a3 = Apply(d, a3, b3);
    return true;  // a NaN operand may be selected: not known without a test
  }
  template <class D, class V>
  static HWY_INLINE V Apply(D, V a, V b) {
    if constexpr (kMax) return hn::IfThenElse(hn::Gt(a, b), a, b);
    return hn::IfThenElse(hn::Lt(a, b), a, b);
  }
};
using MaxOp = SelectOp<true>;
using MinOp = SelectOp<false>;

// Storage formats: Load widens to the accumulator lanes of D, Encode rounds back, Put stores, and
// Decode widens what Encode gave (Load's arithmetic on a vector already in registers).
template <typename T>
struct PlainFmt {
  using Store = T;
  using Acc = T;
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const T* p) { return hn::LoadU(d, p); }
  template <class D>
  static HWY_INLINE hn::Vec<D> Encode(D, hn::Vec<D> v) { return v; }
  template <class D>
  static HWY_INLINE hn::Vec<D> EncodeNoNaN(D, hn::Vec<D> v) { return v; }
  template <class D>
  static HWY_INLINE hn::Vec<D> Decode(D, hn::Vec<D> v) { return v; }
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
  template <class D, class V16>
  static HWY_INLINE hn::Vec<D> Decode(D d, V16 v) {
    const hn::RebindToUnsigned<D> du;
    return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, v)));
  }
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const uint16_t* p) {
    return Decode(d, hn::LoadU(hn::Rebind<uint16_t, D>(), p));
  }
  // core/numeric.h's floatToBf16: NaN keeps its top payload bits and gets the quiet bit. kNaNs
  // false: the caller knows no lane is a NaN (EncodeNoNaN), so the rounding alone.
  template <class D, bool kNaNs = true>
  static HWY_INLINE auto Encode(D d, hn::Vec<D> v) {
    (void)d;
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const hn::Rebind<uint16_t, D> d16;
    const auto bits = hn::BitCast(du, v);
    const auto hi = hn::ShiftRight<16>(bits);
    auto out = hn::ShiftRight<16>(hn::Add(bits, hn::Add(hn::Set(du, 0x7fffu), hn::And(hi, hn::Set(du, 1u)))));
    if constexpr (kNaNs) {
      const auto abs = hn::BitCast(di, hn::And(bits, hn::Set(du, 0x7fffffffu)));
      const auto nan = hn::RebindMask(du, hn::Gt(abs, hn::Set(di, 0x7f800000)));
      out = hn::IfThenElse(nan, hn::Or(hi, hn::Set(du, 0x40u)), out);
    }
    return hn::DemoteTo(d16, hn::BitCast(di, out));  // values <= 0xffff: the demotion does not saturate
  }
  template <class D>
  static HWY_INLINE auto EncodeNoNaN(D d, hn::Vec<D> v) {
    return Encode<D, false>(d, v);
  }
  template <class D, class V>
  static HWY_INLINE void Put(D d, V v, uint16_t* p) { Put16(d, v, p); }
};

// Bf16Fmt::Encode's rounding of float32 bits, the result in the upper half: to nearest even, a
// NaN keeping its upper payload bits with the quiet bit set. Without NaN lanes (the caller checks
// for a whole block at once) the rounding alone. Unmasked: the lower half left as the addition
// leaves it, where only PackBf16Pair reads the result (it takes the upper halves).
template <class D32>
HWY_INLINE hn::Vec<D32> Bf16RoundUnmasked(D32 du, hn::Vec<D32> bits) {
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  return hn::Add(bits, hn::Add(hn::Set(du, 0x7fffu), lsb));
}
template <class D32>
HWY_INLINE hn::Vec<D32> Bf16RoundHigh(D32 du, hn::Vec<D32> bits) {
  return hn::And(Bf16RoundUnmasked(du, bits), hn::Set(du, 0xffff0000u));
}
template <class D32>
HWY_INLINE hn::Vec<D32> Bf16RoundHighNaN(D32 du, hn::Vec<D32> bits) {
  const hn::RebindToSigned<D32> di;
  const auto abs = hn::BitCast(di, hn::And(bits, hn::Set(du, 0x7fffffffu)));
  const auto nan = hn::RebindMask(du, hn::Gt(abs, hn::Set(di, 0x7f800000)));
  const auto quiet = hn::And(hn::Or(bits, hn::Set(du, 0x00400000u)), hn::Set(du, 0xffff0000u));
  return hn::IfThenElse(nan, quiet, Bf16RoundHigh(du, bits));
}

// A vector of bf16 pairs (two elements per 32-bit lane) as two float32 vectors: the lower elements
// shifted up, the upper ones with the lower half masked off. Both are exact.
template <class DF, class VU>
HWY_INLINE hn::Vec<DF> Bf16PairLower(DF df, VU pairs) {
  return hn::BitCast(df, hn::ShiftLeft<16>(pairs));
}
template <class DF, class VU>
HWY_INLINE hn::Vec<DF> Bf16PairUpper(DF df, VU pairs) {
  return hn::BitCast(df, hn::And(pairs, hn::Set(hn::RebindToUnsigned<DF>(), 0xffff0000u)));
}

// Two rounded vectors (each lane's bf16 in its upper half; the lower halves are not read) as one
// vector of pairs: rlo's in the lower halves, rhi's in the upper ones. One 16-bit blend.
template <class VU>
HWY_INLINE VU PackBf16Pair(VU rlo, VU rhi) {
  const hn::DFromV<VU> du;
#if HWY_TARGET == HWY_SCALAR  // one 32-bit lane: no 16-bit lanes to blend
  return hn::Or(hn::ShiftRight<16>(rlo), hn::And(rhi, hn::Set(du, 0xffff0000u)));
#else
  const hn::Repartition<uint16_t, decltype(du)> d16;
  return hn::BitCast(du, hn::OddEven(hn::BitCast(d16, rhi), hn::BitCast(d16, hn::ShiftRight<16>(rlo))));
#endif
}

// (a + b + 1) >> 1 per 16-bit lane, computed without overflow. Highway's AverageRound is one native
// instruction on x86 (pavgw), NEON (urhadd) and SVE2 (urhadd), but Highway 1.0's SVE and SVE_256
// targets add a + b + 1 in 16 bits, which wraps for sums past 0xffff: on a CPU with SVE and not
// SVE2 (Graviton 3, Neoverse V1) bf16 results that should round up came out truncated. Elsewhere
// the identity (a | b) - ((a ^ b) >> 1) gives the same value in 16 bits.
template <class V>
HWY_INLINE V RoundedHalfSum(V a, V b) {
#if HWY_ARCH_X86 || HWY_TARGET == HWY_NEON || HWY_TARGET == HWY_SVE2 || HWY_TARGET == HWY_SVE2_128
  return hn::AverageRound(a, b);
#else
  return hn::Sub(hn::Or(a, b), hn::ShiftRight<1>(hn::Xor(a, b)));
#endif
}

// PackBf16Pair(Bf16RoundUnmasked(lo), Bf16RoundUnmasked(hi)) for vectors without NaN lanes, in
// 16-bit lanes, two elements per 32-bit lane at once: the upper halves of lo and hi packed as
// PackBf16Pair packs them (u) and the lower halves alike (l). An element rounds up by one exactly
// when l + (u & 1) + 0x7fff carries into bit 16, that is when the rounded average of l and
// 0x7ffe + (u & 1), (l + (u & 1) + 0x7fff) >> 1 without overflow, reaches 0x8000. The sum u + 1
// cannot leave 16 bits: without NaNs u is at most 0xff80 (-infinity, whose lower half is 0 and
// never rounds up), and 0xff7f rounds up to -infinity as the 32-bit form does.
template <class VU>
HWY_INLINE VU RoundAndPackBf16NoNaN(VU lo, VU hi) {
  const hn::DFromV<VU> du;
#if HWY_TARGET == HWY_SCALAR  // one 32-bit lane: no 16-bit lanes
  return PackBf16Pair(Bf16RoundUnmasked(du, lo), Bf16RoundUnmasked(du, hi));
#else
  const hn::Repartition<uint16_t, decltype(du)> d16;
  const auto u = hn::OddEven(hn::BitCast(d16, hi), hn::BitCast(d16, hn::ShiftRight<16>(lo)));
  const auto l = hn::OddEven(hn::BitCast(d16, hn::ShiftLeft<16>(hi)), hn::BitCast(d16, lo));
  const auto bias = hn::OrAnd(hn::Set(d16, uint16_t{0x7ffe}), u, hn::Set(d16, uint16_t{1}));
  return hn::BitCast(du, hn::Add(u, hn::ShiftRight<15>(RoundedHalfSum(l, bias))));
#endif
}

// The two halves of a vector of bf16 pairs, each as float32 lanes (lower: shifted up, upper: the
// lower half masked off), rounded as Bf16Fmt::Encode rounds and packed back into pairs, with the
// NaN path only where a lane holds a NaN. *no_nan (if not null) tells whether no lane was a NaN
// (the test adds the halves: opposite infinities take the NaN path too, which is exact in every lane).
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> RoundAndPackBf16Pair(DF df, hn::Vec<DF> lo, hn::Vec<DF> hi,
                                                                 bool* no_nan = nullptr) {
  const hn::RebindToUnsigned<DF> du;
  const bool none = hn::AllFalse(df, hn::IsNaN(hn::Add(lo, hi)));
  if (no_nan) *no_nan = none;
  if (HWY_LIKELY(none)) return RoundAndPackBf16NoNaN(hn::BitCast(du, lo), hn::BitCast(du, hi));
  return PackBf16Pair(Bf16RoundHighNaN(du, hn::BitCast(du, lo)), Bf16RoundHighNaN(du, hn::BitCast(du, hi)));
}

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
  template <class D, class V16>
  static HWY_INLINE hn::Vec<D> Decode(D d, V16 v) {
    return hn::PromoteTo(d, hn::BitCast(hn::Rebind<hwy::float16_t, D>(), v));
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
  // Encode where no lane is a NaN (the caller checked): the conversion alone.
  template <class D>
  static HWY_INLINE auto EncodeNoNaN(D d, hn::Vec<D> v) {
    (void)d;
    return hn::BitCast(hn::Rebind<uint16_t, D>(), hn::DemoteTo(hn::Rebind<hwy::float16_t, D>(), v));
  }
#else
  // core/numeric.h's halfToFloat: exact; subnormals as mantissa * 2^-24 (exact in fp32, a normal).
  template <class D, class V16>
  static HWY_INLINE hn::Vec<D> Decode(D d, V16 v) {
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const auto h = hn::PromoteTo(du, v);
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
  // to nearest even by adding 0.5f, whose ulp (2^-24) is fp16's subnormal step. kNaNs false: the
  // caller knows no lane is a NaN (EncodeNoNaN).
  template <class D, bool kNaNs = true>
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
    if constexpr (kNaNs) mag = hn::IfThenElse(hn::RebindMask(du, hn::Gt(abs, hn::Set(di, 0x7f800000))), hn::Set(du, 0x7e00u), mag);
    return hn::DemoteTo(d16, hn::BitCast(di, hn::Or(mag, sign)));
  }
  template <class D>
  static HWY_INLINE auto EncodeNoNaN(D d, hn::Vec<D> v) {
    return Encode<D, false>(d, v);
  }
#endif
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const uint16_t* p) {
    return Decode(d, hn::LoadU(hn::Rebind<uint16_t, D>(), p));
  }
  template <class D, class V>
  static HWY_INLINE void Put(D d, V v, uint16_t* p) { Put16(d, v, p); }
};

}  // namespace HWY_NAMESPACE
}  // namespace symmar
HWY_AFTER_NAMESPACE();

#endif  // SYMMAR_HOST_SIMD_FORMATS_INL_H_
