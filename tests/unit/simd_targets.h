// Runs a check once per SIMD target of this CPU (Highway's dispatch restricted to it), for the
// host SIMD kernels' tests: every target must give the same bits.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "host/simd_reduce.h"

namespace symmar_test {

template <typename Fn>
void atEveryTarget(Fn fn) {
  const std::vector<int64_t> targets = symmar::simdReduceTargets();
  ASSERT_FALSE(targets.empty());
  std::string names;
  for (int64_t t : targets) {
    symmar::simdReduceForceTarget(t);
    const char* name = symmar::simdReduceTargetName(t);
    ASSERT_EQ(symmar::simdReduceCurrentTarget(), t) << "dispatch did not switch to " << name;
    SCOPED_TRACE(std::string("SIMD target ") + name);
    fn();
    names += std::string(names.empty() ? "" : " ") + name;
  }
  symmar::simdReduceForceTarget(0);
  std::cout << "[ targets  ] " << names << "\n";
  ::testing::Test::RecordProperty("simd_targets", names);
}

}  // namespace symmar_test
