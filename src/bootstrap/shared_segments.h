// Shared memory between the local ranks of a comm: every rank creates one sealed memfd segment of
// the agreed size, the descriptors travel over the fd-passing sockets, and every rank maps every
// segment. Used by the host backend's heap and by GPU comms that stage through host memory.
// Descriptors are closed once mapped and no name exists in the file system, so nothing outlives
// the processes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "bootstrap/bootstrap.h"

namespace symmar {

/// Every rank's segment mapped in this process; unmaps them when destroyed.
class SharedSegments {
 public:
  SharedSegments() = default;
  ~SharedSegments() { unmapAll(); }
  SharedSegments(const SharedSegments&) = delete;
  SharedSegments& operator=(const SharedSegments&) = delete;

  /// Collective, and every rank learns whether all did it: creates this rank's segment of bytes
  /// (zero-filled), exchanges descriptors (nonce scopes the sockets to one comm) and maps every
  /// peer's. A peer's segment is mapped only if it cannot fault this process later: a sealed memfd
  /// of at least the agreed size. On failure nothing stays mapped. `what` names the segments in
  /// messages and in /proc/PID/maps ("symmar-" what).
  symmarResult_t create(Bootstrap& bootstrap, uint64_t nonce, size_t bytes, int timeout_ms, const char* what);
  bool mapped() const { return !bases_.empty() && bases_[0] != nullptr && bases_.back() != nullptr; }
  char* base(int rank) const { return bases_[static_cast<size_t>(rank)]; }
  size_t bytes() const { return bytes_; }
  void unmapAll();

 private:
  std::vector<char*> bases_;
  size_t bytes_ = 0;
};

}  // namespace symmar
