#include "bootstrap/host_layout.h"

#include "bootstrap/bootstrap.h"
#include "core/error.h"

namespace symmar {

HostPlacement placeRanks(const std::vector<uint64_t>& host_of_rank, int rank) {
  HostPlacement p;
  std::vector<uint64_t> hosts;  // distinct hashes in order of their lowest rank
  std::vector<int> sizes;
  for (uint64_t h : host_of_rank) {
    size_t i = 0;
    while (i < hosts.size() && hosts[i] != h) ++i;
    if (i == hosts.size()) {
      hosts.push_back(h);
      sizes.push_back(0);
    }
    ++sizes[i];
  }
  const uint64_t mine = host_of_rank[static_cast<size_t>(rank)];
  p.hosts = static_cast<int>(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (hosts[i] == mine) p.host = static_cast<int>(i);
  }
  p.local_size = sizes[static_cast<size_t>(p.host)];
  p.local_rank = 0;
  for (int r = 0; r < rank; ++r) p.local_rank += host_of_rank[static_cast<size_t>(r)] == mine;
  for (int s : sizes) p.uniform = p.uniform && s == p.local_size;
  return p;
}

std::vector<int> ranksByHost(const std::vector<uint64_t>& host_of_rank) {
  std::vector<int> out;
  for (size_t first = 0; first < host_of_rank.size(); ++first) {
    bool seen = false;  // a host is listed at its lowest rank
    for (size_t r = 0; r < first && !seen; ++r) seen = host_of_rank[r] == host_of_rank[first];
    if (seen) continue;
    for (size_t r = first; r < host_of_rank.size(); ++r) {
      if (host_of_rank[r] == host_of_rank[first]) out.push_back(static_cast<int>(r));
    }
  }
  return out;
}

std::vector<int> ranksOnHost(const std::vector<uint64_t>& host_of_rank, int rank) {
  std::vector<int> out;
  for (size_t r = 0; r < host_of_rank.size(); ++r) {
    if (host_of_rank[r] == host_of_rank[static_cast<size_t>(rank)]) out.push_back(static_cast<int>(r));
  }
  return out;
}

symmarResult_t connectHost(Bootstrap& boot, const HostPlacement& p, const std::vector<int>& host_ranks, int timeout_ms,
                           std::unique_ptr<Bootstrap>* out) {
  struct Offer {
    symmarUniqueId id;
    int32_t ok;
  };
  std::vector<Offer> offers(static_cast<size_t>(boot.nranks()));
  Offer& mine = offers[static_cast<size_t>(boot.rank())];
  mine.ok = p.local_rank != 0 || makeUniqueId(&mine.id) == symmarSuccess;
  SYMMAR_CHECK(boot.allGather(offers.data(), sizeof(Offer)));
  const Offer& first = offers[static_cast<size_t>(host_ranks[0])];
  if (!first.ok) return fail(symmarSystemError, "rank %d could not open its host's bootstrap", host_ranks[0]);
  return createTcpBootstrap(first.id, p.local_rank, p.local_size, timeout_ms, out);
}

}  // namespace symmar
