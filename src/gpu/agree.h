// Small collective helpers over the bootstrap allgather: every rank must take the same decision
// (the planner and the kernels' barrier counts depend on it), so local outcomes are always shared.
#pragma once
#include <cstring>
#include <vector>

#include "bootstrap/bootstrap.h"

namespace symmar {
namespace gpu {

/// Gathers one trivially-copyable record per rank, in rank order.
template <typename T>
symmarResult_t gatherAll(Bootstrap& bs, const T& mine, std::vector<T>* all) {
  all->assign(static_cast<size_t>(bs.nranks()), T{});
  std::memcpy(&(*all)[static_cast<size_t>(bs.rank())], &mine, sizeof(T));
  return bs.allGather(all->data(), sizeof(T));
}

/// Shares a local success flag; *first_failed = lowest rank that failed, or -1 when all succeeded.
inline symmarResult_t agreeAll(Bootstrap& bs, bool ok, int* first_failed) {
  std::vector<int> flags;
  symmarResult_t res = gatherAll<int>(bs, ok ? 1 : 0, &flags);
  if (res != symmarSuccess) return res;
  *first_failed = -1;
  for (size_t r = 0; r < flags.size() && *first_failed < 0; ++r) {
    if (!flags[r]) *first_failed = static_cast<int>(r);
  }
  return symmarSuccess;
}

}  // namespace gpu
}  // namespace symmar
