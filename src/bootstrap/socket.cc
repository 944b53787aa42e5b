#include "bootstrap/socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace symmar {

int Deadline::leftMs() const {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1000000 ? 1000000 : static_cast<int>(left);
}

symmarResult_t waitFd(int fd, short events, const Deadline& deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = poll(&p, 1, deadline.leftMs());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(symmarSystemError, "%s: poll failed: %s", what, strerror(errno));
    if (n == 0) return fail(symmarTimeout, "%s: no answer from the peer within the timeout", what);
    if (p.revents & events) return symmarSuccess;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return fail(symmarPeerFailure, "%s: the peer closed the connection", what);
  }
}

symmarResult_t sendAll(int fd, const void* data, size_t bytes, const Deadline& deadline, const char* what) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    SYMMAR_CHECK(waitFd(fd, POLLOUT, deadline, what));
    ssize_t n = send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      return fail(symmarPeerFailure, "%s: the peer closed the connection", what);
    }
    if (n < 0) return fail(symmarSystemError, "%s: send failed: %s", what, strerror(errno));
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return symmarSuccess;
}

symmarResult_t recvAll(int fd, void* data, size_t bytes, const Deadline& deadline, const char* what) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    SYMMAR_CHECK(waitFd(fd, POLLIN, deadline, what));
    ssize_t n = recv(fd, p, bytes, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n == 0 || (n < 0 && errno == ECONNRESET)) {
      return fail(symmarPeerFailure, "%s: the peer closed the connection", what);
    }
    if (n < 0) return fail(symmarSystemError, "%s: recv failed: %s", what, strerror(errno));
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return symmarSuccess;
}

void closeFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

}  // namespace symmar
