#include "fault/shm_inter_host.h"

#include <chrono>
#include <cstring>
#include <thread>

namespace fault {
namespace {

constexpr size_t kChannelWords = 2 + ShmInterHost::kSlotBytes / sizeof(uint64_t);

using Clock = std::chrono::steady_clock;

/// Waits until the flag holds want; false at the deadline.
bool awaitFlag(uint64_t* flag, uint64_t want, Clock::time_point deadline) {
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != want) {
    if (Clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

struct ShmInterHost::Endpoint {
  ShmInterHost* mailboxes;
  int rank, host, hosts, local_rank, local_size;
  bool interleaved;
  /// The rank at this rank's local index on host h.
  int peer(int h) const { return interleaved ? local_rank * hosts + h : h * local_size + local_rank; }
};

ShmInterHost::ShmInterHost(int world, bool interleaved)
    : world_(world),
      interleaved_(interleaved),
      words_(static_cast<size_t>(world) * static_cast<size_t>(world) * kChannelWords) {}

uint64_t* ShmInterHost::channel(int from, int to) {
  return &words_[(static_cast<size_t>(from) * static_cast<size_t>(world_) + static_cast<size_t>(to)) * kChannelWords];
}

symmarResult_t ShmInterHost::install(symmarComm_t comm, int rank) {
  auto* e = new Endpoint{this, rank, 0, 0, 0, 0, interleaved_};
  symmarResult_t res = symmarCommHostLayout(comm, &e->hosts, &e->host, &e->local_rank, &e->local_size);
  if (res == symmarSuccess) {
    res = symmarCommSetInterHost(
        comm, exchange, [](void* user) { delete static_cast<Endpoint*>(user); }, e, "shared-memory mailboxes");
  }
  if (res != symmarSuccess) delete e;
  return res;
}

symmarResult_t ShmInterHost::exchange(const void* const* sendbufs, void* recvbuf, size_t bytes, int timeout_ms,
                                      void* user) {
  const Endpoint& e = *static_cast<const Endpoint*>(user);
  if (bytes > kSlotBytes) return symmarInvalidArgument;
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto* out = static_cast<unsigned char*>(recvbuf);
  std::memcpy(out + static_cast<size_t>(e.host) * bytes, sendbufs[e.host], bytes);
  for (int h = 0; h < e.hosts; ++h) {  // post: the slot is free once the peer took the last record
    if (h == e.host) continue;
    uint64_t* ch = e.mailboxes->channel(e.rank, e.peer(h));
    if (!awaitFlag(&ch[0], 0, deadline)) return symmarTimeout;
    ch[1] = bytes;
    std::memcpy(&ch[2], sendbufs[h], bytes);
    __atomic_store_n(&ch[0], 1, __ATOMIC_RELEASE);
  }
  for (int h = 0; h < e.hosts; ++h) {
    if (h == e.host) continue;
    uint64_t* ch = e.mailboxes->channel(e.peer(h), e.rank);
    if (!awaitFlag(&ch[0], 1, deadline)) return symmarTimeout;
    const bool same_length = ch[1] == bytes;
    if (same_length) std::memcpy(out + static_cast<size_t>(h) * bytes, &ch[2], bytes);
    __atomic_store_n(&ch[0], 0, __ATOMIC_RELEASE);
    if (!same_length) return symmarInvalidUsage;
  }
  return symmarSuccess;
}

}  // namespace fault
