// Unique-id bootstrap: the id names rank 0's TCP listener (address, port, nonce, checksum); every
// other rank connects to it and rank 0 relays allgathers as the hub of a star.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/socket.h"
#include "bootstrap/tcp_root.h"
#include "bootstrap/wire.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/random.h"
#include "core/recent_ids.h"

namespace symmar {
namespace {

using wire::IdPayload;

/// Bound (not listening) sockets of ids made here and not yet used by a rank 0 here, oldest first. At most
/// kMaxIdleIds stay open: beyond that the oldest is closed, and a rank 0 that later uses that id
/// listens on its port again itself (as a rank 0 in another process always does).
constexpr size_t kMaxIdleIds = 64;
std::mutex g_listeners_mutex;
std::vector<std::pair<uint64_t, int>> g_listeners;
/// Nonces whose comm this process formed as rank 0, the last kRememberedIds of them: an id is
/// single-use, and reusing one is a caller error caught while the id is recent. Bounded, so that a
/// process that makes comms all its life does not grow by an entry each.
constexpr size_t kRememberedIds = 1024;
RecentIds g_used_ids(kRememberedIds);

symmarResult_t chooseAddress(in_addr* addr) {
  if (const char* text = envRaw("SYMMAR_SOCKET_ADDR")) {
    if (inet_pton(AF_INET, text, addr) == 1) return symmarSuccess;
    envReportBad("SYMMAR_SOCKET_ADDR", text, "not an IPv4 address");
  }
  const char* ifname = envRaw("SYMMAR_SOCKET_IFNAME");
  if (!ifname) ifname = "lo";
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && strcmp(a->ifa_name, ifname) == 0) {
        *addr = reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr;
        freeifaddrs(list);
        return symmarSuccess;
      }
    }
    freeifaddrs(list);
  }
  if (strcmp(ifname, "lo") != 0) envReportBad("SYMMAR_SOCKET_IFNAME", ifname, "no IPv4 address on that interface");
  inet_pton(AF_INET, "127.0.0.1", addr);
  return symmarSuccess;
}

/// Whether addr (network order) is an IPv4 address of this host: loopback or one of its interfaces.
bool onThisHost(uint32_t addr) {
  if ((ntohl(addr) >> 24) == 127) return true;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* a = list; a && !found; a = a->ifa_next) {
    found = a->ifa_addr && a->ifa_addr->sa_family == AF_INET &&
            reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr == addr;
  }
  freeifaddrs(list);
  return found;
}

/// How often a rank waiting for rank 0's answer looks whether a local rank 0 still serves the id.
constexpr int kServedCheckMs = 100;
/// How long a rank whose connection rank 0 closed waits for rank 0's claim to go before it takes
/// the close for a failure of its own.
constexpr int kClaimGoneMs = 1000;

/// Binds a TCP socket to addr:port; with listen_now it also listens. SO_REUSEPORT (same user only)
/// lets the id's rank 0 bind the port in another process while the process that made the id still
/// holds it bound: the maker keeps the port reserved without listening, so connections reach only
/// the rank 0 that listens (torch.multiprocessing.spawn makes the id in a parent that is no rank).
symmarResult_t bindTo(in_addr addr, uint16_t port, bool listen_now, int* fd_out, uint16_t* port_out) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(symmarSystemError, "bootstrap: socket failed: %s", strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr = addr;
  sa.sin_port = htons(port);
  socklen_t len = sizeof(sa);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || (listen_now && listen(fd, 1024) != 0) ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    int err = errno;
    close(fd);
    symmarResult_t res =
        fail(symmarSystemError, "bootstrap: cannot listen on %s:%u: %s", inet_ntoa(addr), port, strerror(err));
    errno = err;  // callers tell a port in use from other failures
    return res;
  }
  *fd_out = fd;
  *port_out = ntohs(sa.sin_port);
  return symmarSuccess;
}

class TcpBootstrap : public Bootstrap {
 public:
  TcpBootstrap(int rank, int nranks, int timeout_ms) : Bootstrap(rank, nranks), timeout_ms_(timeout_ms) {}
  ~TcpBootstrap() override {
    listener_.reset();  // stops refusing latecomers; the id's port is free again
    for (int& fd : peers_) closeFd(&fd);
    closeFd(&root_);
  }

