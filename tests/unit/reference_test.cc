// The tests' reference (tests/common/reference.h): fp16 and bf16 conversions against literal bit
// patterns and exhaustively (every code round-trips, every midpoint rounds to the even code), the
// element access, the reduction and the tolerances. Then the library's own conversions against it,
// so that a rounding bug in either shows up as a disagreement.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "common/reference.h"
#include "core/numeric.h"

namespace {

float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bool halfIsNan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0; }
bool bf16IsNan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x007fu) != 0; }

TEST(ReferenceHalf, LiteralBitPatterns) {
  EXPECT_EQ(testref::floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(testref::floatToHalf(-2.5f), 0xc100);
  EXPECT_EQ(testref::floatToHalf(0.1f), 0x2e66);
  EXPECT_EQ(testref::floatToHalf(65504.0f), 0x7bff) << "the largest finite";
  EXPECT_EQ(testref::floatToHalf(65519.99f), 0x7bff) << "just below the tie with infinity";
  EXPECT_EQ(testref::floatToHalf(65520.0f), 0x7c00) << "the tie rounds to even: infinity";
  EXPECT_EQ(testref::floatToHalf(1e9f), 0x7c00);
  EXPECT_EQ(testref::floatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(testref::floatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(testref::floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(testref::floatToHalf(-0.0f), 0x8000) << "the sign of zero is kept";
  EXPECT_EQ(testref::floatToHalf(std::ldexp(1.0f, -14)), 0x0400) << "the smallest normal";
  EXPECT_EQ(testref::floatToHalf(std::ldexp(1023.0f, -24)), 0x03ff) << "the largest subnormal";
  EXPECT_EQ(testref::floatToHalf(std::ldexp(1.0f, -24)), 0x0001) << "the smallest subnormal";
  EXPECT_EQ(testref::floatToHalf(std::ldexp(1.0f, -25)), 0x0000) << "half the smallest subnormal ties to zero";
  EXPECT_EQ(testref::floatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(testref::floatToHalf(std::ldexp(3.0f, -25)), 0x0002) << "1.5 subnormal steps tie to 2";
  EXPECT_EQ(testref::floatToHalf(-std::ldexp(1.0f, -26)), 0x8000) << "underflow keeps the sign";
  EXPECT_EQ(testref::floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00) << "tie rounds to even (down)";
  EXPECT_EQ(testref::floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02) << "tie rounds to even (up)";
  EXPECT_EQ(testref::floatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01) << "above the tie";
  EXPECT_EQ(testref::floatToHalf(2.0f - std::ldexp(1.0f, -12)), 0x4000) << "rounding carries into the exponent";

  EXPECT_EQ(testref::halfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(testref::halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(testref::halfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(testref::halfToFloat(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(testref::halfToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(testref::halfToFloat(0xc100), -2.5f);
  EXPECT_EQ(testref::halfToFloat(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(testref::halfToFloat(0x8000)));
}

TEST(ReferenceHalf, NanStaysNan) {
  EXPECT_TRUE(std::isnan(testref::halfToFloat(0x7e00)));
  EXPECT_TRUE(std::isnan(testref::halfToFloat(0x7c01))) << "a signalling NaN is no infinity";
  const uint16_t q = testref::floatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(halfIsNan(q)) << std::hex << q;
  EXPECT_TRUE(halfIsNan(testref::floatToHalf(fromBits(0x7f800001u)))) << "a payload below the kept bits";
  EXPECT_EQ(testref::floatToHalf(fromBits(0xffc00000u)) & 0x8000, 0x8000) << "the sign of a NaN is kept";
}

TEST(ReferenceBf16, LiteralBitPatterns) {
  EXPECT_EQ(testref::floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(testref::floatToBf16(-2.5f), 0xc020);
  EXPECT_EQ(testref::floatToBf16(3.14159265f), 0x4049);
  EXPECT_EQ(testref::floatToBf16(-0.0f), 0x8000);
  EXPECT_EQ(testref::floatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80) << "tie rounds to even (down)";
  EXPECT_EQ(testref::floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82) << "tie rounds to even (up)";
  EXPECT_EQ(testref::floatToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81) << "above the tie";
  EXPECT_EQ(testref::floatToBf16(fromBits(0x7f7f7fffu)), 0x7f7f) << "below the tie: the largest finite";
  EXPECT_EQ(testref::floatToBf16(fromBits(0x7f7f8000u)), 0x7f80) << "the tie rounds to even: infinity";
  EXPECT_EQ(testref::floatToBf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(testref::floatToBf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(testref::floatToBf16(std::ldexp(1.0f, -133)), 0x0001) << "the smallest subnormal";
  EXPECT_EQ(testref::floatToBf16(std::ldexp(1.0f, -134)), 0x0000) << "half of it ties to zero";
  EXPECT_EQ(testref::floatToBf16(std::ldexp(3.0f, -134)), 0x0002) << "1.5 steps tie to 2";
  EXPECT_EQ(testref::floatToBf16(std::ldexp(1.0f, -149)), 0x0000) << "the smallest fp32 subnormal";

  EXPECT_EQ(testref::bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(testref::bf16ToFloat(0xc020), -2.5f);
  EXPECT_EQ(testref::bf16ToFloat(0x7f7f), fromBits(0x7f7f0000u));
  EXPECT_EQ(testref::bf16ToFloat(0x0001), std::ldexp(1.0f, -133));
  EXPECT_EQ(testref::bf16ToFloat(0xff80), -std::numeric_limits<float>::infinity());
}

TEST(ReferenceBf16, NanStaysNan) {
  EXPECT_TRUE(std::isnan(testref::bf16ToFloat(0x7fc0)));
  EXPECT_TRUE(std::isnan(testref::bf16ToFloat(0x7f81)));
  EXPECT_TRUE(bf16IsNan(testref::floatToBf16(std::numeric_limits<float>::quiet_NaN())));
  // Dropping the low 16 bits of this one would leave 0x7f80, infinity.
  EXPECT_TRUE(bf16IsNan(testref::floatToBf16(fromBits(0x7f800001u))));
  EXPECT_EQ(testref::floatToBf16(fromBits(0xffc00000u)) & 0x8000, 0x8000);
}

// Every finite code comes back unchanged from fp32, and the fp32 midpoint between two neighbouring
// codes (exact in fp32: one more significand bit) goes to the even one, the next float either side
// of it to the nearer one. The code after the largest finite is infinity: the same rule holds.
template <typename Encode, typename Decode>
void exhaustive(Encode encode, Decode decode, uint16_t largest, double beyond) {
  for (uint32_t h = 0; h <= largest; ++h) {
    for (uint32_t sign : {0u, 0x8000u}) {
      const uint16_t code = static_cast<uint16_t>(h | sign);
      ASSERT_EQ(encode(decode(code)), code) << std::hex << code;
    }
    const uint16_t below = static_cast<uint16_t>(h), above = static_cast<uint16_t>(h + 1);
    const double lo = decode(below), hi = h == largest ? beyond : decode(above);
    const float mid = static_cast<float>((lo + hi) / 2);
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2) << std::hex << h;
    const uint16_t even = h & 1u ? above : below;
    ASSERT_EQ(encode(mid), even) << std::hex << h;
    ASSERT_EQ(encode(-mid), static_cast<uint16_t>(even | 0x8000u)) << std::hex << h;
    ASSERT_EQ(encode(std::nextafter(mid, 0.0f)), below) << std::hex << h;
    ASSERT_EQ(encode(std::nextafter(mid, std::numeric_limits<float>::infinity())), above) << std::hex << h;
  }
}

TEST(ReferenceHalf, EveryCodeAndEveryMidpoint) {
  exhaustive(testref::floatToHalf, testref::halfToFloat, 0x7bff, 65536.0);
}

TEST(ReferenceBf16, EveryCodeAndEveryMidpoint) {
  exhaustive(testref::floatToBf16, testref::bf16ToFloat, 0x7f7f, std::ldexp(1.0, 128));
}

TEST(ReferenceElements, StoreAndLoadEveryDtype) {
  unsigned char buf[3 * 8];
  const symmarDataType_t all[] = {symmarFloat32, symmarFloat16, symmarBfloat16, symmarInt32, symmarFloat64};
  for (symmarDataType_t dt : all) {
    for (size_t i = 0; i < 3; ++i) testref::storeElement(buf, dt, i, -1.5 + static_cast<double>(i));
    EXPECT_EQ(testref::loadElement(buf, dt, 1), dt == symmarInt32 ? 0.0 : -0.5) << dt;  // int32 truncates
    EXPECT_EQ(testref::loadElement(buf, dt, 2), dt == symmarInt32 ? 0.0 : 0.5) << dt;
  }
  testref::storeElement(buf, symmarBfloat16, 1, 1.0);
  uint16_t bits;
  std::memcpy(&bits, buf + 2, 2);
  EXPECT_EQ(bits, 0x3f80) << "element i lies at i * elementSize";
  // fp16 rounds through fp32: 1 + 2^-11 + 2^-30 is a tie once in fp32, and goes to the even code.
  EXPECT_EQ(testref::roundTo(symmarFloat16, 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30)), 1.0);
  EXPECT_EQ(testref::elementSize(symmarFloat64), 8u);
  EXPECT_EQ(testref::elementSize(symmarBfloat16), 2u);
}

TEST(ReferenceReduction, InputsAndTolerances) {
  for (int r = 0; r < 8; ++r) {
    for (size_t i = 0; i < 2000; ++i) {
      const double v = testref::smallIntInput(r, i, static_cast<int>(i % 5));
      ASSERT_TRUE(v >= -8 && v <= 8 && v == std::floor(v)) << v;
      const double f = testref::fractionalInput(r, i);
      ASSERT_TRUE(f >= -1 && f <= 1) << f;
    }
  }
  EXPECT_EQ(testref::smallIntInput(0, 0), -8.0);
  EXPECT_EQ(testref::smallIntInput(1, 0), 4.0) << "131 % 17 = 12";
  EXPECT_EQ(testref::smallIntInput(0, 1, 1), 2.0) << "(7 + 3) % 17 = 10";
  const auto value = [](int r) { return r == 1 ? 4.0 : -1.0 - r; };
  EXPECT_EQ(testref::reduceRanks(symmarFloat32, symmarSum, 3, value), 4.0 - 1.0 - 3.0);
  EXPECT_EQ(testref::reduceRanks(symmarFloat32, symmarMax, 3, value), 4.0);
  EXPECT_EQ(testref::reduceRanks(symmarFloat32, symmarMin, 3, value), -3.0);
  EXPECT_EQ(testref::reduceRanks(symmarBfloat16, symmarSum, 2, [](int) { return 1.0 + std::ldexp(1.0, -9); }), 2.0)
      << "each rank's value is rounded to the dtype first";
  const std::vector<std::vector<unsigned char>> in = {{1, 2}, {3, 4}};
  std::vector<double> sums = testref::reduceBuffers(symmarFloat16, symmarSum, in, 1);
  EXPECT_EQ(sums[0], testref::halfToFloat(0x0201) + testref::halfToFloat(0x0403));
  EXPECT_EQ(testref::sumTolerance(symmarInt32, 100.0, 8), 0.0);
  EXPECT_EQ(testref::sumTolerance(symmarFloat16, 0.25, 8), std::ldexp(1.0, -10));
  EXPECT_EQ(testref::sumTolerance(symmarBfloat16, -4.0, 2), std::ldexp(1.0, -5));
  EXPECT_EQ(testref::sumTolerance(symmarFloat32, 1.0, 4), std::ldexp(1.0, -20));
  EXPECT_FALSE(testref::within(std::nan(""), 0.0, 1.0));
  float got[2] = {1.0f, 2.5f};
  const double want[2] = {1.0, 2.5 + 1e-7};
  EXPECT_NE(testref::checkResult(symmarFloat32, got, want, 2, 1, testref::Match::kExact), "");
  EXPECT_EQ(testref::checkResult(symmarFloat32, got, want, 2, 1, testref::Match::kSumTolerance), "");
  EXPECT_NE(testref::digest(got, 8), testref::digest(want, 8));
}

// The library's converters (core/numeric.h) against the reference: every 16-bit code, and fp32
// patterns spread over the whole range (a stride prime to 2^32). NaN results need only be NaN.
TEST(ReferenceAgainstLibrary, ConversionsAgree) {
  for (uint32_t code = 0; code < 0x10000u; ++code) {
    const uint16_t c = static_cast<uint16_t>(code);
    const float h = testref::halfToFloat(c), b = testref::bf16ToFloat(c);
    const float lib_h = symmar::halfToFloat(c), lib_b = symmar::bf16ToFloat(c);
    ASSERT_EQ(std::isnan(h), std::isnan(lib_h)) << std::hex << code;
    ASSERT_TRUE(std::isnan(h) || (h == lib_h && std::signbit(h) == std::signbit(lib_h))) << std::hex << code;
    ASSERT_EQ(std::isnan(b), std::isnan(lib_b)) << std::hex << code;
    ASSERT_TRUE(std::isnan(b) || (b == lib_b && std::signbit(b) == std::signbit(lib_b))) << std::hex << code;
  }
  uint32_t bits = 0;
  for (int k = 0; k < (1 << 20); ++k, bits += 4099u) {
    const float f = fromBits(bits);
    const uint16_t h = testref::floatToHalf(f), b = testref::floatToBf16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(halfIsNan(symmar::floatToHalf(f)) && bf16IsNan(symmar::floatToBf16(f))) << std::hex << bits;
    } else {
      ASSERT_EQ(symmar::floatToHalf(f), h) << std::hex << bits;
      ASSERT_EQ(symmar::floatToBf16(f), b) << std::hex << bits;
    }
  }
}

}  // namespace
