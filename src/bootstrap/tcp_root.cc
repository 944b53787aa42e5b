#include "bootstrap/tcp_root.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "bootstrap/socket.h"
#include "core/error.h"
#include "core/log.h"

namespace symmar {
namespace {

/// A connection gets this long to send its hello; then it is dropped (an idle or foreign client
/// must not hold up the ranks that do join).
constexpr int kHelloMs = 2000;

struct Arrival {
  int fd;
  wire::Hello hello;
};

/// The abstract Unix socket name that claims the id with this nonce on this host; returns its length.
socklen_t claimAddress(uint64_t nonce, sockaddr_un* sa) {
  *sa = sockaddr_un{};
  sa->sun_family = AF_UNIX;
  int n =
      snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "symmar-id-%016llx", static_cast<unsigned long long>(nonce));
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

}  // namespace

bool idClaimed(uint64_t nonce) {
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return true;  // cannot tell: the caller's wait stays bounded by its timeout
  sockaddr_un sa;
  const socklen_t len = claimAddress(nonce, &sa);
  // Connecting a datagram socket only names its peer: nothing is sent, no name is taken.
  const bool held = connect(fd, reinterpret_cast<sockaddr*>(&sa), len) == 0 || errno != ECONNREFUSED;
  close(fd);
  return held;
}

/// Connections accepted but not yet judged, read together with the listener in one poll.
class HelloReader {
 public:
  explicit HelloReader(int listener, int hello_ms) : listener_(listener), hello_ms_(hello_ms) {}
  ~HelloReader() {
    for (Pending& p : pending_) close(p.fd);
  }

  /// Waits up to wait_ms for activity; appends complete hellos to *done (the caller owns those
  /// fds). Returns true when extra_fd (if >= 0) became readable.
  bool step(int wait_ms, int extra_fd, std::vector<Arrival>* done) {
    std::vector<pollfd> fds;
    fds.push_back(pollfd{listener_, POLLIN, 0});
    if (extra_fd >= 0) fds.push_back(pollfd{extra_fd, POLLIN, 0});
    const size_t first = fds.size();
    for (const Pending& p : pending_) fds.push_back(pollfd{p.fd, POLLIN, 0});
    const auto now = Clock::now();
    for (const Pending& p : pending_) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(p.until - now).count();
      wait_ms = static_cast<int>(std::max<long long>(0, std::min<long long>(wait_ms, left + 1)));
    }
    if (poll(fds.data(), fds.size(), wait_ms) < 0) return false;
    bool extra = extra_fd >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR));
    std::vector<Pending> still;
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending& p = pending_[i];
      bool keep = true;
      if (fds[first + i].revents) {
        ssize_t n = recv(p.fd, reinterpret_cast<char*>(&p.hello) + p.got, sizeof(p.hello) - p.got, MSG_DONTWAIT);
        if (n > 0) p.got += static_cast<size_t>(n);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) keep = false;
        if (p.got == sizeof(p.hello)) {
          done->push_back(Arrival{p.fd, p.hello});
          continue;
        }
      }
      if (keep && Clock::now() >= p.until) keep = false;
      if (keep) {
        still.push_back(p);
      } else {
        close(p.fd);
      }
    }
    pending_.swap(still);
    if (fds[0].revents & POLLIN) {
      int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) pending_.push_back(Pending{fd, Clock::now() + std::chrono::milliseconds(hello_ms_), {}, 0});
    }
    return extra;
  }

 private:
  struct Pending {
    int fd;
    Clock::time_point until;
    wire::Hello hello;
    size_t got;
  };
  int listener_;
  int hello_ms_;
  std::vector<Pending> pending_;
};

namespace {

void sendAck(int fd, symmarResult_t res, wire::AckReason reason, int nranks, int timeout_ms) {
  wire::Ack ack = wire::makeAck(res, reason, nranks);
  sendAll(fd, &ack, sizeof(ack), Deadline::in(timeout_ms), "bootstrap ack");
}

wire::AckReason refusal(wire::HelloVerdict v) {
  switch (v) {
    case wire::HelloVerdict::kDuplicate:
      return wire::kAckDuplicate;
    case wire::HelloVerdict::kWrongSize:
      return wire::kAckWrongSize;
    default:
      return wire::kAckBadRank;
  }
}

/// Answers a hello that came after the comm formed (strays get no word): ids are single-use.
void refuseLatecomer(const Arrival& a, uint64_t nonce, int nranks) {
  const std::vector<bool> all_taken(static_cast<size_t>(nranks), true);
  if (wire::judgeHello(a.hello, nonce, nranks, all_taken) != wire::HelloVerdict::kStray) {
    SYMMAR_WARN(kSubsysBoot, "bootstrap: refused rank %d: %s", a.hello.rank, wire::ackReasonText(wire::kAckComplete));
    sendAck(a.fd, symmarInvalidUsage, wire::kAckComplete, nranks, 100);
  }
  close(a.fd);
}

}  // namespace

