// The SIMD host reduction (host/simd_reduce.h, behind reduceRanks) at every SIMD target this CPU
// supports, compared bit for bit with a scalar reference written here: IEEE arithmetic in the
// accumulation type, fp16/bf16 rounding from tests/common/reference.h, and the library's NaN rules
// (host_reduce.h) spelled out. Ranks on different CPUs must produce the same bits, so every target
// must match the reference exactly, NaN payloads and signed zeros included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/reference.h"
#include "host/host_reduce.h"
#include "host/simd_reduce.h"
#include "unit/simd_targets.h"

namespace {

template <typename T, typename F>
T bitsAs(F f) {
  static_assert(sizeof(T) == sizeof(F), "same size");
  T t;
  std::memcpy(&t, &f, sizeof(t));
  return t;
}

size_t elemSize(symmarDataType_t dt) { return testref::elementSize(dt); }

// ---- The reference: one element, accumulation in float (f32/f16/bf16), double or int32. ----

// Decodes 16-bit storage exactly; NaNs keep their payload bits (shifted into the fp32 fraction).
float decode16(symmarDataType_t dt, uint16_t h) {
  if (dt == symmarBfloat16) return bitsAs<float>(static_cast<uint32_t>(h) << 16);
  if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu))
    return bitsAs<float>((static_cast<uint32_t>(h & 0x8000u) << 16) | 0x7f800000u | ((h & 0x3ffu) << 13));
  return testref::halfToFloat(h);
}

// Rounds to 16 bits; a NaN becomes sign | 0x7e00 in fp16, and keeps its top payload bits with the
// quiet bit set in bf16.
uint16_t encode16(symmarDataType_t dt, float f) {
  if (std::isnan(f)) {
    const uint32_t b = bitsAs<uint32_t>(f);
    if (dt == symmarBfloat16) return static_cast<uint16_t>((b >> 16) | 0x40u);
    return static_cast<uint16_t>(((b >> 16) & 0x8000u) | 0x7e00u);
  }
  return dt == symmarBfloat16 ? testref::floatToBf16(f) : testref::floatToHalf(f);
}

template <typename T>
T quieted(T x) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const U quiet = sizeof(T) == 4 ? U(0x00400000u) : U(0x0008000000000000ull);
  return bitsAs<T>(static_cast<U>(bitsAs<U>(x) | quiet));
}

template <typename T>
T combine(symmarRedOp_t op, T a, T b) {
  if (op == symmarMax) return a > b ? a : b;
  if (op == symmarMin) return a < b ? a : b;
  if constexpr (std::is_same_v<T, int32_t>) {
    return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  } else {
    if (std::isnan(b)) return quieted(b);  // acc + x: a NaN x wins over a NaN accumulator
    if (std::isnan(a)) return quieted(a);
    const T r = a + b;
    if (!std::isnan(r)) return r;
    if constexpr (sizeof(T) == 4) {
      return bitsAs<T>(0xffc00000u);  // inf - inf: the negative default NaN
    } else {
      return bitsAs<T>(0xfff8000000000000ull);
    }
  }
}

template <typename T>
void referenceTyped(void* dst, const std::vector<const void*>& srcs, size_t n, symmarRedOp_t op) {
  for (size_t i = 0; i < n; ++i) {
    T acc;
    std::memcpy(&acc, static_cast<const char*>(srcs[0]) + i * sizeof(T), sizeof(T));
    for (size_t r = 1; r < srcs.size(); ++r) {
      T x;
      std::memcpy(&x, static_cast<const char*>(srcs[r]) + i * sizeof(T), sizeof(T));
      acc = combine(op, acc, x);
    }
    std::memcpy(static_cast<char*>(dst) + i * sizeof(T), &acc, sizeof(T));
  }
}

