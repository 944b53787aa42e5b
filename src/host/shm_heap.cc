#include "host/shm_heap.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "core/log.h"

namespace symmar {
namespace {
#ifdef MADV_POPULATE_READ
constexpr int kPopulateRead = MADV_POPULATE_READ;
#else
constexpr int kPopulateRead = 22;  // Linux's value, for older headers
#endif
}  // namespace

uint64_t pidNamespaceId() {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return (static_cast<uint64_t>(st.st_dev) << 32) ^ static_cast<uint64_t>(st.st_ino) ^ 1;  // never 0 when read
}

ShmHeap::~ShmHeap() = default;

symmarResult_t ShmHeap::create(Bootstrap& bootstrap, uint64_t nonce, size_t staging_bytes, size_t heap_bytes,
                               uint32_t epoch_start, int timeout_ms) {
  staging_bytes_ = staging_bytes;
  heap_bytes_ = heap_bytes;
  world_ = bootstrap.nranks();
  segment_bytes_ = userOffset() + heap_bytes;
  const int rank = bootstrap.rank();
  symmarResult_t res = segments_.create(bootstrap, nonce, segment_bytes_, timeout_ms, "heap");
  if (res == symmarSuccess) {
    for (int r = 0; r < bootstrap.nranks(); ++r) bases_.push_back(segments_.base(r));
  }
  if (res == symmarSuccess) {
    header(rank)->pid = getpid();
    header(rank)->self_address = reinterpret_cast<uintptr_t>(header(rank));  // cross_memory.h's probe
    header(rank)->pid_ns = pidNamespaceId();
    // Every lamport slot starts empty (before the agreement below: no peer writes into it earlier).
    uint32_t* lamport = lamportSlot(rank, 0, 0);
    std::fill(lamport, lamport + sched::lamportAreaBytes(world_) / sizeof(uint32_t), sched::kLamportEmpty);
    for (int b = 0; b < sched::kMaxBlocks; ++b) {
      for (int s = 0; s < sched::kBarrierSlots; ++s) __atomic_store_n(flag(rank, b, s), epoch_start, __ATOMIC_RELEASE);
    }
  }
  // Every rank says whether it mapped everything. Nobody polls a peer's flags before that peer
  // has set them to the start epoch, and a rank that failed makes every peer fail now.
  int bad = -1;
  symmarResult_t agreed = agreeAll(bootstrap, res == symmarSuccess, &bad);
  if (res == symmarSuccess) res = agreed;
  if (res == symmarSuccess && bad >= 0) {
    res = fail(symmarSystemError, "heap: rank %d could not create or map the shared segments", bad);
  }
  if (res != symmarSuccess) {
    bases_.clear();
    segments_.unmapAll();
    return res;
  }
  SYMMAR_INFO(kSubsysHeap, "heap: %d segments of %zu bytes (staging %zu, user heap %zu)", bootstrap.nranks(),
              segment_bytes_, staging_bytes_, heap_bytes_);
  return symmarSuccess;
}

void ShmHeap::mapStagingPages(size_t bytes, int rank) const {
  const size_t n = std::min(bytes, sched::stagingHalfBytes(staging_bytes_));
  for (int half = 0; half < 2; ++half) {
    char* p = staging(rank, half);
    // One call maps the range where the kernel has MADV_POPULATE_READ (Linux 5.14) and the half
    // starts on a page (unless the staging size is odd); otherwise one read per page does.
    if (madvise(p, n, kPopulateRead) == 0) continue;
    const volatile char* q = p;
    for (size_t i = 0; i < n; i += 4096) (void)q[i];
  }
}

}  // namespace symmar
