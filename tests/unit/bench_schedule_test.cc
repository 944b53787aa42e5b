// The benchmarks' call order (benchmarks/perf_schedule.h): every variant gets its warmup and timed
// calls, and with runs longer than one call each timed call follows a call of its own variant.
#include <gtest/gtest.h>

#include <vector>

#include "perf_schedule.h"

using perf::interleavedSchedule;
using perf::ScheduledCall;

namespace {

struct Counts {
  int untimed = 0, timed = 0;
};

std::vector<Counts> countPerVariant(const std::vector<ScheduledCall>& calls, size_t variants) {
  std::vector<Counts> c(variants);
  for (const ScheduledCall& s : calls) {
    EXPECT_LT(s.variant, variants);
    if (s.variant < variants) (s.timed ? c[s.variant].timed : c[s.variant].untimed)++;
  }
  return c;
}

}  // namespace

TEST(BenchSchedule, EveryVariantGetsItsTimedCallsEachAfterACallOfItsOwn) {
  // 23 calls a variant in runs of 10: runs of 10, 10 and 3, each after one switch call.
  const std::vector<ScheduledCall> calls = interleavedSchedule(3, 3, 20, 10);
  ASSERT_EQ(calls.size(), 3u * (23 + 3));
  for (const Counts& c : countPerVariant(calls, 3)) {
    EXPECT_EQ(c.timed, 20);
    EXPECT_EQ(c.untimed, 3 + 3);  // the warmup, and a switch call for each of 3 runs
  }
  EXPECT_FALSE(calls[0].timed);
  for (size_t i = 1; i < calls.size(); ++i) {
    if (calls[i].timed) {
      EXPECT_EQ(calls[i].variant, calls[i - 1].variant) << "call " << i;
    }
  }
  // The variants take turns run by run: 0 (11 calls), 1 (11), 2 (11), then 0 again.
  EXPECT_EQ(calls[10].variant, 0u);
  EXPECT_EQ(calls[11].variant, 1u);
  EXPECT_EQ(calls[22].variant, 2u);
  EXPECT_EQ(calls[33].variant, 0u);
}

TEST(BenchSchedule, RunsOfOneAlternateCallByCallWithoutSwitchCalls) {
  const std::vector<ScheduledCall> calls = interleavedSchedule(2, 1, 3, 1);
  const std::vector<size_t> variants = {0, 1, 0, 1, 0, 1, 0, 1};
  const std::vector<bool> timed = {false, false, true, true, true, true, true, true};
  ASSERT_EQ(calls.size(), variants.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].variant, variants[i]) << i;
    EXPECT_EQ(calls[i].timed, timed[i]) << i;
  }
}

TEST(BenchSchedule, OneVariantNeedsNoSwitchCalls) {
  const std::vector<ScheduledCall> calls = interleavedSchedule(1, 5, 30, 10);
  ASSERT_EQ(calls.size(), 35u);
  const Counts c = countPerVariant(calls, 1)[0];
  EXPECT_EQ(c.timed, 30);
  EXPECT_EQ(c.untimed, 5);
}

TEST(BenchSchedule, NothingToRunGivesNoCalls) {
  EXPECT_TRUE(interleavedSchedule(0, 5, 20, 10).empty());
  EXPECT_TRUE(interleavedSchedule(2, 5, 0, 10).empty());
  EXPECT_TRUE(interleavedSchedule(2, 5, 20, 0).empty());
}