RootListener::RootListener() = default;

RootListener::~RootListener() {
  if (thread_.joinable()) {
    char c = 1;
    ssize_t n = write(wake_[1], &c, 1);
    (void)n;
    thread_.join();
  }
  reader_.reset();
  for (int& fd : wake_) closeFd(&fd);
  closeFd(&listener_);
  closeFd(&claim_);
}

symmarResult_t RootListener::claim(uint64_t nonce) {
  claim_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (claim_ < 0) return fail(symmarSystemError, "bootstrap: socket failed: %s", strerror(errno));
  sockaddr_un sa;
  const socklen_t len = claimAddress(nonce, &sa);
  if (bind(claim_, reinterpret_cast<sockaddr*>(&sa), len) == 0) return symmarSuccess;
  const int err = errno;
  closeFd(&claim_);
  if (err == EADDRINUSE) {
    return fail(symmarInvalidUsage,
                "bootstrap: another rank 0 on this host already serves a comm with this unique id: "
                "a unique id serves exactly one comm (make one id per comm)");
  }
  return fail(symmarSystemError, "bootstrap: claiming the unique id failed: %s", strerror(err));
}

symmarResult_t RootListener::acceptAll(int listener, uint64_t nonce, int nranks, int timeout_ms,
                                       std::vector<int>* peers) {
  listener_ = listener;
  Deadline deadline = Deadline::in(timeout_ms);
  peers->assign(nranks, -1);
  std::vector<bool> taken(nranks, false);
  taken[0] = true;
  symmarResult_t res = symmarSuccess;
  wire::AckReason reason = wire::kAckOk;
  int joined = 1;
  reader_ = std::make_unique<HelloReader>(listener_, std::min(kHelloMs, timeout_ms));
  {
    HelloReader& reader = *reader_;
    while (joined < nranks && res == symmarSuccess) {
      if (deadline.passed()) {
        res = fail(symmarTimeout, "bootstrap: only %d of %d ranks joined within %d ms", joined, nranks, timeout_ms);
        reason = wire::kAckNotAllJoined;
        break;
      }
      std::vector<Arrival> arrivals;
      reader.step(std::min(deadline.leftMs(), 100), -1, &arrivals);
      for (const Arrival& a : arrivals) {
        // Hellos read in one step keep the order they were accepted in: the ones after the hello
        // that completed the comm are latecomers, refused as serve() refuses them, so the outcome
        // does not depend on how the arrivals were batched.
        if (joined == nranks) {
          refuseLatecomer(a, nonce, nranks);
          continue;
        }
        const wire::HelloVerdict v = wire::judgeHello(a.hello, nonce, nranks, taken);
        if (v == wire::HelloVerdict::kStray || res != symmarSuccess) {
          if (v != wire::HelloVerdict::kStray) sendAck(a.fd, symmarInvalidUsage, reason, nranks, 100);
          close(a.fd);
          continue;
        }
        if (v == wire::HelloVerdict::kAccept) {
          int one = 1;
          setsockopt(a.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          (*peers)[a.hello.rank] = a.fd;
          taken[a.hello.rank] = true;
          ++joined;
          continue;
        }
        reason = refusal(v);
        res = fail(symmarInvalidUsage, "bootstrap: a process joined as rank %d of %d: %s", a.hello.rank, a.hello.nranks,
                   wire::ackReasonText(reason));
        sendAck(a.fd, res, reason, nranks, 100);
        close(a.fd);
      }
    }
  }
  if (res != symmarSuccess) {
    // Every rank that did join learns why the comm will not form, instead of just hanging up.
    for (int r = 1; r < nranks; ++r) {
      if ((*peers)[r] >= 0) sendAck((*peers)[r], res, reason, nranks, 100);
      closeFd(&(*peers)[r]);
    }
    reader_.reset();
    closeFd(&listener_);
    return res;
  }
  for (int r = 1; r < nranks; ++r) {
    wire::Ack ack = wire::makeAck(symmarSuccess, wire::kAckOk, nranks);
    SYMMAR_CHECK(sendAll((*peers)[r], &ack, sizeof(ack), deadline, "bootstrap ack"));
  }
  if (pipe2(wake_, O_CLOEXEC) != 0) {
    SYMMAR_WARN(kSubsysBoot, "bootstrap: no pipe for the listener service (%s); latecomers will time out",
                strerror(errno));
    return symmarSuccess;  // the listener stays open: a second rank 0 still cannot take the id
  }
  thread_ = std::thread([this, nonce, nranks] { serve(nonce, nranks); });
  return symmarSuccess;
}

void RootListener::serve(uint64_t nonce, int nranks) {
  HelloReader& reader = *reader_;  // it may hold latecomers that connected during formation
  for (;;) {
    std::vector<Arrival> arrivals;
    if (reader.step(1000, wake_[0], &arrivals)) break;
    for (const Arrival& a : arrivals) refuseLatecomer(a, nonce, nranks);
  }
}

}  // namespace symmar
