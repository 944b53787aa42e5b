// Grouping a comm's ranks by host, and a bootstrap among a subset of them (the ranks of one host)
// that a backend can be built over as if they were the whole comm.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/backend.h"
#include "core/bootstrap_api.h"

namespace symmar {

/// rank's placement from every rank's host hash (in rank order): hosts numbered by their lowest
/// rank, local indices by rank order within a host.
HostPlacement placeRanks(const std::vector<uint64_t>& host_of_rank, int rank);

/// Global ranks on the same host as rank, ascending (the local ranks, by local index).
std::vector<int> ranksOnHost(const std::vector<uint64_t>& host_of_rank, int rank);

/// An allgather among members (global ranks, ascending; rank is one of them) carried by a full
/// allgather of parent: every rank of parent must make the same calls in the same order, members
/// or not (the ranks of every host build theirs at the same point of comm creation). Records are
/// small and this runs only while a comm is made, so the extra bytes do not matter.
class SubBootstrap : public Bootstrap {
 public:
  SubBootstrap(Bootstrap* parent, std::vector<int> members, int index_in_members);
  symmarResult_t allGather(void* data, size_t bytes_per_rank) override;

 private:
  Bootstrap* parent_;
  std::vector<int> members_;
  std::vector<unsigned char> scratch_;
};

}  // namespace symmar
