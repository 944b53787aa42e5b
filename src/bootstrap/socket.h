// Blocking socket helpers with a deadline: every wait goes through poll() with the time left.
#pragma once
#include <chrono>
#include <cstddef>

#include "symmar/symmar.h"

namespace symmar {

using Clock = std::chrono::steady_clock;

struct Deadline {
  Clock::time_point at;
  static Deadline in(int timeout_ms) { return Deadline{Clock::now() + std::chrono::milliseconds(timeout_ms)}; }
  /// Milliseconds left (0 when passed), capped to fit poll().
  int leftMs() const;
  bool passed() const { return Clock::now() >= at; }
};

/// Waits until fd is readable (events=POLLIN) or writable (POLLOUT). symmarTimeout when the
/// deadline passes, symmarPeerFailure on hang-up/error.
symmarResult_t waitFd(int fd, short events, const Deadline& deadline, const char* what);
/// Sends/receives exactly bytes. A closed peer gives symmarPeerFailure.
symmarResult_t sendAll(int fd, const void* data, size_t bytes, const Deadline& deadline, const char* what);
symmarResult_t recvAll(int fd, void* data, size_t bytes, const Deadline& deadline, const char* what);
void closeFd(int* fd);

}  // namespace symmar
