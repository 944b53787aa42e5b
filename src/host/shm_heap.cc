#include "host/shm_heap.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/log.h"

namespace symmar {

ShmHeap::~ShmHeap() { unmapAll(); }

void ShmHeap::unmapAll() {
  for (char* b : bases_) {
    if (b) munmap(b, segment_bytes_);
  }
  bases_.clear();
}

namespace {

/// A peer's segment is mapped only if it cannot fault this process later: a sealed memfd of at
/// least the agreed size, whose size can no longer change (a shrink would turn reads into SIGBUS).
symmarResult_t checkPeerSegment(int fd, int rank, size_t bytes) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return fail(symmarSystemError, "heap: fstat of rank %d's segment failed: %s", rank, strerror(errno));
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) < bytes) {
    return fail(symmarPeerFailure, "heap: rank %d's segment is %lld bytes, expected %zu", rank,
                static_cast<long long>(st.st_size), bytes);
  }
  const int seals = fcntl(fd, F_GET_SEALS);
  const int needed = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
  if (seals < 0 || (seals & needed) != needed) {
    return fail(symmarPeerFailure, "heap: rank %d's segment is not a sealed memfd (seals %d)", rank, seals);
  }
  return symmarSuccess;
}

}  // namespace

symmarResult_t ShmHeap::create(Bootstrap& bootstrap, uint64_t nonce, size_t staging_bytes, size_t heap_bytes,
                               uint32_t epoch_start, int timeout_ms) {
  staging_bytes_ = staging_bytes;
  heap_bytes_ = heap_bytes;
  segment_bytes_ = userOffset() + heap_bytes;
  const int rank = bootstrap.rank();
  int fd = memfd_create("symmar-heap", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  symmarResult_t res = symmarSuccess;
  if (fd < 0) {
    res = fail(symmarSystemError, "heap: memfd_create failed: %s", strerror(errno));
  } else if (ftruncate(fd, static_cast<off_t>(segment_bytes_)) != 0) {
    res = fail(symmarSystemError, "heap: ftruncate to %zu bytes failed: %s", segment_bytes_, strerror(errno));
  } else if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    res = fail(symmarSystemError, "heap: sealing the segment failed: %s", strerror(errno));
  }
  if (res != symmarSuccess && fd >= 0) {
    close(fd);
    fd = -1;
  }
  // A rank without a segment still takes part in the exchange (with no descriptor), so its peers
  // learn at once that the heap cannot form instead of waiting for it.
  std::vector<int> fds;
  symmarResult_t exchanged = exchangeFds(bootstrap, nonce, fd, timeout_ms, &fds);
  if (res == symmarSuccess) res = exchanged;
  bases_.assign(bootstrap.nranks(), nullptr);
  for (int r = 0; r < bootstrap.nranks() && res == symmarSuccess; ++r) {
    if (r != rank) res = checkPeerSegment(fds[r], r, segment_bytes_);
    if (res != symmarSuccess) break;
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
  if (res == symmarSuccess) {
    header(rank)->pid = getpid();
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
    unmapAll();
    return res;
  }
  SYMMAR_INFO(kSubsysHeap, "heap: %d segments of %zu bytes (staging %zu, user heap %zu)", bootstrap.nranks(),
              segment_bytes_, staging_bytes_, heap_bytes_);
  return symmarSuccess;
}

}  // namespace symmar
