#include "common/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace testref {
namespace {

// One binary interchange format: 1 sign bit, ebits exponent bits (bias 2^(ebits-1) - 1), mbits
// fraction bits, the all-ones exponent for infinity and NaN. fp16 is (5, 10), bfloat16 (8, 7).
struct Format {
  int ebits, mbits;
  int bias() const { return (1 << (ebits - 1)) - 1; }
  uint32_t expMask() const { return ((1u << ebits) - 1u) << mbits; }
  uint32_t signBit() const { return 1u << (ebits + mbits); }
};
constexpr Format kHalf{5, 10};
constexpr Format kBf16{8, 7};

// 2^k, for k in the normal range of double (built from its exponent field: ldexp is a library
// call, and the reference runs on every element of every rank's input).
double pow2(int k) {
  const uint64_t bits = static_cast<uint64_t>(k + 1023) << 52;
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

// The binade of a normal double a: 2^e <= a < 2^(e+1).
int binadeOf(double a) {
  uint64_t bits;
  std::memcpy(&bits, &a, 8);
  return static_cast<int>((bits >> 52) & 0x7ffu) - 1023;
}

// Encodes f by arithmetic on its value: the magnitude counted in units of the spacing of the
// format's values in its binade (the subnormal spacing below the smallest normal), rounded to the
// nearest count with ties to the even one. Every step is exact in double. The code is then
// ((binade + bias - 1) << mbits) + count: a normal count carries the implicit leading one into the
// exponent field, a subnormal one (binade emin, count < 2^mbits) leaves the field 0, and a count
// rounded up to 2^(mbits + 1) moves into the next binade, past the largest finite to infinity.
uint16_t encode(const Format& fmt, float f) {
  const uint32_t sign = std::signbit(f) ? fmt.signBit() : 0u;
  if (std::isnan(f)) return static_cast<uint16_t>(sign | fmt.expMask() | (1u << (fmt.mbits - 1)));
  const double a = std::fabs(static_cast<double>(f));  // normal as a double, even for fp32 subnormals
  if (std::isinf(a)) return static_cast<uint16_t>(sign | fmt.expMask());
  if (a == 0.0) return static_cast<uint16_t>(sign);
  const int emin = 1 - fmt.bias();
  const int binade = std::max(binadeOf(a), emin);
  if (binade > fmt.bias()) return static_cast<uint16_t>(sign | fmt.expMask());  // beyond the largest binade
  const double units = a * pow2(fmt.mbits - binade);  // below 2^(mbits + 1)
  uint32_t count = static_cast<uint32_t>(units);       // truncates
  const double rest = units - count;
  if (rest > 0.5 || (rest == 0.5 && (count & 1u))) ++count;
  const uint32_t code = (static_cast<uint32_t>(binade + fmt.bias() - 1) << fmt.mbits) + count;
  return static_cast<uint16_t>(sign | std::min(code, fmt.expMask()));
}

float decode(const Format& fmt, uint16_t bits) {
  const bool negative = (bits & fmt.signBit()) != 0;
  const uint32_t exp_field = (bits & fmt.expMask()) >> fmt.mbits;
  const uint32_t fraction = bits & ((1u << fmt.mbits) - 1u);
  double v;
  if (exp_field == (fmt.expMask() >> fmt.mbits)) {
    v = fraction ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (exp_field == 0) {  // subnormal: fraction units of 2^(emin - mbits)
    v = fraction * pow2(1 - fmt.bias() - fmt.mbits);
  } else {                      // normal: 1.fraction x 2^(exp_field - bias)
    v = (fraction + (1u << fmt.mbits)) * pow2(static_cast<int>(exp_field) - fmt.bias() - fmt.mbits);
  }
  return static_cast<float>(negative ? -v : v);  // exact: every value of both formats is an fp32
}

}  // namespace

uint16_t floatToHalf(float f) { return encode(kHalf, f); }
float halfToFloat(uint16_t h) { return decode(kHalf, h); }
uint16_t floatToBf16(float f) { return encode(kBf16, f); }
float bf16ToFloat(uint16_t b) { return decode(kBf16, b); }

size_t elementSize(symmarDataType_t dtype) {
  switch (dtype) {
    case symmarFloat16:
    case symmarBfloat16: return 2;
    case symmarFloat64: return 8;
    default: return 4;
  }
}

void storeElement(void* buf, symmarDataType_t dtype, size_t i, double v) {
  unsigned char* p = static_cast<unsigned char*>(buf) + i * elementSize(dtype);
  switch (dtype) {
    case symmarFloat32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case symmarFloat64: std::memcpy(p, &v, 8); break;
    case symmarInt32: {
      const int32_t x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    default: {
      const float f = static_cast<float>(v);
      const uint16_t b = dtype == symmarFloat16 ? floatToHalf(f) : floatToBf16(f);
      std::memcpy(p, &b, 2);
      break;
    }
  }
}

double loadElement(const void* buf, symmarDataType_t dtype, size_t i) {
  const unsigned char* p = static_cast<const unsigned char*>(buf) + i * elementSize(dtype);
  switch (dtype) {
    case symmarFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case symmarFloat64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case symmarInt32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    default: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return dtype == symmarFloat16 ? halfToFloat(b) : bf16ToFloat(b);
    }
  }
}

double roundTo(symmarDataType_t dtype, double v) {
  // What storeElement then loadElement give, without the buffer: the reference calls this for every
  // rank's value of every element.
  switch (dtype) {
    case symmarFloat32: return static_cast<float>(v);
    case symmarFloat64: return v;
    case symmarInt32: return static_cast<int32_t>(v);
    case symmarFloat16: return decode(kHalf, encode(kHalf, static_cast<float>(v)));
    default: return decode(kBf16, encode(kBf16, static_cast<float>(v)));
  }
}

double smallIntInput(int rank, size_t i, int call) {
  const size_t k = static_cast<size_t>(rank) * 131 + i * 7 + (i >> 9) + static_cast<size_t>(call) * 3;
  return static_cast<double>(static_cast<int>(k % 17) - 8);
}

double fractionalInput(int rank, size_t i) {
  uint64_t h = (static_cast<uint64_t>(rank) << 40) ^ (i * 0x9e3779b97f4a7c15ull);
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return static_cast<double>(h % 2000001) / 1000000.0 - 1.0;
}

void fillSmallInts(symmarDataType_t dtype, void* dst, size_t count, int rank, int call) {
  for (size_t i = 0; i < count; ++i) storeElement(dst, dtype, i, smallIntInput(rank, i, call));
}

double combine(symmarRedOp_t op, double acc, double x) {
  switch (op) {
    case symmarSum: return acc + x;
    case symmarMax: return std::max(acc, x);
    default: return std::min(acc, x);
  }
}

std::vector<double> reduceBuffers(symmarDataType_t dtype, symmarRedOp_t op, const std::vector<const void*>& inputs,
                                  size_t count) {
  std::vector<double> out(count);
  if (inputs.empty()) return out;
  for (size_t i = 0; i < count; ++i) {
    double acc = loadElement(inputs[0], dtype, i);
    for (size_t r = 1; r < inputs.size(); ++r) acc = combine(op, acc, loadElement(inputs[r], dtype, i));
    out[i] = acc;
  }
  return out;
}

std::vector<double> reduceBuffers(symmarDataType_t dtype, symmarRedOp_t op,
                                  const std::vector<std::vector<unsigned char>>& inputs, size_t count) {
  std::vector<const void*> p;
  for (const std::vector<unsigned char>& in : inputs) p.push_back(in.data());
  return reduceBuffers(dtype, op, p, count);
}

double sumTolerance(symmarDataType_t dtype, double ref, int world) {
  const double a = std::fabs(ref);
  switch (dtype) {
    case symmarFloat32: return std::ldexp(1.0, -23) * world * (a + 1.0);
    case symmarFloat64: return std::ldexp(1.0, -52) * world * (a + 1.0);
    case symmarFloat16: return std::ldexp(1.0, -10) * std::max(1.0, a);
    case symmarBfloat16: return std::ldexp(1.0, -7) * std::max(1.0, a);
    default: return 0.0;
  }
}

std::string checkResult(symmarDataType_t dtype, const void* got, const double* want, size_t count, int world,
                        Match match) {
  for (size_t i = 0; i < count; ++i) {
    const double g = loadElement(got, dtype, i);
    const bool ok = match == Match::kExact ? g == want[i] : within(g, want[i], sumTolerance(dtype, want[i], world));
    if (!ok) {
      char text[160];
      snprintf(text, sizeof(text), "element %zu of %zu: got %.9g, expected %.9g", i, count, g, want[i]);
      return text;
    }
  }
  return "";
}

uint64_t digest(const void* data, size_t bytes, uint64_t h) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace testref
