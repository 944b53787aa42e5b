// The fused norm's SIMD row kernels (host/simd_reduce.h: simdNormAddResidual, simdNormScale) at
// every SIMD target this CPU supports, against the independent fp16/bf16 conversions of
// tests/common/reference.h and a scalar reference of the row arithmetic written here: every 16-bit
// code decoded, encodings of special and random float32 values, rank-order sums with the residual
// and their sums of squares, and the scaled rows. NaNs must stay NaNs of the same sign (the
// reference does not keep payloads); every other value must match bit for bit. Row lengths cover
// the bf16 pair vectors, the widened vectors and the one-element tail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/reference.h"
#include "host/simd_reduce.h"
#include "unit/simd_targets.h"

namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

bool sameFloat(float got, float want) {
  if (std::isnan(want)) return std::isnan(got) && std::signbit(got) == std::signbit(want);
  return bitsOf(got) == bitsOf(want);
}

bool same16(uint16_t got, uint16_t want, bool is_half) {
  const uint16_t exp = is_half ? 0x7c00 : 0x7f80;
  const auto nan = [&](uint16_t v) { return (v & exp) == exp && (v & static_cast<uint16_t>(~exp & 0x7fff)) != 0; };
  if (nan(want)) return nan(got) && (got & 0x8000) == (want & 0x8000);
  return got == want;
}

float decode(symmarDataType_t dt, uint16_t v) {
  return dt == symmarFloat16 ? testref::halfToFloat(v) : testref::bf16ToFloat(v);
}
uint16_t encode(symmarDataType_t dt, float f) {
  return dt == symmarFloat16 ? testref::floatToHalf(f) : testref::floatToBf16(f);
}

const symmarDataType_t kHalfTypes[] = {symmarFloat16, symmarBfloat16};
const symmarDataType_t kNormTypes[] = {symmarFloat32, symmarFloat16, symmarBfloat16};

// A row of dtype from float32 values (float32 rows store them as they are).
std::vector<uint16_t> row16(symmarDataType_t dt, const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = encode(dt, v[i]);
  return out;
}

// The ranks' rows (the residual last) in the dtype's storage, from their float32 values; srcs
// point at them (at the float32 values themselves for float32).
struct StoredRows {
  std::vector<std::vector<uint16_t>> rows16;
  std::vector<const void*> srcs;
  StoredRows(symmarDataType_t dt, const std::vector<std::vector<float>>& vals) {
    rows16.reserve(vals.size());
    for (const std::vector<float>& v : vals) {
      rows16.push_back(row16(dt, v));
      srcs.push_back(dt == symmarFloat32 ? static_cast<const void*>(v.data()) : rows16.back().data());
    }
  }
};

// An output row of n elements in the dtype's storage.
struct OutputRow {
  std::vector<float> out32;
  std::vector<uint16_t> out16;
  void* data;
  OutputRow(symmarDataType_t dt, size_t n)
      : out32(n), out16(n), data(dt == symmarFloat32 ? static_cast<void*>(out32.data()) : out16.data()) {}
  /// Whether this row holds the same bytes as `other` (a second destination of the same values).
  bool sameBytesAs(const OutputRow& other) const {
    return out32.size() == other.out32.size() &&
           std::memcmp(out32.data(), other.out32.data(), out32.size() * sizeof(float)) == 0 && out16 == other.out16;
  }
};

// The row arithmetic by hand, one element at a time: rank-order float32 sum, the residual added,
// rounded once; squares of the stored values into partial i % 16, combined pairwise.
float referenceSquares(const std::vector<float>& stored) {
  float part[16] = {};
  for (size_t i = 0; i < stored.size(); ++i) {
    const float sq = stored[i] * stored[i];  // this file is compiled without FMA contraction
    part[i % 16] += sq;
  }
  for (size_t width = 8; width > 0; width /= 2) {
    for (size_t j = 0; j < width; ++j) part[j] += part[j + width];
  }
  return part[0];
}

const size_t kRowLengths[] = {1, 7, 8, 15, 16, 17, 31, 45, 48, 63, 64, 100, 7168};

TEST(SimdNorm, DecodesEveryCodeAtEveryTarget) {
  // (x * 1) * 1 is exact: the unrounded output is the decoded code, and the rounded one the code.
  symmar_test::atEveryTarget([] {
    std::vector<uint16_t> codes(65536), ones, out(65536);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint16_t>(i);
    std::vector<float> got(codes.size());
    for (symmarDataType_t dt : kHalfTypes) {
      ones.assign(codes.size(), encode(dt, 1.0f));
      symmar::simdNormScale(out.data(), nullptr, codes.data(), ones.data(), 1.0f, codes.size(), dt, got.data());
      int bad = 0;
      for (size_t i = 0; i < codes.size() && bad < 5; ++i) {
        if (!sameFloat(got[i], decode(dt, codes[i])) || !same16(out[i], codes[i], dt == symmarFloat16)) {
          ADD_FAILURE() << "dtype " << dt << " code 0x" << std::hex << i << ": got 0x" << bitsOf(got[i]) << ", 0x"
                        << out[i];
          ++bad;
        }
      }
    }
  });
}

