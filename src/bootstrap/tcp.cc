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

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/socket.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

namespace symmar {
namespace {

constexpr uint32_t kIdMagic = 0x4d4d5953;  // "SYMM"
constexpr uint16_t kIdVersion = 1;

struct IdPayload {
  uint32_t magic;
  uint16_t version;
  uint16_t port;  // host order
  uint32_t addr;  // network order
  uint32_t reserved;
  uint64_t nonce;
  uint64_t checksum;
};
static_assert(sizeof(IdPayload) <= SYMMAR_UNIQUE_ID_BYTES, "id payload must fit");

struct Hello {
  uint32_t magic;
  int32_t rank;
  int32_t nranks;
  uint32_t reserved;
  uint64_t nonce;
};

uint64_t fnv1a(const void* data, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

uint64_t idChecksum(const IdPayload& id) { return fnv1a(&id, offsetof(IdPayload, checksum)); }

std::mutex g_listeners_mutex;
std::map<uint64_t, int> g_listeners;  // nonce -> listening socket made by makeUniqueId

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

symmarResult_t listenOn(in_addr addr, uint16_t port, int* fd_out, uint16_t* port_out) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(symmarSystemError, "bootstrap: socket failed: %s", strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr = addr;
  sa.sin_port = htons(port);
  socklen_t len = sizeof(sa);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(fd, 1024) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    int err = errno;
    close(fd);
    return fail(symmarSystemError, "bootstrap: cannot listen on %s:%u: %s", inet_ntoa(addr), port, strerror(err));
  }
  *fd_out = fd;
  *port_out = ntohs(sa.sin_port);
  return symmarSuccess;
}

symmarResult_t decodeId(const symmarUniqueId& raw, IdPayload* id) {
  memcpy(id, raw.internal, sizeof(*id));
  for (size_t i = sizeof(*id); i < SYMMAR_UNIQUE_ID_BYTES; ++i) {
    if (raw.internal[i] != 0) return fail(symmarInvalidArgument, "unique id is corrupt (trailing bytes set)");
  }
  if (id->magic != kIdMagic || id->version != kIdVersion) {
    return fail(symmarInvalidArgument, "unique id is not a symmar id (bad magic or version)");
  }
  if (id->checksum != idChecksum(*id)) return fail(symmarInvalidArgument, "unique id is corrupt (checksum mismatch)");
  if (id->port == 0) return fail(symmarInvalidArgument, "unique id is corrupt (port 0)");
  return symmarSuccess;
}

class TcpBootstrap : public Bootstrap {
 public:
  TcpBootstrap(int rank, int nranks, int timeout_ms) : Bootstrap(rank, nranks), timeout_ms_(timeout_ms) {}
  ~TcpBootstrap() override {
    for (int& fd : peers_) closeFd(&fd);
    closeFd(&root_);
  }

  symmarResult_t connectRoot(const IdPayload& id);
  symmarResult_t acceptAll(const IdPayload& id);
  symmarResult_t allGather(void* data, size_t bytes_per_rank) override;

