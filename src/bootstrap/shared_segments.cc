#include "bootstrap/shared_segments.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.h"

namespace symmar {
namespace {

/// A shrink of a peer's segment would turn this process's reads into SIGBUS: only a sealed memfd
/// of at least the agreed size is mapped.
symmarResult_t checkPeerSegment(int fd, int rank, size_t bytes, const char* what) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    return fail(symmarSystemError, "%s: fstat of rank %d's segment failed: %s", what, rank, strerror(errno));
  }
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) < bytes) {
    return fail(symmarPeerFailure, "%s: rank %d's segment is %lld bytes, expected %zu", what, rank,
                static_cast<long long>(st.st_size), bytes);
  }
  const int seals = fcntl(fd, F_GET_SEALS);
  const int needed = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
  if (seals < 0 || (seals & needed) != needed) {
    return fail(symmarPeerFailure, "%s: rank %d's segment is not a sealed memfd (seals %d)", what, rank, seals);
  }
  return symmarSuccess;
}

}  // namespace

void SharedSegments::unmapAll() {
  for (char* b : bases_) {
    if (b) munmap(b, bytes_);
  }
  bases_.clear();
}

symmarResult_t SharedSegments::create(Bootstrap& bootstrap, uint64_t nonce, size_t bytes, int timeout_ms,
                                      const char* what) {
  bytes_ = bytes;
  const int rank = bootstrap.rank();
  const std::string name = std::string("symmar-") + what;  // how the mapping reads in /proc/PID/maps
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  symmarResult_t res = symmarSuccess;
  if (fd < 0) {
    res = fail(symmarSystemError, "%s: memfd_create failed: %s", what, strerror(errno));
  } else if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    res = fail(symmarSystemError, "%s: ftruncate to %zu bytes failed: %s", what, bytes, strerror(errno));
  } else if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    res = fail(symmarSystemError, "%s: sealing the segment failed: %s", what, strerror(errno));
  }
  if (res != symmarSuccess && fd >= 0) {
    close(fd);
    fd = -1;
  }
  // A rank without a segment still takes part in the exchange (with no descriptor), so its peers
  // learn at once that the segments cannot form instead of waiting for it.
  std::vector<int> fds;
  symmarResult_t exchanged = exchangeFds(bootstrap, nonce, fd, timeout_ms, &fds);
  if (res == symmarSuccess) res = exchanged;
  bases_.assign(static_cast<size_t>(bootstrap.nranks()), nullptr);
  for (int r = 0; r < bootstrap.nranks() && res == symmarSuccess; ++r) {
    if (r != rank) res = checkPeerSegment(fds[static_cast<size_t>(r)], r, bytes, what);
    if (res != symmarSuccess) break;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[static_cast<size_t>(r)], 0);
    if (p == MAP_FAILED) {
      res = fail(symmarSystemError, "%s: mapping rank %d's segment (%zu bytes) failed: %s", what, r, bytes,
                 strerror(errno));
    } else {
      bases_[static_cast<size_t>(r)] = static_cast<char*>(p);
    }
  }
  for (int r = 0; r < static_cast<int>(fds.size()); ++r) {
    if (fds[static_cast<size_t>(r)] >= 0 && r != rank) close(fds[static_cast<size_t>(r)]);
  }
  if (fd >= 0) close(fd);
  if (res != symmarSuccess) unmapAll();
  return res;
}

}  // namespace symmar
