#include "host/shm_heap.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/log.h"

namespace symmar {

ShmHeap::~ShmHeap() {
  for (char* b : bases_) {
    if (b) munmap(b, segment_bytes_);
  }
}

symmarResult_t ShmHeap::create(Bootstrap& bootstrap, uint64_t nonce, size_t staging_bytes, size_t heap_bytes,
                               uint32_t epoch_start, int timeout_ms) {
  staging_bytes_ = staging_bytes;
  heap_bytes_ = heap_bytes;
  segment_bytes_ = userOffset() + heap_bytes;
  const int rank = bootstrap.rank();
  int fd = memfd_create("symmar-heap", MFD_CLOEXEC);
  symmarResult_t res = symmarSuccess;
  if (fd < 0) {
    res = fail(symmarSystemError, "heap: memfd_create failed: %s", strerror(errno));
  } else if (ftruncate(fd, static_cast<off_t>(segment_bytes_)) != 0) {
    res = fail(symmarSystemError, "heap: ftruncate to %zu bytes failed: %s", segment_bytes_, strerror(errno));
  }
  // A rank that fails before the exchange leaves its peers to time out in it (bounded wait).
  std::vector<int> fds;
  if (res == symmarSuccess) res = exchangeFds(bootstrap, nonce, fd, timeout_ms, &fds);
  bases_.assign(bootstrap.nranks(), nullptr);
  for (int r = 0; r < bootstrap.nranks() && res == symmarSuccess; ++r) {
    void* p = mmap(nullptr, segment_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fds[r], 0);
    if (p == MAP_FAILED) {
      res = fail(symmarSystemError, "heap: mapping rank %d's segment (%zu bytes) failed: %s", r, segment_bytes_,
                 strerror(errno));
    } else {
      bases_[r] = static_cast<char*>(p);
    }
  }
  for (int r = 0; r < static_cast<int>(fds.size()); ++r) {
    if (fds[r] >= 0 && r != rank) close(fds[r]);
  }
  if (fd >= 0) close(fd);
  if (res != symmarSuccess) return res;
  header(rank)->pid = getpid();
  for (int b = 0; b < sched::kMaxBlocks; ++b) {
    for (int s = 0; s < sched::kBarrierSlots; ++s) __atomic_store_n(flag(rank, b, s), epoch_start, __ATOMIC_RELEASE);
  }
  SYMMAR_INFO(kSubsysHeap, "heap: %d segments of %zu bytes (staging %zu, user heap %zu)", bootstrap.nranks(),
              segment_bytes_, staging_bytes_, heap_bytes_);
  // Nobody may poll a peer's flags before that peer has set them to the start epoch.
  return bootstrap.barrier();
}

}  // namespace symmar