TEST(SimdNorm, EncodesAsTheReferenceAtEveryTarget) {
  // A row of ones scaled by the value: (1 * v) * 1 = v exactly, then rounded by the kernel. Each
  // value fills a row of 45 elements (bf16 pairs, a widened vector and a one-element tail).
  symmar_test::atEveryTarget([] {
    std::vector<float> in = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65520.0f, 65519.99f, 1e-8f, -1e-8f, 5.96e-8f,
                             2.98e-8f, 1e30f, -1e30f, 3.3895314e38f, std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                             -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                             1.00390625f, 1.01171875f, 1.0009765625f, 1.0029296875f};
    std::mt19937 rng(7);
    std::uniform_int_distribution<uint32_t> bits;
    for (int i = 0; i < 1500; ++i) {
      uint32_t u = bits(rng);
      float f;
      std::memcpy(&f, &u, 4);
      in.push_back(f);
      in.push_back(std::ldexp(static_cast<float>(u % 4096) - 2048.0f, static_cast<int>(u % 40) - 30));
    }
    constexpr size_t kRow = 45;
    std::vector<uint16_t> out(kRow);
    std::vector<float> unrounded(kRow);
    for (symmarDataType_t dt : kHalfTypes) {
      const std::vector<uint16_t> ones(kRow, encode(dt, 1.0f));
      int bad = 0;
      for (size_t v = 0; v < in.size() && bad < 5; ++v) {
        for (float* keep : {static_cast<float*>(nullptr), unrounded.data()}) {
          symmar::simdNormScale(out.data(), nullptr, ones.data(), ones.data(), in[v], kRow, dt, keep);
          for (size_t i = 0; i < kRow; ++i) {
            if (!same16(out[i], encode(dt, in[v]), dt == symmarFloat16) || (keep && !sameFloat(keep[i], in[v]))) {
              ADD_FAILURE() << "dtype " << dt << " value " << in[v] << " (0x" << std::hex << bitsOf(in[v])
                            << ") at " << std::dec << i << ": got 0x" << std::hex << out[i] << ", want 0x"
                            << encode(dt, in[v]);
              ++bad;
              break;
            }
          }
        }
      }
    }
  });
}

TEST(SimdNorm, SumsAddsAndSquaresAsTheReferenceAtEveryTarget) {
  symmar_test::atEveryTarget([] {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> value(-100.0f, 100.0f);
    for (symmarDataType_t dt : kNormTypes) {
      for (int nsrc : {1, 2, 3, 8}) {
        for (bool residual : {false, true}) {
          for (size_t n : kRowLengths) {
            // Values as the dtype holds them, kept as float32 for the reference.
            std::vector<std::vector<float>> vals(static_cast<size_t>(nsrc) + 1, std::vector<float>(n));
            for (auto& row : vals) {
              for (float& v : row) v = dt == symmarFloat32 ? value(rng) : decode(dt, encode(dt, value(rng)));
            }
            const StoredRows rows(dt, vals);
            const void* res = residual ? rows.srcs[static_cast<size_t>(nsrc)] : nullptr;
            // A second destination in half the cases (where the row has a residual): the same bytes.
            OutputRow row(dt, n), copy(dt, n);
            const float squares = symmar::simdNormAddResidual(rows.srcs.data(), nsrc, res, row.data,
                                                              residual ? copy.data : nullptr, n, dt);
            ASSERT_TRUE(!residual || copy.sameBytesAs(row)) << "dtype " << dt << " nsrc " << nsrc << " n " << n;
            std::vector<float> stored(n);
            for (size_t i = 0; i < n; ++i) {
              float x = vals[0][i];
              for (int r = 1; r < nsrc; ++r) x += vals[static_cast<size_t>(r)][i];
              if (residual) x += vals[static_cast<size_t>(nsrc)][i];
              stored[i] = dt == symmarFloat32 ? x : decode(dt, encode(dt, x));
              const bool same = dt == symmarFloat32 ? sameFloat(row.out32[i], x) : row.out16[i] == encode(dt, x);
              ASSERT_TRUE(same) << "dtype " << dt << " nsrc " << nsrc << " residual " << residual << " n " << n
                                << " at " << i;
            }
            ASSERT_TRUE(sameFloat(squares, referenceSquares(stored)))
                << "dtype " << dt << " nsrc " << nsrc << " n " << n << ": " << squares << " vs "
                << referenceSquares(stored);
          }
        }
      }
    }
  });
}

