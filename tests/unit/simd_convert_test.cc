// The host SIMD conversions (host/simd_reduce.h: simdSumToFloat, simdFromFloat) at every SIMD
// target this CPU supports, against the independent fp16/bf16 conversions of tests/common/reference.h:
// every 16-bit code decoded, encodings of special and random float32 values, and float32 sums of
// several buffers in rank order. NaNs must stay NaNs of the same sign (the reference does not keep
// payloads); every other value must match bit for bit.
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

TEST(SimdConvert, DecodesEveryCodeAtEveryTarget) {
  symmar_test::atEveryTarget([] {
    std::vector<uint16_t> codes(65536);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint16_t>(i);
    std::vector<float> out(codes.size());
    for (symmarDataType_t dt : kHalfTypes) {
      const void* src = codes.data();
      symmar::simdSumToFloat(out.data(), &src, 1, codes.size(), dt);
      int bad = 0;
      for (size_t i = 0; i < codes.size() && bad < 5; ++i) {
        if (!sameFloat(out[i], decode(dt, codes[i]))) {
          ADD_FAILURE() << "dtype " << dt << " code 0x" << std::hex << i << ": got 0x" << bitsOf(out[i]);
          ++bad;
        }
      }
    }
  });
}

TEST(SimdConvert, EncodesAsTheReferenceAtEveryTarget) {
  symmar_test::atEveryTarget([] {
    std::vector<float> in = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65520.0f, 65519.99f, 1e-8f, -1e-8f, 5.96e-8f,
                             2.98e-8f, 1e30f, -1e30f, 3.3895314e38f, std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                             -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                             1.00390625f, 1.01171875f, 1.0009765625f, 1.0029296875f};
    std::mt19937 rng(7);
    std::uniform_int_distribution<uint32_t> bits;
    for (int i = 0; i < 20000; ++i) {
      uint32_t u = bits(rng);
      float f;
      std::memcpy(&f, &u, 4);
      in.push_back(f);
      in.push_back(std::ldexp(static_cast<float>(u % 4096) - 2048.0f, static_cast<int>(u % 40) - 30));
    }
    std::vector<uint16_t> out(in.size());
    for (symmarDataType_t dt : kHalfTypes) {
      symmar::simdFromFloat(out.data(), in.data(), in.size(), dt);
      int bad = 0;
      for (size_t i = 0; i < in.size() && bad < 5; ++i) {
        if (!same16(out[i], encode(dt, in[i]), dt == symmarFloat16)) {
          ADD_FAILURE() << "dtype " << dt << " value " << in[i] << " (0x" << std::hex << bitsOf(in[i]) << "): got 0x"
                        << out[i] << ", want 0x" << encode(dt, in[i]);
          ++bad;
        }
      }
    }
    std::vector<float> f32(in.size());
    symmar::simdFromFloat(f32.data(), in.data(), in.size(), symmarFloat32);
    EXPECT_EQ(0, std::memcmp(f32.data(), in.data(), in.size() * 4)) << "float32 is stored as it is";
  });
}

TEST(SimdConvert, SumsInRankOrderAtEveryTarget) {
  symmar_test::atEveryTarget([] {
    std::mt19937 rng(11);
    for (symmarDataType_t dt : kHalfTypes) {
      for (int nsrc = 1; nsrc <= 8; ++nsrc) {
        for (size_t n : {0u, 1u, 7u, 8u, 9u, 31u, 64u, 1000u, 7168u}) {
          std::vector<std::vector<uint16_t>> bufs(nsrc, std::vector<uint16_t>(n));
          std::vector<const void*> srcs;
          std::uniform_real_distribution<float> value(-100.0f, 100.0f);
          for (auto& b : bufs) {
            for (auto& v : b) v = encode(dt, value(rng));
            srcs.push_back(b.data());
          }
          std::vector<float> got(n);
          symmar::simdSumToFloat(got.data(), srcs.data(), nsrc, n, dt);
          for (size_t i = 0; i < n; ++i) {
            float want = decode(dt, bufs[0][i]);
            for (int r = 1; r < nsrc; ++r) want += decode(dt, bufs[static_cast<size_t>(r)][i]);
            ASSERT_TRUE(sameFloat(got[i], want)) << "dtype " << dt << " nsrc " << nsrc << " n " << n << " at " << i;
          }
        }
      }
    }
  });
}

}  // namespace