void reference(void* dst, const std::vector<const void*>& srcs, size_t n, symmarDataType_t dt, symmarRedOp_t op) {
  switch (dt) {
    case symmarFloat32: return referenceTyped<float>(dst, srcs, n, op);
    case symmarFloat64: return referenceTyped<double>(dst, srcs, n, op);
    case symmarInt32: return referenceTyped<int32_t>(dst, srcs, n, op);
    default:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, static_cast<const char*>(srcs[0]) + 2 * i, 2);
        float acc = decode16(dt, h);
        for (size_t r = 1; r < srcs.size(); ++r) {
          std::memcpy(&h, static_cast<const char*>(srcs[r]) + 2 * i, 2);
          acc = combine(op, acc, decode16(dt, h));
        }
        const uint16_t out = encode16(dt, acc);
        std::memcpy(static_cast<char*>(dst) + 2 * i, &out, 2);
      }
  }
}

// ---- Inputs: random bits, values of nearby magnitude (sums that round and tie), special values. ----

uint64_t specialBits(symmarDataType_t dt, size_t k) {
  static const uint32_t f32[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
                                 0x7f800001u, 0xffa5a5a5u, 0x7fffffffu, 0x00000001u, 0x807fffffu, 0x00800000u,
                                 0x7f7fffffu, 0xff7fffffu, 0x3f800000u, 0x3f808000u, 0x3f818000u, 0x477ff000u,
                                 0x477fefffu, 0x38800000u, 0x33000000u, 0x33400000u, 0x387fc000u, 0xb3000001u};
  static const uint64_t f64[] = {0x0ull, 0x8000000000000000ull, 0x7ff0000000000000ull, 0xfff0000000000000ull,
                                 0x7ff8000000000000ull, 0x7ff0000000000001ull, 0xfff4000000000123ull,
                                 0x0000000000000001ull, 0x7fefffffffffffffull, 0xffefffffffffffffull,
                                 0x3ff0000000000000ull, 0x3ca0000000000000ull, 0x0010000000000000ull};
  static const uint32_t i32[] = {0u, 1u, 0xffffffffu, 0x7fffffffu, 0x80000000u, 0x80000001u, 0x40000000u};
  static const uint16_t h16[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfd55, 0x0001, 0x8001, 0x03ff,
                                 0x0400, 0x7bff, 0xfbff, 0x3c00, 0x3c01, 0x1000, 0x0200, 0x7800};
  static const uint16_t b16[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffa5, 0x0001, 0x807f, 0x0080,
                                 0x7f7f, 0xff7f, 0x3f80, 0x3f81, 0x3b80, 0x3b00, 0xbb80, 0x4000};
  switch (dt) {
    case symmarFloat32: return f32[k % (sizeof(f32) / sizeof(f32[0]))];
    case symmarFloat64: return f64[k % (sizeof(f64) / sizeof(f64[0]))];
    case symmarInt32: return i32[k % (sizeof(i32) / sizeof(i32[0]))];
    case symmarFloat16: return h16[k % (sizeof(h16) / sizeof(h16[0]))];
    default: return b16[k % (sizeof(b16) / sizeof(b16[0]))];
  }
}

void fillInput(symmarDataType_t dt, unsigned char* p, size_t n, std::mt19937_64& rng) {
  const size_t es = elemSize(dt);
  for (size_t i = 0; i < n; ++i) {
    uint64_t bits = rng();
    const unsigned kind = static_cast<unsigned>(bits % 8);
    bits >>= 3;
    if (kind < 3) {
      bits = specialBits(dt, static_cast<size_t>(bits));
    } else if (kind < 6 && dt != symmarInt32) {
      // Nearby magnitudes: exponent in a narrow band around 1.0 (sign and fraction random), so sums
      // cancel, round and hit ties.
      switch (dt) {
        case symmarFloat32: bits = (bits & 0x807fffffu) | ((0x7eu + (bits >> 40) % 4) << 23); break;
        case symmarFloat64: bits = (bits & 0x800fffffffffffffull) | ((0x3feull + (bits >> 56) % 4) << 52); break;
        case symmarFloat16: bits = (bits & 0x83ffu) | ((0xeu + (bits >> 20) % 4) << 10); break;
        default: bits = (bits & 0x807fu) | ((0x7eu + (bits >> 20) % 4) << 7); break;
      }
    }
    std::memcpy(p + i * es, &bits, es);  // little-endian: the low bytes
  }
}

