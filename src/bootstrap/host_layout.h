// Grouping a comm's ranks by host: which host each rank is on, and its place among that host's
// ranks.
#pragma once
#include <cstdint>
#include <vector>

#include "core/backend.h"

namespace symmar {

/// rank's placement from every rank's host hash (in rank order): hosts numbered by their lowest
/// rank, local indices by rank order within a host.
HostPlacement placeRanks(const std::vector<uint64_t>& host_of_rank, int rank);

/// Global ranks on the same host as rank, ascending (the local ranks, by local index).
std::vector<int> ranksOnHost(const std::vector<uint64_t>& host_of_rank, int rank);

}  // namespace symmar
