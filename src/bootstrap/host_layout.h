// Grouping a comm's ranks by host: which host each rank is on, its place among that host's ranks,
// and a bootstrap of one host's ranks alone.
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

/// Every rank, host by host (hosts in placeRanks' order), ascending within a host: with as many
/// ranks on every host, the rank at local index l of host h is at h * local_size + l.
std::vector<int> ranksByHost(const std::vector<uint64_t>& host_of_rank);

/// Collective over boot (the comm's bootstrap): a bootstrap of this host's ranks alone (host_ranks,
/// this rank at p.local_rank), so each host builds its shared state on its own schedule (what the
/// ranks of one host exchange meanwhile may differ from another host's). The host's first rank
/// makes a unique id, every rank learns its host's through boot, and each host's ranks meet over
/// TCP on that host.
symmarResult_t connectHost(Bootstrap& boot, const HostPlacement& p, const std::vector<int>& host_ranks, int timeout_ms,
                           std::unique_ptr<Bootstrap>* out);

}  // namespace symmar