  symmarResult_t connectRoot(const IdPayload& id);
  /// Waits (until deadline) for rank 0's answer to this rank's hello.
  symmarResult_t awaitAck(const IdPayload& id, const Deadline& deadline, wire::Ack* ack);
  symmarResult_t acceptAll(const IdPayload& id);
  symmarResult_t allGather(void* data, size_t bytes_per_rank) override;

 private:
  int timeout_ms_;
  int root_ = -1;           // non-root ranks: connection to rank 0
  std::vector<int> peers_;  // rank 0: connection to each rank (index = rank)
  std::unique_ptr<RootListener> listener_;  // rank 0: the id's listener, for the comm's life
};

symmarResult_t TcpBootstrap::connectRoot(const IdPayload& id) {
  Deadline deadline = Deadline::in(timeout_ms_);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = id.addr;
  sa.sin_port = htons(id.port);
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail(symmarSystemError, "bootstrap: socket failed: %s", strerror(errno));
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
      root_ = fd;
      break;
    }
    int err = errno;
    close(fd);
    if (err != ECONNREFUSED && err != EINTR && err != ETIMEDOUT && err != EAGAIN) {
      return fail(symmarSystemError, "bootstrap: connect to rank 0 failed: %s", strerror(err));
    }
    if (deadline.passed()) return fail(symmarTimeout, "bootstrap: rank 0 did not start listening within %d ms", timeout_ms_);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int one = 1;
  setsockopt(root_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  wire::Hello hello{wire::kIdMagic, wire::kIdVersion, 0, rank(), nranks(), id.nonce};
  SYMMAR_CHECK(sendAll(root_, &hello, sizeof(hello), deadline, "bootstrap hello"));
  wire::Ack ack{};
  SYMMAR_CHECK(awaitAck(id, deadline, &ack));
  std::string why;
  symmarResult_t res = wire::judgeAck(ack, nranks(), &why);
  if (res != symmarSuccess) return fail(res, "bootstrap: %s", why.c_str());
  return symmarSuccess;
}

