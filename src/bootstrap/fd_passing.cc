// File descriptors travel between local ranks as SCM_RIGHTS messages on abstract Unix datagram
// sockets named after the comm's nonce and the receiving rank (nothing is left in the file system).
//
// Abstract names are visible to every local user (/proc/net/unix), so nothing that arrives is
// trusted by where it arrived: a message counts only when the kernel's SCM_CREDENTIALS say it
// came from the expected rank's process (pid) under this process's uid, and its payload carries
// the sender's random key, exchanged over the bootstrap and never part of a name. Anything else is
// a stray datagram: its descriptors are closed and the wait goes on (bounded).
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>

#include "bootstrap/bootstrap.h"
#include "bootstrap/socket.h"
#include "core/error.h"
#include "core/log.h"

namespace symmar {
namespace {

constexpr uint32_t kFdMagic = 0x53464450;  // "PDFS"

/// What each rank tells the others over the bootstrap before any descriptor moves.
struct FdPeerInfo {
  uint64_t key[2];  // random; proves a datagram came from this rank
  int32_t pid;      // the process whose credentials its datagrams must carry
  int32_t ok;       // bound its socket and has a descriptor to send
};

struct FdPayload {
  uint32_t magic;
  int32_t from_rank;
  uint64_t key[2];
};

socklen_t socketName(uint64_t nonce, int rank, sockaddr_un* sa) {
  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "symmar-%016llx-%d",
                   static_cast<unsigned long long>(nonce), rank);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

/// Sends without blocking; *sent is false when the receiver's queue is full (try again later).
symmarResult_t sendFd(int sock, uint64_t nonce, int to_rank, const FdPayload& payload, int fd, bool* sent) {
  *sent = false;
  sockaddr_un sa;
  socklen_t len = socketName(nonce, to_rank, &sa);
  FdPayload copy = payload;
  iovec iov{&copy, sizeof(copy)};
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
    if (sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0) {
      *sent = true;
      return symmarSuccess;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return symmarSuccess;
    if (errno != EINTR) break;
  }
  return fail(symmarSystemError, "fd passing: sending to rank %d failed: %s", to_rank, strerror(errno));
}

/// One received datagram: every descriptor it carried (the caller keeps one or closes them all),
/// the sender's kernel-attested credentials and the payload.
struct Received {
  std::vector<int> fds;
  bool have_creds = false;
  ucred creds{};
  FdPayload payload{};
  ssize_t bytes = -1;
  bool truncated = false;
};

/// Reads one datagram if one is waiting (out->bytes < 0 when none was).
symmarResult_t recvOne(int sock, Received* out) {
  iovec iov{&out->payload, sizeof(out->payload)};
  // Room for a few descriptors and the credentials: a hostile sender may attach more than one.
  alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int)) + CMSG_SPACE(sizeof(ucred))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  out->bytes = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (out->bytes < 0) {
    if (errno == EINTR || errno == EAGAIN) return symmarSuccess;
    return fail(symmarSystemError, "fd passing: recvmsg failed: %s", strerror(errno));
  }
  out->truncated = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET) continue;
    if (c->cmsg_type == SCM_RIGHTS) {
      size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < n; ++i) {
        int fd;
        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        out->fds.push_back(fd);
      }
    } else if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(ucred))) {
      memcpy(&out->creds, CMSG_DATA(c), sizeof(ucred));
      out->have_creds = true;
    }
  }
  return symmarSuccess;
}

void closeAllFds(std::vector<int>* fds) {
  for (int fd : *fds) close(fd);
  fds->clear();
}

/// Why a datagram is not the expected descriptor from a peer, or nullptr when it is.
const char* rejectReason(const Received& m, const std::vector<FdPeerInfo>& peers, int rank,
                         const std::vector<int>& have) {
  const int n = static_cast<int>(peers.size());
  if (m.truncated || m.bytes != static_cast<ssize_t>(sizeof(FdPayload))) return "malformed message";
  if (m.payload.magic != kFdMagic) return "bad magic";
  const int from = m.payload.from_rank;
  if (from < 0 || from >= n || from == rank) return "no such peer rank";
  if (!m.have_creds) return "no sender credentials";
  if (m.creds.uid != getuid()) return "sender runs under another uid";
  if (m.creds.pid != peers[from].pid) return "sender is not the process of that rank";
  if (memcmp(m.payload.key, peers[from].key, sizeof(m.payload.key)) != 0) return "wrong key";
  if (m.fds.size() != 1) return "not exactly one descriptor";
  if (have[from] >= 0) return "a second descriptor from the same rank";
  return nullptr;
}

}  // namespace

