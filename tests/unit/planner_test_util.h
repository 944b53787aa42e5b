// What the planner's tests share: a topology in one call, the plan of a buffer size, the GPU links.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>

#include "core/error.h"
#include "core/names.h"
#include "plan/planner.h"

namespace symmar {
namespace plantest {

inline symmarTopology_t topo(int major, int minor, symmarLink_t link, int world, int multicast) {
  return symmarTopology_t{major, minor, link, world, multicast};
}

inline symmarAlgo_t plan(const symmarTopology_t& t, size_t bytes, symmarDataType_t dtype = symmarBfloat16,
                         symmarRedOp_t op = symmarSum) {
  symmarAlgo_t a = symmarAlgoAuto;
  EXPECT_EQ(symmarPlan(&t, bytes / symmarTypeSize(dtype), dtype, op, &a), symmarSuccess) << symmarGetLastError(nullptr);
  return a;
}

constexpr symmarLink_t kGpuLinks[] = {symmarLinkNvSwitch, symmarLinkNvLink, symmarLinkPcie, symmarLinkPcieNoP2P};

}  // namespace plantest
}  // namespace symmar
