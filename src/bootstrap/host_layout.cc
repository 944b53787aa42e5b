#include "bootstrap/host_layout.h"

#include <cstring>
#include <utility>

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

SubBootstrap::SubBootstrap(Bootstrap* parent, std::vector<int> members, int index_in_members)
    : Bootstrap(index_in_members, static_cast<int>(members.size())), parent_(parent), members_(std::move(members)) {}

symmarResult_t SubBootstrap::allGather(void* data, size_t bytes_per_rank) {
  const size_t n = static_cast<size_t>(parent_->nranks());
  scratch_.assign(n * bytes_per_rank, 0);
  unsigned char* out = static_cast<unsigned char*>(data);
  std::memcpy(&scratch_[static_cast<size_t>(parent_->rank()) * bytes_per_rank],
              out + static_cast<size_t>(rank()) * bytes_per_rank, bytes_per_rank);
  symmarResult_t res = parent_->allGather(scratch_.data(), bytes_per_rank);
  if (res != symmarSuccess) return res;
  for (size_t i = 0; i < members_.size(); ++i) {
    std::memcpy(out + i * bytes_per_rank, &scratch_[static_cast<size_t>(members_[i]) * bytes_per_rank], bytes_per_rank);
  }
  return symmarSuccess;
}

}  // namespace symmar