 private:
  int timeout_ms_;
  int root_ = -1;           // non-root ranks: connection to rank 0
  std::vector<int> peers_;  // rank 0: connection to each rank (index = rank)
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
  Hello hello{kIdMagic, rank(), nranks(), 0, id.nonce};
  SYMMAR_CHECK(sendAll(root_, &hello, sizeof(hello), deadline, "bootstrap hello"));
  int32_t ack = 0;
  SYMMAR_CHECK(recvAll(root_, &ack, sizeof(ack), deadline, "bootstrap: waiting for every rank to join"));
  if (ack < 0 && -ack < symmarNumResults) {
    return fail(static_cast<symmarResult_t>(-ack), "bootstrap: rank 0 gave up forming the comm (%s: not every rank joined "
                "within its timeout, or a rank joined with a wrong rank or size)",
                symmarGetErrorString(static_cast<symmarResult_t>(-ack)));
  }
  if (ack != nranks()) return fail(symmarInvalidArgument, "bootstrap: rank 0 rejected this rank (%d)", ack);
  return symmarSuccess;
}

symmarResult_t TcpBootstrap::acceptAll(const IdPayload& id) {
  Deadline deadline = Deadline::in(timeout_ms_);
  int listener = -1;
  {
    std::lock_guard<std::mutex> lock(g_listeners_mutex);
    auto it = g_listeners.find(id.nonce);
    if (it != g_listeners.end()) {
      listener = it->second;
      g_listeners.erase(it);
    }
  }
  if (listener < 0) {  // the id came from another process: listen on its address ourselves
    uint16_t port = 0;
    SYMMAR_CHECK(listenOn(in_addr{id.addr}, id.port, &listener, &port));
  }
  peers_.assign(nranks(), -1);
  symmarResult_t res = symmarSuccess;
  for (int joined = 1; joined < nranks() && res == symmarSuccess;) {
    res = waitFd(listener, POLLIN, deadline, "bootstrap: waiting for ranks to join");
    if (res != symmarSuccess) {
      res = fail(symmarTimeout, "bootstrap: only %d of %d ranks joined within %d ms", joined, nranks(), timeout_ms_);
      break;
    }
    int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Hello hello{};
    if (recvAll(fd, &hello, sizeof(hello), deadline, "bootstrap hello") != symmarSuccess || hello.magic != kIdMagic ||
        hello.nonce != id.nonce) {
      close(fd);  // a stray or stale connection: not one of ours
      continue;
    }
    if (hello.nranks != nranks() || hello.rank <= 0 || hello.rank >= nranks() || peers_[hello.rank] >= 0) {
      res = fail(symmarInvalidArgument, "bootstrap: a rank joined as rank %d of %d, expected a unique rank of %d",
                 hello.rank, hello.nranks, nranks());
      close(fd);
      break;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    peers_[hello.rank] = fd;
    ++joined;
  }
  close(listener);
  if (res != symmarSuccess) {
    // Tell the ranks that did join why the comm will not form, instead of just hanging up.
    int32_t nack = -static_cast<int32_t>(res);
    for (int r = 1; r < nranks(); ++r) {
      if (peers_[r] >= 0) sendAll(peers_[r], &nack, sizeof(nack), Deadline::in(100), "bootstrap nack");
    }
    return res;
  }
  int32_t ack = nranks();
  for (int r = 1; r < nranks(); ++r) SYMMAR_CHECK(sendAll(peers_[r], &ack, sizeof(ack), deadline, "bootstrap ack"));
  return symmarSuccess;
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
  id.magic = kIdMagic;
  id.version = kIdVersion;
  id.addr = addr.s_addr;
  std::random_device rd;
  id.nonce = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ (static_cast<uint64_t>(getpid()) << 16);
  int fd = -1;
  SYMMAR_CHECK(listenOn(addr, 0, &fd, &id.port));
  id.checksum = idChecksum(id);
  {
    std::lock_guard<std::mutex> lock(g_listeners_mutex);
    g_listeners[id.nonce] = fd;
  }
  memset(raw->internal, 0, sizeof(raw->internal));
  memcpy(raw->internal, &id, sizeof(id));
  SYMMAR_INFO(kSubsysBoot, "unique id listens on %s:%u", inet_ntoa(addr), id.port);
  return symmarSuccess;
}

symmarResult_t createTcpBootstrap(const symmarUniqueId& raw, int rank, int nranks, int timeout_ms,
                                  std::unique_ptr<Bootstrap>* out) {
  IdPayload id{};
  SYMMAR_CHECK(decodeId(raw, &id));
  auto boot = std::make_unique<TcpBootstrap>(rank, nranks, timeout_ms);
  if (nranks > 1) SYMMAR_CHECK(rank == 0 ? boot->acceptAll(id) : boot->connectRoot(id));
  *out = std::move(boot);
  return symmarSuccess;
}

}  // namespace symmar
