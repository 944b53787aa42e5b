// The interface through which a comm's ranks exchange small records (implemented in bootstrap/:
// TCP star, engine allgather). Executors depend on this interface, not on how ranks met.
#pragma once
#include <cstddef>
#include <cstring>
#include <vector>

#include "symmar/symmar.h"

namespace symmar {

class Bootstrap {
 public:
  Bootstrap(int rank, int nranks) : rank_(rank), nranks_(nranks) {}
  virtual ~Bootstrap() = default;
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  /// In-place allgather: data holds nranks * bytes_per_rank bytes, this rank's record at
  /// rank * bytes_per_rank. Bounded by the bootstrap's timeout.
  virtual symmarResult_t allGather(void* data, size_t bytes_per_rank) = 0;
  /// Every rank arrives before any leaves (an allgather of nothing).
  symmarResult_t barrier() {
    std::vector<char> bytes(static_cast<size_t>(nranks_), 0);
    return allGather(bytes.data(), 1);
  }

 private:
  int rank_;
  int nranks_;
};

/// Gathers one trivially-copyable record per rank, in rank order.
template <typename T>
symmarResult_t gatherAll(Bootstrap& bs, const T& mine, std::vector<T>* all) {
  all->assign(static_cast<size_t>(bs.nranks()), T{});
  std::memcpy(&(*all)[static_cast<size_t>(bs.rank())], &mine, sizeof(T));
  return bs.allGather(all->data(), sizeof(T));
}

/// Shares a local success flag, so every rank takes the same decision; *first_failed = lowest rank
/// that failed, or -1 when all succeeded.
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

}  // namespace symmar
