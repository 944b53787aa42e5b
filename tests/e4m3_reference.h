// An independent FP8 E4M3 reference for the tests of the fused norm's FP8 output: the value of
// every code, and quantization by search (the nearest value, ties to the even code, saturation at
// 448) rather than by bit arithmetic like the library's encoder.
#pragma once
#include <cmath>

namespace e4m3_reference {

/// The value of an E4M3 code (bias 7, 3 mantissa bits; 0x7f and 0xff are NaN).
inline double value(int code) {
  const int e = (code >> 3) & 15, m = code & 7;
  const double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return (code & 0x80) ? -v : v;
}

/// The code of v: the nearest E4M3 value by search, ties to the even code, saturating at 448.
inline int quantize(double v) {
  if (std::isnan(v)) return 0x7f;
  const int sign = std::signbit(v) ? 0x80 : 0;
  const double a = std::fabs(v) >= 448.0 ? 448.0 : std::fabs(v);
  int best = 0;
  for (int c = 1; c <= 0x7e; ++c) {
    const double d = std::fabs(value(c) - a), b = std::fabs(value(best) - a);
    if (d < b || (d == b && (c & 1) == 0)) best = c;
  }
  return sign | best;
}

}  // namespace e4m3_reference
