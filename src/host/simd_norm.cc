// The fused norm's row arithmetic (add_rms_norm.cc) with Google Highway, compiled once per SIMD
// target and chosen at run time like simd_reduce.cc, whose comment says why every target gives the
// same bits. Two passes over a row instead of one per step: the first sums the ranks' rows, adds the
// residual, stores residual_out and squares what was stored; the second reads residual_out back (in
// cache: half the bytes of a float32 row) and scales it by the RMS and gamma.
//
// The sum of squares keeps 16 float32 partial sums, element i going to partial i % 16, combined
// pairwise in a fixed order at the end: with L lanes per vector (L divides 16), vector k of each
// block of 16 elements adds to accumulator k, whose lane l is partial k * L + l. So the partials,
// and the bits, are the same at every target. Multiply and add stay separate instructions: this
// file is compiled without FMA contraction, and Highway's Mul and Add are not fused.
#include <type_traits>

#include "host/simd_reduce.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "host/simd_norm.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "host/simd_formats-inl.h"

HWY_BEFORE_NAMESPACE();
namespace symmar {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr size_t kSquareParts = 16;

// Where a row's results go: out, and the same values to copy when it is not null (the two-shot
// publishes the rows it finishes for its peers in the same pass).
template <typename S>
struct RowOut {
  S* out;
  S* copy;
};
template <class Fmt, class D, class V>
HWY_INLINE void PutRow(D d, V v, RowOut<typename Fmt::Store> row, size_t i) {
  Fmt::Put(d, v, row.out + i);
  if (row.copy) Fmt::Put(d, v, row.copy + i);
}
template <class DU, class V>
HWY_INLINE void PutPairs(DU du, V v, RowOut<uint16_t> row, size_t i) {
  hn::StoreU(v, du, reinterpret_cast<uint32_t*>(row.out + i));
  if (row.copy) hn::StoreU(v, du, reinterpret_cast<uint32_t*>(row.copy + i));
}

// Elements [i, i + Lanes(d)) of a row: the rank-order sum of the sources plus the residual. kExact:
// each source added by SumOp's NaN rules; otherwise plain adds, which give the same bits in every
// lane that ends without a NaN (a NaN, once in a sum, stays in it), so the caller checks the result
// once and sums again exactly only where a lane ends as a NaN.
template <class Fmt, bool kExact, class D>
HWY_INLINE hn::Vec<D> SumResidualLanes(D d, const typename Fmt::Store* src0, const void* const* srcs, int nsrc,
                                       const typename Fmt::Store* residual, size_t i) {
  using S = typename Fmt::Store;
  auto x = Fmt::Load(d, src0 + i);
  for (int r = 1; r < nsrc; ++r) {
    const auto v = Fmt::Load(d, static_cast<const S*>(srcs[r]) + i);
    x = kExact ? SumOp::Apply(d, x, v) : hn::Add(x, v);
  }
  if (residual) x = hn::Add(x, Fmt::Load(d, residual + i));
  return x;
}

// The same, rounded and stored to residual_out; returns the stored values, decoded.
template <class Fmt, class D>
HWY_INLINE hn::Vec<D> AddResidualLanes(D d, const typename Fmt::Store* src0, const void* const* srcs, int nsrc,
                                       const typename Fmt::Store* residual, RowOut<typename Fmt::Store> res_out,
                                       size_t i) {
  auto x = SumResidualLanes<Fmt, false>(d, src0, srcs, nsrc, residual, i);
  if (HWY_LIKELY(hn::AllFalse(d, hn::IsNaN(x)))) {
    const auto stored = Fmt::EncodeNoNaN(d, x);
    PutRow<Fmt>(d, stored, res_out, i);
    return Fmt::Decode(d, stored);
  }
  x = SumResidualLanes<Fmt, true>(d, src0, srcs, nsrc, residual, i);
  const auto stored = Fmt::Encode(d, x);
  PutRow<Fmt>(d, stored, res_out, i);
  return Fmt::Decode(d, stored);
}

// AddResidualLanes at element i, its square added to acc. A function rather than a lambda in the
// loops below: GCC left such a lambda out of line at some targets (AVX2's bfloat16 path, SSE4's
// fp16 one), a call per block with the accumulators in memory, 2-3x slower.
template <class Fmt, class D>
HWY_INLINE void AddResidualSquare(D d, const typename Fmt::Store* src0, const void* const* srcs, int nsrc,
                                  const typename Fmt::Store* residual, RowOut<typename Fmt::Store> res_out, size_t i,
                                  hn::Vec<D>& acc) {
  const auto v = AddResidualLanes<Fmt>(d, src0, srcs, nsrc, residual, res_out, i);
  acc = hn::Add(acc, hn::Mul(v, v));
}

// Blocks of 16 elements with kVecs vectors of 16 / kVecs lanes each; returns where the blocks end.
template <class Fmt, int kVecs, class D>
HWY_INLINE size_t AddResidualBlocks(D d, const typename Fmt::Store* src0, const void* const* srcs, int nsrc,
                                    const typename Fmt::Store* residual, RowOut<typename Fmt::Store> res_out, size_t n,
                                    float* part) {
  const size_t lanes = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  size_t i = 0;
  for (; i + kSquareParts <= n; i += kSquareParts) {
    AddResidualSquare<Fmt>(d, src0, srcs, nsrc, residual, res_out, i, a0);
    if constexpr (kVecs > 1) AddResidualSquare<Fmt>(d, src0, srcs, nsrc, residual, res_out, i + lanes, a1);
    if constexpr (kVecs > 2) {
      AddResidualSquare<Fmt>(d, src0, srcs, nsrc, residual, res_out, i + 2 * lanes, a2);
      AddResidualSquare<Fmt>(d, src0, srcs, nsrc, residual, res_out, i + 3 * lanes, a3);
    }
  }
  hn::StoreU(a0, d, part);
  if constexpr (kVecs > 1) hn::StoreU(a1, d, part + lanes);
  if constexpr (kVecs > 2) {
    hn::StoreU(a2, d, part + 2 * lanes);
    hn::StoreU(a3, d, part + 3 * lanes);
  }
  return i;
}

// bfloat16 without widening, as ReduceBf16Pairs in simd_reduce.cc: a 32-bit lane holds two
// elements, each a float32 once shifted up (lower) or masked (upper), and the same operations as
// above give the same bits. One vector of pairs at element i: the rows' sum plus the residual,
// rounded and stored to res_out; slo and shi get the stored lower and upper elements as float32.
template <class DU, class VF = hn::Vec<hn::RebindToFloat<DU>>>
HWY_INLINE void AddResidualBf16Pairs(DU du, const uint16_t* src0, const void* const* srcs, int nsrc,
                                     const uint16_t* residual, RowOut<uint16_t> res_out, size_t i, VF& slo, VF& shi) {
  const hn::RebindToFloat<DU> df;
  const auto load = [&](const uint16_t* p) { return hn::LoadU(du, reinterpret_cast<const uint32_t*>(p + i)); };
  // The pairs' sums as SumResidualLanes makes them: plain adds, and the exact ones only for a
  // vector with a NaN lane at the end (RoundAndPackBf16Pair's test).
  const auto sum_pairs = [&](auto exact, VF& lo, VF& hi) {
    const auto w = load(src0);
    lo = Bf16PairLower(df, w), hi = Bf16PairUpper(df, w);
    for (int r = 1; r < nsrc; ++r) {
      const auto v = load(static_cast<const uint16_t*>(srcs[r]));
      if constexpr (decltype(exact)::value) {
        lo = SumOp::Apply(df, lo, Bf16PairLower(df, v));
        hi = SumOp::Apply(df, hi, Bf16PairUpper(df, v));
      } else {
        lo = hn::Add(lo, Bf16PairLower(df, v));
        hi = hn::Add(hi, Bf16PairUpper(df, v));
      }
    }
    if (residual) {
      const auto v = load(residual);
      lo = hn::Add(lo, Bf16PairLower(df, v));
      hi = hn::Add(hi, Bf16PairUpper(df, v));
    }
  };
  VF lo, hi;
  sum_pairs(std::false_type(), lo, hi);
  bool no_nan = true;
  auto stored = RoundAndPackBf16Pair(df, lo, hi, &no_nan);
  if (HWY_UNLIKELY(!no_nan)) {
    sum_pairs(std::true_type(), lo, hi);
    stored = RoundAndPackBf16Pair(df, lo, hi);
  }
  PutPairs(du, stored, res_out, i);
  slo = Bf16PairLower(df, stored), shi = Bf16PairUpper(df, stored);
}

// AddResidualBf16Pairs at element i, the squares of its lower and upper elements added to lo_acc
// and hi_acc (a function, not a lambda: AddResidualSquare says why).
template <class DU, class VF = hn::Vec<hn::RebindToFloat<DU>>>
HWY_INLINE void AddResidualBf16Squares(DU du, const uint16_t* src0, const void* const* srcs, int nsrc,
                                       const uint16_t* residual, RowOut<uint16_t> res_out, size_t i, VF& lo_acc,
                                       VF& hi_acc) {
  VF slo, shi;
  AddResidualBf16Pairs(du, src0, srcs, nsrc, residual, res_out, i, slo, shi);
  lo_acc = hn::Add(lo_acc, hn::Mul(slo, slo));
  hi_acc = hn::Add(hi_acc, hn::Mul(shi, shi));
}

// Vectors of 4 or 8 lanes hold 8 or 16 elements, so a block of 16 is kVecs = 2 or 1 vectors; lane
// l of vector k holds elements k * 2 * lanes + 2l and + 2l + 1 of the block, whose squares go to
// those partials.
template <int kVecs, class DU>
HWY_INLINE size_t AddResidualBf16Blocks(DU du, const uint16_t* src0, const void* const* srcs, int nsrc,
                                        const uint16_t* residual, RowOut<uint16_t> res_out, size_t n, float* part) {
  const hn::RebindToFloat<DU> df;
  const size_t lanes = hn::Lanes(du);
  auto lo0 = hn::Zero(df), hi0 = hn::Zero(df), lo1 = hn::Zero(df), hi1 = hn::Zero(df);
  size_t i = 0;
  for (; i + kSquareParts <= n; i += kSquareParts) {
    AddResidualBf16Squares(du, src0, srcs, nsrc, residual, res_out, i, lo0, hi0);
    if constexpr (kVecs > 1) AddResidualBf16Squares(du, src0, srcs, nsrc, residual, res_out, i + 2 * lanes, lo1, hi1);
  }
  HWY_ALIGN float lo[kSquareParts / 2], hi[kSquareParts / 2];
  hn::StoreU(lo0, df, lo), hn::StoreU(hi0, df, hi);
  if constexpr (kVecs > 1) hn::StoreU(lo1, df, lo + lanes), hn::StoreU(hi1, df, hi + lanes);
  for (size_t k = 0; k < kSquareParts / 2; ++k) part[2 * k] = lo[k], part[2 * k + 1] = hi[k];
  return i;
}

#if HWY_TARGET != HWY_SCALAR  // (no halves of a one-lane vector)
// Vectors of 16 lanes hold two blocks: lanes 0-7 the first, 8-15 the second, each laid out as one
// vector of 8 lanes above. The first block's squares are added before the second's, into
// accumulators of 8 lanes, so every partial sums its elements in the order the narrower vectors do.
template <class DU>
HWY_INLINE size_t AddResidualBf16WideBlocks(DU du, const uint16_t* src0, const void* const* srcs, int nsrc,
                                            const uint16_t* residual, RowOut<uint16_t> res_out, size_t n, float* part) {
  const hn::RebindToFloat<DU> df;
  const hn::Half<decltype(df)> dh;
  auto lo_acc = hn::Zero(dh), hi_acc = hn::Zero(dh);
  size_t i = 0;
  for (; i + 2 * kSquareParts <= n; i += 2 * kSquareParts) {
    hn::Vec<decltype(df)> slo, shi;
    AddResidualBf16Pairs(du, src0, srcs, nsrc, residual, res_out, i, slo, shi);
    const auto sqlo = hn::Mul(slo, slo), sqhi = hn::Mul(shi, shi);
    lo_acc = hn::Add(hn::Add(lo_acc, hn::LowerHalf(dh, sqlo)), hn::UpperHalf(dh, sqlo));
    hi_acc = hn::Add(hn::Add(hi_acc, hn::LowerHalf(dh, sqhi)), hn::UpperHalf(dh, sqhi));
  }
  HWY_ALIGN float lo[kSquareParts / 2], hi[kSquareParts / 2];
  hn::StoreU(lo_acc, dh, lo), hn::StoreU(hi_acc, dh, hi);
  for (size_t k = 0; k < kSquareParts / 2; ++k) part[2 * k] = lo[k], part[2 * k + 1] = hi[k];
  return i;  // a last single block, if any, goes to the caller's one-lane path, in order
}
#endif

template <class Fmt>
HWY_NOINLINE float AddResidualTyped(const void* const* srcs, int nsrc, const void* residual_raw, void* res_out_raw,
                                    void* res_copy_raw, size_t n) {
  using S = typename Fmt::Store;
  const S* src0 = static_cast<const S*>(srcs[0]);  // kept in a register: the stores below might alias srcs[]
  const S* residual = static_cast<const S*>(residual_raw);
  const RowOut<S> res_out{static_cast<S*>(res_out_raw), static_cast<S*>(res_copy_raw)};
  HWY_ALIGN float part[kSquareParts] = {};
  const hn::CappedTag<float, kSquareParts> d;
  size_t i = 0;  // vectors of 4, 8 or 16 lanes; any other width takes the one-lane path below
  if constexpr (std::is_same_v<Fmt, Bf16Fmt>) {
    const hn::CappedTag<uint32_t, kSquareParts / 2> du;
    bool wide = false;
#if HWY_TARGET != HWY_SCALAR
    const hn::CappedTag<uint32_t, kSquareParts> dw;
    wide = hn::Lanes(dw) == 16;
    if (wide) i = AddResidualBf16WideBlocks(dw, src0, srcs, nsrc, residual, res_out, n, part);
#endif
    if (!wide && hn::Lanes(du) == 8) i = AddResidualBf16Blocks<1>(du, src0, srcs, nsrc, residual, res_out, n, part);
    if (!wide && hn::Lanes(du) == 4) i = AddResidualBf16Blocks<2>(du, src0, srcs, nsrc, residual, res_out, n, part);
  } else {
    if (hn::Lanes(d) == 16) i = AddResidualBlocks<Fmt, 1>(d, src0, srcs, nsrc, residual, res_out, n, part);
    if (hn::Lanes(d) == 8) i = AddResidualBlocks<Fmt, 2>(d, src0, srcs, nsrc, residual, res_out, n, part);
    if (hn::Lanes(d) == 4) i = AddResidualBlocks<Fmt, 4>(d, src0, srcs, nsrc, residual, res_out, n, part);
  }
  const hn::CappedTag<float, 1> d1;
  for (; i < n; ++i) {
    const float v = hn::GetLane(AddResidualLanes<Fmt>(d1, src0, srcs, nsrc, residual, res_out, i));
    part[i % kSquareParts] += v * v;
  }
  for (size_t width = kSquareParts / 2; width > 0; width /= 2) {
    for (size_t j = 0; j < width; ++j) part[j] += part[j + width];
  }
  return part[0];
}

// ScaleTyped's bfloat16 rows in pairs, as above; returns where the whole vectors end.
HWY_INLINE size_t ScaleBf16Pairs(RowOut<uint16_t> out, const uint16_t* x, const uint16_t* gamma, float inv, size_t n) {
  const hn::ScalableTag<uint32_t> du;
  const hn::RebindToFloat<decltype(du)> df;
  const size_t step = 2 * hn::Lanes(du);
  const auto scale = hn::Set(df, inv);
  size_t i = 0;
  for (; i + step <= n; i += step) {
    const auto wx = hn::LoadU(du, reinterpret_cast<const uint32_t*>(x + i));
    const auto wg = hn::LoadU(du, reinterpret_cast<const uint32_t*>(gamma + i));
    const auto lo = hn::Mul(hn::Mul(Bf16PairLower(df, wx), scale), Bf16PairLower(df, wg));
    const auto hi = hn::Mul(hn::Mul(Bf16PairUpper(df, wx), scale), Bf16PairUpper(df, wg));
    PutPairs(du, RoundAndPackBf16Pair(df, lo, hi), out, i);
  }
  return i;
}

// out (and copy, if not null) = (x * inv) * gamma, rounded to the storage format; `unrounded` (if
// not null) gets the values before rounding.
template <class Fmt>
HWY_NOINLINE void ScaleTyped(void* out_raw, void* copy_raw, const void* x_raw, const void* gamma_raw, float inv,
                             size_t n, float* unrounded) {
  using S = typename Fmt::Store;
  const S* x = static_cast<const S*>(x_raw);
  const S* gamma = static_cast<const S*>(gamma_raw);
  const RowOut<S> out{static_cast<S*>(out_raw), static_cast<S*>(copy_raw)};
  const auto one = [&](auto d, size_t i) {
    const auto y = hn::Mul(hn::Mul(Fmt::Load(d, x + i), hn::Set(d, inv)), Fmt::Load(d, gamma + i));
    PutRow<Fmt>(d, Fmt::Encode(d, y), out, i);
    if (unrounded) hn::StoreU(y, d, unrounded + i);
  };
  size_t i = 0;
  if constexpr (std::is_same_v<Fmt, Bf16Fmt>) {
    if (!unrounded) i = ScaleBf16Pairs(out, x, gamma, inv, n);
  }
  const hn::ScalableTag<float> d;
  for (; i + hn::Lanes(d) <= n; i += hn::Lanes(d)) one(d, i);
  for (; i < n; ++i) one(hn::CappedTag<float, 1>(), i);
}

float AddResidual(const void* const* srcs, int nsrc, const void* residual, void* res_out, void* res_copy, size_t n,
                  int dtype) {
  switch (dtype) {
    case symmarFloat32: return AddResidualTyped<PlainFmt<float>>(srcs, nsrc, residual, res_out, res_copy, n);
    case symmarFloat16: return AddResidualTyped<HalfFmt>(srcs, nsrc, residual, res_out, res_copy, n);
    default: return AddResidualTyped<Bf16Fmt>(srcs, nsrc, residual, res_out, res_copy, n);
  }
}

void Scale(void* out, void* copy, const void* x, const void* gamma, float inv, size_t n, int dtype, float* unrounded) {
  switch (dtype) {
    case symmarFloat32: return ScaleTyped<PlainFmt<float>>(out, copy, x, gamma, inv, n, unrounded);
    case symmarFloat16: return ScaleTyped<HalfFmt>(out, copy, x, gamma, inv, n, unrounded);
    default: return ScaleTyped<Bf16Fmt>(out, copy, x, gamma, inv, n, unrounded);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace symmar
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace symmar {

HWY_EXPORT(AddResidual);
HWY_EXPORT(Scale);

float simdNormAddResidual(const void* const* srcs, int nsrc, const void* residual, void* residual_out,
                          void* residual_copy, size_t n, symmarDataType_t dtype) {
  return HWY_DYNAMIC_DISPATCH(AddResidual)(srcs, nsrc, residual, residual_out, residual_copy, n,
                                           static_cast<int>(dtype));
}

void simdNormScale(void* out, void* out_copy, const void* x, const void* gamma, float inv, size_t n,
                   symmarDataType_t dtype, float* unrounded) {
  HWY_DYNAMIC_DISPATCH(Scale)(out, out_copy, x, gamma, inv, n, static_cast<int>(dtype), unrounded);
}

}  // namespace symmar
#endif  // HWY_ONCE
