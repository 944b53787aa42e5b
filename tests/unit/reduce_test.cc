// Host reduction: fp16/bf16 conversions and N-way reductions against a float64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/numeric.h"
#include "host/host_reduce.h"

using namespace symmar;

TEST(Convert, EveryFiniteHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) continue;  // NaN payloads
    EXPECT_EQ(floatToHalf(halfToFloat(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(Convert, HalfValuesAndRounding) {
  EXPECT_EQ(halfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00) << "rounds to infinity";
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00) << "tie rounds to even";
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02) << "tie rounds to even (up)";
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000) << "half the smallest subnormal ties to zero";
  EXPECT_EQ(floatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(NAN))));
}

TEST(Convert, Bf16RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80) << "tie to even";
  EXPECT_EQ(floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(NAN))));
}

TEST(Reduce, MatchesAFloat64Reference) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-4, 4);
  for (int n_ranks = 1; n_ranks <= 8; ++n_ranks) {
    const size_t n = 3001;
    std::vector<std::vector<double>> ref(n_ranks, std::vector<double>(n));
    for (auto& v : ref) for (double& x : v) x = dist(rng);
    for (symmarRedOp_t op : {symmarSum, symmarMax, symmarMin}) {
      std::vector<double> expect(n);
      for (size_t i = 0; i < n; ++i) {
        double acc = ref[0][i];
        for (int r = 1; r < n_ranks; ++r) {
          double x = ref[r][i];
          acc = op == symmarSum ? acc + x : (op == symmarMax ? std::max(acc, x) : std::min(acc, x));
        }
        expect[i] = acc;
      }
      // float32 and float64 directly; bf16 from rounded inputs with fp32 accumulation.
      std::vector<std::vector<float>> f(n_ranks, std::vector<float>(n));
      std::vector<std::vector<uint16_t>> b(n_ranks, std::vector<uint16_t>(n));
      std::vector<const void*> fs, bs, ds;
      for (int r = 0; r < n_ranks; ++r) {
        for (size_t i = 0; i < n; ++i) {
          f[r][i] = static_cast<float>(ref[r][i]);
          b[r][i] = floatToBf16(static_cast<float>(ref[r][i]));
        }
        fs.push_back(f[r].data());
        bs.push_back(b[r].data());
        ds.push_back(ref[r].data());
      }
      std::vector<float> fout(n);
      std::vector<uint16_t> bout(n);
      std::vector<double> dout(n);
      reduceRanks(fout.data(), nullptr, fs.data(), n_ranks, n, symmarFloat32, op);
      reduceRanks(bout.data(), nullptr, bs.data(), n_ranks, n, symmarBfloat16, op);
      reduceRanks(dout.data(), nullptr, ds.data(), n_ranks, n, symmarFloat64, op);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_NEAR(fout[i], expect[i], 1e-5 * n_ranks * 4) << i;
        ASSERT_NEAR(bf16ToFloat(bout[i]), expect[i], 0.02 * n_ranks * 4 / 8 + 0.04) << i;
        if (op != symmarSum) {
          ASSERT_EQ(dout[i], expect[i]);
        } else {
          ASSERT_NEAR(dout[i], expect[i], 1e-12);
        }
      }
    }
  }
}

TEST(Reduce, IntegerSumWrapsAndDestinationMayAliasASource) {
  std::vector<int32_t> a = {INT32_MAX, 5, -3}, b = {1, 7, -4};
  const void* srcs[] = {a.data(), b.data()};
  std::vector<int32_t> copy(3);
  reduceRanks(a.data(), copy.data(), srcs, 2, 3, symmarInt32, symmarSum);
  EXPECT_EQ(copy, a) << "the second destination gets the same values";
  EXPECT_EQ(a[0], INT32_MIN);
  EXPECT_EQ(a[1], 12);
  EXPECT_EQ(a[2], -7);
}
