// File descriptors travel between local ranks as SCM_RIGHTS messages on abstract Unix datagram
// sockets named after the comm's nonce and the receiving rank (nothing is left in the file system).
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "bootstrap/socket.h"
#include "core/error.h"

namespace symmar {
namespace {

socklen_t socketName(uint64_t nonce, int rank, sockaddr_un* sa) {
  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "symmar-%016llx-%d",
                   static_cast<unsigned long long>(nonce), rank);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

symmarResult_t sendFd(int sock, uint64_t nonce, int to_rank, int from_rank, int fd) {
  sockaddr_un sa;
  socklen_t len = socketName(nonce, to_rank, &sa);
  int32_t payload = from_rank;
  iovec iov{&payload, sizeof(payload)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_name = &sa;
  msg.msg_namelen = len;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof(int));
  for (;;) {
    if (sendmsg(sock, &msg, MSG_NOSIGNAL) >= 0) return symmarSuccess;
    if (errno != EINTR) break;
  }
  return fail(symmarSystemError, "fd passing: sending to rank %d failed: %s", to_rank, strerror(errno));
}

symmarResult_t recvFd(int sock, const Deadline& deadline, int* from_rank, int* fd) {
  SYMMAR_CHECK(waitFd(sock, POLLIN, deadline, "fd passing: waiting for a peer's memory handle"));
  int32_t payload = -1;
  iovec iov{&payload, sizeof(payload)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) < 0) {
    return fail(symmarSystemError, "fd passing: recvmsg failed: %s", strerror(errno));
  }
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (!c || c->cmsg_type != SCM_RIGHTS) return fail(symmarSystemError, "fd passing: message without a descriptor");
  memcpy(fd, CMSG_DATA(c), sizeof(int));
  *from_rank = payload;
  return symmarSuccess;
}

}  // namespace

symmarResult_t exchangeFds(Bootstrap& bootstrap, uint64_t nonce, int own_fd, int timeout_ms, std::vector<int>* fds) {
  const int rank = bootstrap.rank();
  const int n = bootstrap.nranks();
  fds->assign(n, -1);
  (*fds)[rank] = own_fd;
  if (n == 1) return symmarSuccess;
  int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return fail(symmarSystemError, "fd passing: socket failed: %s", strerror(errno));
  sockaddr_un sa;
  socklen_t len = socketName(nonce, rank, &sa);
  symmarResult_t res = symmarSuccess;
  if (bind(sock, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    res = fail(symmarSystemError, "fd passing: bind failed: %s", strerror(errno));
  }
  // Every rank reports whether it could bind, so nobody sends to a socket that does not exist.
  std::vector<char> ok(n, 0);
  ok[rank] = res == symmarSuccess;
  symmarResult_t gathered = bootstrap.allGather(ok.data(), 1);
  if (res == symmarSuccess) res = gathered;
  for (int r = 0; r < n && res == symmarSuccess; ++r) {
    if (!ok[r]) res = fail(symmarSystemError, "fd passing: rank %d could not open its socket", r);
  }
  for (int i = 1; i < n && res == symmarSuccess; ++i) res = sendFd(sock, nonce, (rank + i) % n, rank, own_fd);
  Deadline deadline = Deadline::in(timeout_ms);
  for (int i = 1; i < n && res == symmarSuccess; ++i) {
    int from = -1, fd = -1;
    res = recvFd(sock, deadline, &from, &fd);
    if (res != symmarSuccess) break;
    if (from < 0 || from >= n || from == rank || (*fds)[from] >= 0) {
      close(fd);
      res = fail(symmarInternalError, "fd passing: unexpected descriptor from rank %d", from);
      break;
    }
    (*fds)[from] = fd;
  }
  close(sock);
  if (res != symmarSuccess) {
    for (int r = 0; r < n; ++r) {
      if (r != rank && (*fds)[r] >= 0) close((*fds)[r]);
      if (r != rank) (*fds)[r] = -1;
    }
  }
  return res;
}

}  // namespace symmar