std::string hexBytes(const unsigned char* p, size_t es) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t b = es; b-- > 0;) {
    s += digits[p[b] >> 4];
    s += digits[p[b] & 15];
  }
  return s;
}

const char* dtypeName(symmarDataType_t dt) {
  switch (dt) {
    case symmarFloat32: return "f32";
    case symmarFloat64: return "f64";
    case symmarInt32: return "i32";
    case symmarFloat16: return "f16";
    default: return "bf16";
  }
}

// One case: nsrc sources of n elements at element offsets that vary, dst separate or aliasing a
// source (alias >= 0), with or without dst2, through reduceRanks or (bursts) its form for a dst2 a
// peer read the call before; canaries around the outputs catch stray writes.
void runCase(symmarDataType_t dt, symmarRedOp_t op, int nsrc, size_t n, int alias, bool withDst2,
             std::mt19937_64& rng, int* failures, bool bursts = false) {
  const size_t es = elemSize(dt);
  const size_t pad = 4;
  std::vector<std::vector<unsigned char>> bufs(nsrc);
  std::vector<const void*> srcs(nsrc);
  for (int r = 0; r < nsrc; ++r) {
    const size_t off = (static_cast<size_t>(r) + n) % 3 + 1;  // elements: no two sources share alignment
    bufs[r].assign((n + off + pad) * es, 0xcd);
    fillInput(dt, bufs[r].data() + off * es, n, rng);
    srcs[r] = bufs[r].data() + off * es;
  }
  std::vector<unsigned char> expect(n * es + 1);
  reference(expect.data(), srcs, n, dt, op);

  std::vector<unsigned char> out((n + 2 * pad + 1) * es, 0xab), out2((n + 2 * pad + 3) * es, 0x5e);
  // One and three elements past the pad: aligned to the element, as symmarAllReduce requires of
  // every buffer (checkBuffers), but not to a vector.
  unsigned char* dst = out.data() + (pad + 1) * es;
  if (alias >= 0) dst = static_cast<unsigned char*>(const_cast<void*>(srcs[alias]));
  unsigned char* dst2 = withDst2 ? out2.data() + (pad + 3) * es : nullptr;
  const std::vector<unsigned char> aliasBefore = alias >= 0 ? bufs[alias] : std::vector<unsigned char>();

  (bursts ? symmar::reduceRanksPublishingToReadLines : symmar::reduceRanks)(dst, dst2, srcs.data(), nsrc, n, dt, op);

  auto report = [&](const char* what, size_t i, const unsigned char* got) {
    if (++*failures > 20) return;
    ADD_FAILURE() << what << ": " << dtypeName(dt) << " op " << op << " nsrc " << nsrc << " n " << n << " alias "
                  << alias << " dst2 " << withDst2 << (bursts ? " in bursts" : "") << " element " << i << ": got " << hexBytes(got, es)
                  << " expected " << hexBytes(expect.data() + i * es, es);
  };
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(dst + i * es, expect.data() + i * es, es) != 0) report("dst", i, dst + i * es);
    if (dst2 && std::memcmp(dst2 + i * es, expect.data() + i * es, es) != 0) report("dst2", i, dst2 + i * es);
  }
  // Nothing written outside [dst, dst + n) and [dst2, dst2 + n).
  if (alias < 0) {
    for (size_t b = 0; b < (pad + 1) * es; ++b)
      if (out[b] != 0xab) report("before dst", b, &out[b]);
    for (size_t b = (pad + 1 + n) * es; b < out.size(); ++b)
      if (out[b] != 0xab) report("after dst", b, &out[b]);
  } else {
    const size_t off = static_cast<size_t>(dst - bufs[alias].data());
    for (size_t b = 0; b < bufs[alias].size(); ++b)
      if ((b < off || b >= off + n * es) && bufs[alias][b] != aliasBefore[b]) report("around aliased dst", b,
                                                                                       &bufs[alias][b]);
  }
  if (dst2) {
    for (size_t b = 0; b < out2.size(); ++b)
      if ((b < (pad + 3) * es || b >= (pad + 3 + n) * es) && out2[b] != 0x5e) report("around dst2", b, &out2[b]);
  }
}