symmarResult_t exchangeFds(Bootstrap& bootstrap, uint64_t nonce, int own_fd, int timeout_ms, std::vector<int>* fds) {
  const int rank = bootstrap.rank();
  const int n = bootstrap.nranks();
  fds->assign(n, -1);
  (*fds)[rank] = own_fd;
  if (n == 1) return own_fd >= 0 ? symmarSuccess : fail(symmarSystemError, "fd passing: no descriptor to share");
  int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return fail(symmarSystemError, "fd passing: socket failed: %s", strerror(errno));
  sockaddr_un sa;
  socklen_t len = socketName(nonce, rank, &sa);
  symmarResult_t res = symmarSuccess;
  int one = 1;
  if (own_fd < 0) {
    res = fail(symmarSystemError, "fd passing: this rank has no descriptor to share");
  } else if (setsockopt(sock, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0) {
    res = fail(symmarSystemError, "fd passing: SO_PASSCRED failed: %s", strerror(errno));
  } else if (bind(sock, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    res = fail(symmarSystemError, "fd passing: bind failed: %s", strerror(errno));
  }
  // Every rank reports whether it is ready (so nobody sends to a socket that is not its peer's),
  // its pid and its key.
  std::vector<FdPeerInfo> peers(n);
  std::random_device rd;
  FdPeerInfo& mine = peers[rank];
  for (uint64_t& k : mine.key) k = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  mine.pid = static_cast<int32_t>(getpid());
  mine.ok = res == symmarSuccess;
  symmarResult_t gathered = bootstrap.allGather(peers.data(), sizeof(FdPeerInfo));
  if (res == symmarSuccess) res = gathered;
  for (int r = 0; r < n && res == symmarSuccess; ++r) {
    if (!peers[r].ok)
      res = fail(symmarSystemError, "fd passing: rank %d could not take part (no socket or descriptor)", r);
  }
  FdPayload payload{kFdMagic, rank, {mine.key[0], mine.key[1]}};
  // Sends never block: a receive queue filled by someone else must not stall this rank, and two
  // ranks must keep draining their own queues while they wait to send to each other.
  std::vector<int> unsent;
  for (int i = 1; i < n; ++i) unsent.push_back((rank + i) % n);
  Deadline deadline = Deadline::in(timeout_ms);
  for (int got = 1; res == symmarSuccess && (got < n || !unsent.empty());) {
    bool progress = false;
    for (size_t i = 0; i < unsent.size() && res == symmarSuccess;) {
      bool sent = false;
      res = sendFd(sock, nonce, unsent[i], payload, own_fd, &sent);
      if (res == symmarSuccess && !sent) {
        ++i;
        continue;
      }
      unsent.erase(unsent.begin() + static_cast<long>(i));
      progress = true;
    }
    Received m;
    if (res == symmarSuccess) res = recvOne(sock, &m);
    if (res != symmarSuccess) break;
    if (m.bytes >= 0 || !m.fds.empty()) {
      progress = true;
      if (const char* why = rejectReason(m, peers, rank, *fds)) {
        SYMMAR_WARN(kSubsysBoot, "fd passing: ignored a datagram (%s; sender pid %d uid %d)", why,
                    m.have_creds ? static_cast<int>(m.creds.pid) : -1,
                    m.have_creds ? static_cast<int>(m.creds.uid) : -1);
        closeAllFds(&m.fds);
      } else {
        (*fds)[m.payload.from_rank] = m.fds[0];
        ++got;
      }
    }
    if (progress) continue;
    if (deadline.passed()) {
      res = fail(symmarTimeout, "fd passing: %d of %d peers' memory handles arrived within %d ms (%zu sends pending)",
                 got - 1, n - 1, timeout_ms, unsent.size());
      break;
    }
    pollfd p{sock, POLLIN, 0};
    poll(&p, 1, unsent.empty() ? std::min(deadline.leftMs(), 50) : 1);
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
