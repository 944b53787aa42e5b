#include "bootstrap/host_layout.h"


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

std::vector<int> ranksOnHost(const std::vector<uint64_t>& host_of_rank, int rank) {
  std::vector<int> out;
  for (size_t r = 0; r < host_of_rank.size(); ++r) {
    if (host_of_rank[r] == host_of_rank[static_cast<size_t>(rank)]) out.push_back(static_cast<int>(r));
  }
  return out;
}

}  // namespace symmar