const symmarDataType_t kDtypes[] = {symmarFloat32, symmarFloat64, symmarInt32, symmarFloat16, symmarBfloat16};
const symmarRedOp_t kOps[] = {symmarSum, symmarMax, symmarMin};

TEST(SimdReduce, MatchesReferenceBitwiseAtEveryTarget) {
  symmar_test::atEveryTarget([] {
    std::mt19937_64 rng(12345);
    int failures = 0;
    for (symmarDataType_t dt : kDtypes) {
      for (symmarRedOp_t op : kOps) {
        for (int nsrc = 1; nsrc <= 8; ++nsrc) {
          // Lengths: every length up to four AVX-512 vectors of f32 plus a tail, then larger odd ones.
          for (size_t n = 0; n <= 69; ++n) runCase(dt, op, nsrc, n, -1, n % 2 == 1, rng, &failures);
          for (size_t n : {127u, 1000u, 1031u}) runCase(dt, op, nsrc, n, -1, true, rng, &failures);
          for (size_t n : {1u, 17u, 71u}) {
            runCase(dt, op, nsrc, n, 0, false, rng, &failures);
            runCase(dt, op, nsrc, n, nsrc - 1, true, rng, &failures);
          }
          // 16-bit results published into lines a peer read go through a scratch block of 1024
          // elements while the data fits in half the L2: whole blocks, a tail, dst aliasing a
          // source; and a length past the L2 rule for the direct path. The same through reduceRanks.
          if (elemSize(dt) == 2) {
            for (bool bursts : {true, false}) {
              for (size_t n : {2053u, 3072u}) {
                runCase(dt, op, nsrc, n, -1, true, rng, &failures, bursts);
                runCase(dt, op, nsrc, n, nsrc - 1, true, rng, &failures, bursts);
              }
              if (nsrc <= 2) runCase(dt, op, nsrc, 300001, -1, true, rng, &failures, bursts);
            }
          }
        }
      }
    }
    EXPECT_EQ(failures, 0);
  });
}

// Every bf16 code summed with addends that put the float32 sum's lower half on each side of the
// rounding point (ties of both parities, the halfway bit alone, a carry into the exponent, a
// subnormal, zeros, infinities): 65536 elements, two sources, with and without a published copy,
// so the vectors of pairs (two elements per 32-bit lane, rounded in 16-bit lanes) take every code.
TEST(SimdReduce, Bf16SumRoundsEveryCodeAsTheReferenceAtEveryTarget) {
  const uint16_t addends[] = {0x0000, 0x8000, 0x3f80, 0xbf80, 0x3b80, 0x3b00, 0x3c00, 0x3780, 0x0001,
                              0x8001, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x4b00, 0x3f81, 0x1234, 0xc321};
  symmar_test::atEveryTarget([&] {
    std::vector<uint16_t> codes(65536), other(65536), out(65536), out2(65536);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint16_t>(i);
    int failures = 0;
    for (uint16_t b : addends) {
      for (bool rotate : {false, true}) {  // the addend as the first source, then the second
        other.assign(other.size(), b);
        const void* srcs[2] = {rotate ? other.data() : codes.data(), rotate ? codes.data() : other.data()};
        for (bool publish : {false, true}) {
          symmar::reduceRanks(out.data(), publish ? out2.data() : nullptr, srcs, 2, codes.size(), symmarBfloat16,
                              symmarSum);
          for (size_t i = 0; i < codes.size() && failures < 10; ++i) {
            const float x = rotate ? decode16(symmarBfloat16, b) : decode16(symmarBfloat16, codes[i]);
            const float y = rotate ? decode16(symmarBfloat16, codes[i]) : decode16(symmarBfloat16, b);
            float sum = x + y;
            // The library's NaN rule for a + x: x's NaN quieted, else a's, else the negative default.
            if (std::isnan(y)) sum = quieted(y);
            else if (std::isnan(x)) sum = quieted(x);
            else if (std::isnan(sum)) sum = bitsAs<float>(0xffc00000u);
            const uint16_t want = encode16(symmarBfloat16, sum);
            if (out[i] != want || (publish && out2[i] != want)) {
              ADD_FAILURE() << "0x" << std::hex << codes[i] << " + 0x" << b << " (rotated " << rotate << "): got 0x"
                            << out[i] << ", want 0x" << want;
              ++failures;
            }
          }
        }
      }
    }
  });
}