// Rows whose sums meet NaNs and infinities: the library's rule for acc + x (the NaN of the last
// rank holding one; opposite infinities give the negative default NaN) decides each NaN's sign, in
// vectors that also hold ordinary lanes, which must keep their bits. The residual is finite, so
// adding it keeps a NaN's sign. The sum of squares of such a row is a NaN.
float sumByTheRule(float acc, float x) {
  if (std::isnan(x)) return x;
  if (std::isnan(acc)) return acc;
  const float r = acc + x;
  return std::isnan(r) ? -std::numeric_limits<float>::quiet_NaN() : r;
}

TEST(SimdNorm, SumsMeetingNaNsAndInfinitiesFollowTheSumRuleAtEveryTarget) {
  symmar_test::atEveryTarget([] {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    std::mt19937 rng(17);
    std::uniform_real_distribution<float> value(-100.0f, 100.0f);
    for (symmarDataType_t dt : kNormTypes) {
      for (int nsrc : {2, 3}) {
        for (size_t n : {size_t(64), size_t(71), size_t(7168)}) {
          std::vector<std::vector<float>> vals(static_cast<size_t>(nsrc) + 1, std::vector<float>(n));
          for (auto& row : vals) {
            for (float& v : row) v = dt == symmarFloat32 ? value(rng) : decode(dt, encode(dt, value(rng)));
          }
          const size_t last = static_cast<size_t>(nsrc) - 1;
          vals[1][3] = nan;                          // one NaN: it wins
          vals[0][20] = inf, vals[last][20] = -inf;  // inf - inf: the negative default NaN
          vals[0][37] = -nan, vals[last][37] = nan;  // two NaNs: the later rank's (positive)
          vals[last][38] = -nan, vals[0][38] = nan;  // and the other way round (negative)
          vals[0][n - 1] = -inf;                     // an infinity alone stays one
          const StoredRows rows(dt, vals);
          OutputRow row(dt, n), copy(dt, n);
          const float squares = symmar::simdNormAddResidual(
              rows.srcs.data(), nsrc, rows.srcs[static_cast<size_t>(nsrc)], row.data, copy.data, n, dt);
          ASSERT_TRUE(copy.sameBytesAs(row)) << "dtype " << dt << " nsrc " << nsrc << " n " << n;
          for (size_t i = 0; i < n; ++i) {
            float x = vals[0][i];
            for (int r = 1; r < nsrc; ++r) x = sumByTheRule(x, vals[static_cast<size_t>(r)][i]);
            x += vals[static_cast<size_t>(nsrc)][i];
            const bool same = dt == symmarFloat32 ? sameFloat(row.out32[i], x)
                                                  : same16(row.out16[i], encode(dt, x), dt == symmarFloat16);
            ASSERT_TRUE(same) << "dtype " << dt << " nsrc " << nsrc << " n " << n << " at " << i << ": want " << x;
          }
          EXPECT_TRUE(std::isnan(squares)) << "dtype " << dt << " nsrc " << nsrc << " n " << n;
        }
      }
    }
  });
}

TEST(SimdNorm, ScalesAsTheReferenceAtEveryTarget) {
  symmar_test::atEveryTarget([] {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> value(-8.0f, 8.0f);
    for (symmarDataType_t dt : kNormTypes) {
      for (size_t n : kRowLengths) {
        std::vector<float> x(n), g(n);
        for (size_t i = 0; i < n; ++i) {
          x[i] = dt == symmarFloat32 ? value(rng) : decode(dt, encode(dt, value(rng)));
          g[i] = dt == symmarFloat32 ? value(rng) : decode(dt, encode(dt, value(rng)));
        }
        const float inv = 0.3713f;
        const std::vector<uint16_t> x16 = row16(dt, x), g16 = row16(dt, g);
        const void* xs = dt == symmarFloat32 ? static_cast<const void*>(x.data()) : x16.data();
        const void* gs = dt == symmarFloat32 ? static_cast<const void*>(g.data()) : g16.data();
        std::vector<float> unrounded(n);
        for (float* keep : {static_cast<float*>(nullptr), unrounded.data()}) {
          // A second destination (on the first call with keep, on the second without): the same bytes.
          OutputRow row(dt, n), copy(dt, n);
          symmar::simdNormScale(row.data, keep ? copy.data : nullptr, xs, gs, inv, n, dt, keep);
          ASSERT_TRUE(!keep || copy.sameBytesAs(row)) << "dtype " << dt << " n " << n;
          symmar::simdNormScale(copy.data, keep ? nullptr : row.data, xs, gs, inv, n, dt, keep);
          ASSERT_TRUE(copy.sameBytesAs(row)) << "dtype " << dt << " n " << n;
          for (size_t i = 0; i < n; ++i) {
            const float y = x[i] * inv * g[i];
            const bool same = dt == symmarFloat32 ? sameFloat(row.out32[i], y) : row.out16[i] == encode(dt, y);
            ASSERT_TRUE(same && (!keep || sameFloat(keep[i], y))) << "dtype " << dt << " n " << n << " at " << i;
          }
        }
      }
    }
  });
}

}  // namespace
