// The interface through which a comm's ranks exchange small records (implemented in bootstrap/:
// TCP star, engine allgather). Executors depend on this interface, not on how ranks met.
#pragma once
#include <cstddef>
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

}  // namespace symmar