symmarResult_t TcpBootstrap::awaitAck(const IdPayload& id, const Deadline& deadline, wire::Ack* ack) {
  // The id's listening socket can outlive the rank 0 that served it: processes forked from the one
  // that made the id hold it too, so the kernel still completes connections that nobody will
  // answer once rank 0 destroyed its comm or gave up forming it. A rank 0 serves the id exactly
  // while it holds the id's claim, so a rank whose rank 0 is on this host looks at the claim while
  // it waits: gone, the id's comm formed (or failed to form) without this rank.
  const bool local = onThisHost(id.addr);
  const char* what = "bootstrap: waiting for every rank to join";
  auto refuse = [] {
    return fail(symmarInvalidUsage,
                "bootstrap: rank 0 no longer serves this unique id: the comm of this id had already formed (or "
                "failed to form) without this rank; a unique id serves exactly one comm (make one id per comm)");
  };
  for (;;) {
    pollfd p{root_, POLLIN, 0};
    const int n = poll(&p, 1, local ? std::min(deadline.leftMs(), kServedCheckMs) : deadline.leftMs());
    if (n < 0 && errno != EINTR) return fail(symmarSystemError, "%s: poll failed: %s", what, strerror(errno));
    if (n > 0) break;
    if (local && !idClaimed(id.nonce)) {
      // Rank 0 answers before it lets go of the claim: an answer that came after this poll gave up
      // and before the claim went is already here, and says why (a timeout, a refusal).
      pollfd answered{root_, POLLIN, 0};
      if (poll(&answered, 1, 0) > 0) break;
      return refuse();
    }
    if (deadline.passed()) return fail(symmarTimeout, "%s: no answer from rank 0 within %d ms", what, timeout_ms_);
  }
  symmarResult_t res = recvAll(root_, ack, sizeof(*ack), deadline, what);
  if (res != symmarPeerFailure || !local) return res;
  // Closed without an answer: a rank 0 that stopped serving drops the connections it still held
  // just before it lets go of the claim.
  const Deadline gone = Deadline::in(std::min(deadline.leftMs(), kClaimGoneMs));
  while (idClaimed(id.nonce)) {
    if (gone.passed()) return res;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return refuse();
}

symmarResult_t TcpBootstrap::acceptAll(const IdPayload& id) {
  listener_ = std::make_unique<RootListener>();
  SYMMAR_CHECK(listener_->claim(id.nonce));
  int listener = -1;
  {
    std::lock_guard<std::mutex> lock(g_listeners_mutex);
    if (!g_used_ids.insert(id.nonce)) {
      return fail(symmarInvalidUsage, "bootstrap: this unique id already formed a comm in this process: a unique id "
                  "serves exactly one comm (make one id per comm)");
    }
    for (auto it = g_listeners.begin(); it != g_listeners.end(); ++it) {
      if (it->first == id.nonce) {
        listener = it->second;
        g_listeners.erase(it);
        break;
      }
    }
  }
  if (listener >= 0) {  // the id was made here (or in a parent that forked us): its socket is only bound
    if (listen(listener, 1024) != 0) {
      int err = errno;
      close(listener);
      return fail(symmarSystemError, "bootstrap: cannot listen on the unique id's port %u: %s",
                  static_cast<unsigned>(id.port), strerror(err));
    }
  } else {  // the id came from another process: bind its port beside the maker's reservation
    uint16_t port = 0;
    symmarResult_t res = bindTo(in_addr{id.addr}, id.port, true, &listener, &port);
    if (res != symmarSuccess && errno == EADDRINUSE) {
      return fail(symmarInvalidUsage, "bootstrap: the port of this unique id (%u) is taken by a process of another "
                  "user or a program that is not symmar: make the id as the user that runs the ranks",
                  static_cast<unsigned>(id.port));
    }
    SYMMAR_CHECK(res);
  }
  return listener_->acceptAll(listener, id.nonce, nranks(), timeout_ms_, &peers_);
}

symmarResult_t TcpBootstrap::allGather(void* data, size_t bytes_per_rank) {
  Deadline deadline = Deadline::in(timeout_ms_);
  char* base = static_cast<char*>(data);
  size_t total = bytes_per_rank * static_cast<size_t>(nranks());
  if (rank() != 0) {
    SYMMAR_CHECK(sendAll(root_, base + rank() * bytes_per_rank, bytes_per_rank, deadline, "bootstrap allgather"));
    return recvAll(root_, base, total, deadline, "bootstrap allgather");
  }
  for (int r = 1; r < nranks(); ++r) {
    SYMMAR_CHECK(recvAll(peers_[r], base + r * bytes_per_rank, bytes_per_rank, deadline, "bootstrap allgather"));
  }
  for (int r = 1; r < nranks(); ++r) SYMMAR_CHECK(sendAll(peers_[r], base, total, deadline, "bootstrap allgather"));
  return symmarSuccess;
}

}  // namespace

symmarResult_t makeUniqueId(symmarUniqueId* raw) {
  in_addr addr{};
  SYMMAR_CHECK(chooseAddress(&addr));
  IdPayload id{};
  id.addr = addr.s_addr;
  id.nonce = freshNonce();
  int fd = -1;
  SYMMAR_CHECK(bindTo(addr, 0, false, &fd, &id.port));  // reserved; rank 0 listens
  {
    std::lock_guard<std::mutex> lock(g_listeners_mutex);
    g_listeners.emplace_back(id.nonce, fd);
    if (g_listeners.size() > kMaxIdleIds) {
      close(g_listeners.front().second);
      g_listeners.erase(g_listeners.begin());
    }
  }
  wire::encodeId(id, raw);
  SYMMAR_INFO(kSubsysBoot, "unique id reserves %s:%u", inet_ntoa(addr), id.port);
  return symmarSuccess;
}

symmarResult_t createTcpBootstrap(const symmarUniqueId& raw, int rank, int nranks, int timeout_ms,
                                  std::unique_ptr<Bootstrap>* out) {
  IdPayload id{};
  const char* why = nullptr;
  if (wire::decodeId(raw, &id, &why) != symmarSuccess) {
    return fail(symmarInvalidArgument, "unique id is corrupt (%s)", why);
  }
  auto boot = std::make_unique<TcpBootstrap>(rank, nranks, timeout_ms);
  if (nranks > 1) SYMMAR_CHECK(rank == 0 ? boot->acceptAll(id) : boot->connectRoot(id));
  *out = std::move(boot);
  return symmarSuccess;
}

}  // namespace symmar