// Named cases, each with its expected bits written out: the rules the reference above encodes.
template <typename T>
T reduce2(symmarDataType_t dt, symmarRedOp_t op, T a, T b) {
  const T in[2] = {a, b};
  const void* srcs[2] = {&in[0], &in[1]};
  T out;
  symmar::reduceRanks(&out, nullptr, srcs, 2, 1, dt, op);
  return out;
}

TEST(SimdReduce, SpecialValuesAtEveryTarget) {
  symmar_test::atEveryTarget([] {
    const auto f32 = [](symmarRedOp_t op, uint32_t a, uint32_t b) {
      return bitsAs<uint32_t>(reduce2(symmarFloat32, op, bitsAs<float>(a), bitsAs<float>(b)));
    };
    const auto h = [](symmarDataType_t dt, symmarRedOp_t op, uint16_t a, uint16_t b) {
      return reduce2<uint16_t>(dt, op, a, b);
    };
    EXPECT_EQ(f32(symmarSum, 0x7f800001u, 0x3f800000u), 0x7fc00001u) << "signalling NaN first: quieted, payload kept";
    EXPECT_EQ(f32(symmarSum, 0x3f800000u, 0xff800002u), 0xffc00002u) << "NaN second";
    EXPECT_EQ(f32(symmarSum, 0x7fc00003u, 0xffc00004u), 0xffc00004u) << "two NaNs: the later rank's";
    EXPECT_EQ(f32(symmarSum, 0x7f800000u, 0xff800000u), 0xffc00000u) << "inf - inf: negative default NaN";
    EXPECT_EQ(f32(symmarSum, 0x80000000u, 0x80000000u), 0x80000000u) << "-0 + -0";
    EXPECT_EQ(f32(symmarSum, 0x00000000u, 0x80000000u), 0x00000000u) << "+0 + -0";
    EXPECT_EQ(f32(symmarSum, 0x00000001u, 0x00000001u), 0x00000002u) << "denormals are not flushed";
    EXPECT_EQ(f32(symmarMax, 0x7fc00000u, 0x3f800000u), 0x3f800000u) << "max(NaN, 1) = 1";
    EXPECT_EQ(f32(symmarMax, 0x3f800000u, 0x7fc00000u), 0x7fc00000u) << "max(1, NaN) = NaN";
    EXPECT_EQ(f32(symmarMax, 0x80000000u, 0x00000000u), 0x00000000u) << "max(-0, +0) = +0";
    EXPECT_EQ(f32(symmarMax, 0x00000000u, 0x80000000u), 0x80000000u) << "max(+0, -0) = -0";
    EXPECT_EQ(f32(symmarMin, 0x7f800001u, 0xbf800000u), 0xbf800000u) << "min(sNaN, -1) = -1";
    EXPECT_EQ(f32(symmarMin, 0xbf800000u, 0x7f800001u), 0x7f800001u) << "min(-1, sNaN) = sNaN, not quieted";
    EXPECT_EQ(f32(symmarMin, 0x00000000u, 0x80000000u), 0x80000000u) << "min(+0, -0) = -0";
    EXPECT_EQ(reduce2<int32_t>(symmarInt32, symmarSum, std::numeric_limits<int32_t>::max(), 1),
              std::numeric_limits<int32_t>::min()) << "int32 sums wrap";
    EXPECT_EQ(h(symmarBfloat16, symmarSum, 0x3f80, 0x3b80), 0x3f80) << "1 + 2^-8: tie to even (down)";
    EXPECT_EQ(h(symmarBfloat16, symmarSum, 0x3f81, 0x3b80), 0x3f82) << "tie to even (up)";
    EXPECT_EQ(h(symmarBfloat16, symmarSum, 0x7f7f, 0x7f7f), 0x7f80) << "overflow to inf";
    EXPECT_EQ(h(symmarBfloat16, symmarSum, 0x7f81, 0x3f80), 0x7fc1) << "sNaN: quiet bit, payload kept";
    EXPECT_EQ(h(symmarBfloat16, symmarSum, 0x7f80, 0xff80), 0xffc0) << "inf - inf";
    EXPECT_EQ(h(symmarBfloat16, symmarSum, 0x8001, 0x8001), 0x8002) << "bf16 denormals";
    EXPECT_EQ(h(symmarFloat16, symmarSum, 0x3c00, 0x1000), 0x3c00) << "1 + 2^-11: tie to even (down)";
    EXPECT_EQ(h(symmarFloat16, symmarSum, 0x3c01, 0x1000), 0x3c02) << "tie to even (up)";
    EXPECT_EQ(h(symmarFloat16, symmarSum, 0x7bff, 0x4c00), 0x7c00) << "65504 + 16 rounds to inf";
    EXPECT_EQ(h(symmarFloat16, symmarSum, 0x7bff, 0x4bff), 0x7bff) << "65504 + 15.99 stays finite";
    EXPECT_EQ(h(symmarFloat16, symmarSum, 0x0001, 0x0001), 0x0002) << "subnormals";
    EXPECT_EQ(h(symmarFloat16, symmarSum, 0x03ff, 0x0001), 0x0400) << "subnormal to normal";
    EXPECT_EQ(h(symmarFloat16, symmarSum, 0xfd55, 0x3c00), 0xfe00) << "NaN: sign kept, payload not";
    EXPECT_EQ(h(symmarFloat16, symmarSum, 0x7c00, 0xfc00), 0xfe00) << "inf - inf";
    EXPECT_EQ(h(symmarFloat16, symmarMax, 0x8000, 0x0000), 0x0000) << "max(-0, +0) = +0";
    EXPECT_EQ(h(symmarFloat16, symmarMin, 0x7e00, 0x3c00), 0x3c00) << "min(NaN, 1) = 1";
  });
}

