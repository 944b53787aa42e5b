// The fused norm's arithmetic on the CPU: the E4M3 encoder against an independent quantizer (the
// nearest E4M3 value by search, ties to the even code, saturation at 448), and one row worked by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/numeric.h"
#include "e4m3_reference.h"
#include "host/add_rms_norm.h"

using namespace symmar;

TEST(E4m3, EveryCodeEveryMidpointAndBeyond) {
  for (int code = 0; code < 0x7e; ++code) {
    const double lo = e4m3_reference::value(code), hi = e4m3_reference::value(code + 1);
    for (double f : {0.0, 0.25, 0.5, 0.75}) {
      for (double sign : {1.0, -1.0}) {
        const float v = static_cast<float>(sign * (lo + f * (hi - lo)));
        EXPECT_EQ(floatToE4m3(v), e4m3_reference::quantize(v)) << v;
      }
    }
  }
  for (float v : {448.0f, 449.0f, 464.0f, 1e6f, -500.0f, 1e-12f, -0.0f}) {
    EXPECT_EQ(floatToE4m3(v), e4m3_reference::quantize(v)) << v;
  }
  EXPECT_EQ(floatToE4m3(NAN), 0x7f);
  EXPECT_EQ(floatToE4m3(INFINITY), 0x7e) << "no infinity in E4M3: saturate";
}

TEST(AddRmsNormRow, WorkedByHand) {
  // One row of 4 floats: sum (1, 2, 3, 4) + residual (1, 0, -1, 2) = (2, 2, 2, 6);
  // mean of squares (4 + 4 + 4 + 36) / 4 = 12, eps 0: norm = x / sqrt(12) * gamma (1, 1, 2, 0.5).
  const float sum[4] = {1, 2, 3, 4};
  const float residual[4] = {1, 0, -1, 2};
  const float gamma[4] = {1, 1, 2, 0.5f};
  float res_out[4], norm[4];
  uint8_t q[4];
  AddRmsNormCall c{nullptr, residual, res_out, norm, gamma, q, 0.25f, 0.0f, 1, 4, symmarFloat32};
  const void* rows[1] = {sum};
  finishAddRmsNormRow(c, 0, rows, 1);
  const float s = std::sqrt(12.0f);
  EXPECT_EQ(res_out[0], 2.0f);
  EXPECT_EQ(res_out[3], 6.0f);
  EXPECT_NEAR(norm[0], 2.0f / s, 1e-6f);
  EXPECT_NEAR(norm[2], 4.0f / s, 1e-6f);
  EXPECT_NEAR(norm[3], 3.0f / s, 1e-6f);
  EXPECT_EQ(q[2], e4m3_reference::quantize(4.0 / std::sqrt(12.0) / 0.25)) << "4.62 -> 4.5 (code 0x49)";
}

TEST(AddRmsNormRow, ASecondDestinationGetsTheSameRow) {
  // The row above, finished with a copy of every output (as the two-shot publishes its rows).
  const float sum[4] = {1, 2, 3, 4};
  const float residual[4] = {1, 0, -1, 2};
  const float gamma[4] = {1, 1, 2, 0.5f};
  float res_out[4], norm[4], res_copy[4] = {}, norm_copy[4] = {};
  uint8_t q[4], q_copy[4] = {};
  AddRmsNormCall c{nullptr, residual, res_out, norm, gamma, q, 0.25f, 0.0f, 1, 4, symmarFloat32};
  const void* rows[1] = {sum};
  const AddRmsNormRowCopy copy{res_copy, norm_copy, q_copy};
  finishAddRmsNormRow(c, 0, rows, 1, &copy);
  const float s = std::sqrt(12.0f);
  EXPECT_EQ(res_copy[0], 2.0f);
  EXPECT_EQ(res_copy[3], 6.0f);
  EXPECT_NEAR(norm_copy[2], 4.0f / s, 1e-6f);
  EXPECT_EQ(q_copy[2], e4m3_reference::quantize(4.0 / std::sqrt(12.0) / 0.25));
  EXPECT_EQ(std::memcmp(res_copy, res_out, sizeof res_out), 0);
  EXPECT_EQ(std::memcmp(norm_copy, norm, sizeof norm), 0);
  EXPECT_EQ(std::memcmp(q_copy, q, sizeof q), 0);
}