// copyBytes: byte for byte what memcpy gives, nothing written outside [dst, dst + bytes), at every
// size around the vector path's edges and every destination placement modulo 4 KiB that selects
// it (1..63), plus 0 and 64 (memcpy), at every target.
TEST(SimdReduce, CopyBytesCopiesExactlyAtEveryTarget) {
  symmar_test::atEveryTarget([] {
    constexpr size_t kMax = 9000;
    std::vector<unsigned char> src(kMax), dst(kMax + 8192 + 64);
    for (size_t i = 0; i < kMax; ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
    // The source sits at a page boundary inside dst's storage range, so the destination's distance
    // from it modulo 4 KiB is the placement chosen below.
    std::vector<unsigned char> storage(kMax + 4096 * 2);
    unsigned char* page = reinterpret_cast<unsigned char*>(
        (reinterpret_cast<uintptr_t>(storage.data()) + 4095) / 4096 * 4096);
    std::memcpy(page, src.data(), kMax);
    int failures = 0;
    for (size_t bytes : {0u, 1u, 31u, 2047u, 2048u, 2049u, 4096u, 4099u, 8191u, 8192u, 9000u}) {
      for (size_t distance = 0; distance <= 64; ++distance) {
        unsigned char* base = reinterpret_cast<unsigned char*>(
            (reinterpret_cast<uintptr_t>(dst.data()) + 4095) / 4096 * 4096);
        unsigned char* out = base + distance;
        std::memset(dst.data(), 0xee, dst.size());
        symmar::copyBytes(out, page, bytes);
        const bool same = std::memcmp(out, page, bytes) == 0;
        bool untouched = true;
        for (unsigned char* p = dst.data(); p < out; ++p) untouched = untouched && *p == 0xee;
        for (unsigned char* p = out + bytes; p < dst.data() + dst.size(); ++p) untouched = untouched && *p == 0xee;
        if (!same || !untouched) {
          ADD_FAILURE() << bytes << " bytes to distance " << distance << (same ? ": wrote outside" : ": wrong bytes");
          if (++failures > 10) return;
        }
      }
    }
  });
}

}  // namespace
