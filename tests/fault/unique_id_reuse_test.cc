// A unique id forms one comm: processes that reuse an id (passed on, or inherited through fork)
// never form a second comm that would pair their calls with strangers'.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "bootstrap/wire.h"
#include "fault/fault_util.h"
#include "mp/mp_util.h"

using fault::initCpu;
using fault::since;
using fault::sleepMs;

// Data parallel x tensor parallel with one id for both tensor-parallel groups: processes 0 and 2
// are rank 0, processes 1 and 3 rank 1. At most one comm may form from the id; every other
// process gets symmarInvalidUsage quickly; a comm that forms computes its own members' sum.
void sharedIdCase(bool id_made_before_fork) {
  constexpr int kProcs = 4;
  mp::SharedWords shared(64);  // [0..15] the id, [16] id ready, [20+p] result code, [30+p] sum, [40+p] ms
  symmarUniqueId parent_id;
  if (id_made_before_fork) {
    ASSERT_EQ(symmarGetUniqueId(&parent_id), symmarSuccess);
    memcpy(&shared[0], &parent_id, sizeof(parent_id));
    shared[16] = 1;
  }
  mp::runForked(kProcs, [&](int proc) {
    if (proc == 0 && !id_made_before_fork) {
      symmarUniqueId id;
      if (symmarGetUniqueId(&id) != symmarSuccess) return 1;
      memcpy(&shared[0], &id, sizeof(id));
      __atomic_store_n(&shared[16], 1, __ATOMIC_RELEASE);
    }
    while (!__atomic_load_n(&shared[16], __ATOMIC_ACQUIRE)) sleepMs(1);
    symmarUniqueId id;
    memcpy(&id, &shared[0], sizeof(id));
    if (proc == 2) sleepMs(20);  // the second root comes a little later, as in a real launch
    auto start = std::chrono::steady_clock::now();
    symmarResult_t res = symmarSuccess;
    symmarComm_t comm = initCpu(id, 2, proc % 2, 5000, &res);
    shared[40 + proc] = static_cast<uint64_t>(since(start) * 1000);
    shared[20 + proc] = static_cast<uint64_t>(res);
    __atomic_fetch_add(&shared[50], 1, __ATOMIC_ACQ_REL);
    if (!comm) return 0;
    float x = static_cast<float>(1 << proc);
    if (symmarAllReduce(&x, &x, 1, symmarFloat32, symmarSum, comm, nullptr) == symmarSuccess) {
      shared[30 + proc] = static_cast<uint64_t>(x);
    }
    // Comms live on while the others try (engines keep theirs for the life of the server).
    for (int i = 0; i < 10000 && __atomic_load_n(&shared[50], __ATOMIC_ACQUIRE) < kProcs; ++i) sleepMs(1);
    symmarCommDestroy(comm);
    return 0;
  });
  int roots = 0, formed = 0;
  uint64_t expected_sum = 0;
  for (int p = 0; p < kProcs; ++p) {
    if (shared[20 + p] == symmarSuccess) {
      ++formed;
      roots += p % 2 == 0;
      expected_sum += 1u << p;
    } else {
      EXPECT_EQ(shared[20 + p], static_cast<uint64_t>(symmarInvalidUsage)) << "process " << p;
      EXPECT_LT(shared[40 + p], 4000u) << "process " << p << " failed only after its timeout";
    }
  }
  EXPECT_LE(roots, 1) << "two comms formed from one id";
  EXPECT_TRUE(formed == 0 || formed == 2) << formed << " processes formed a comm";
  for (int p = 0; p < kProcs; ++p) {
    if (shared[20 + p] == symmarSuccess) {
      EXPECT_EQ(shared[30 + p], expected_sum) << "process " << p;
    }
  }
}

TEST(SilentWrong, OneIdNeverFormsTwoCommsWhenPassedToOtherProcesses) { sharedIdCase(false); }
TEST(SilentWrong, OneIdNeverFormsTwoCommsWhenInheritedThroughFork) { sharedIdCase(true); }

namespace {

/// A TCP connection to the id's rank 0, retried until it listens; -1 after timeout_ms.
int connectToRoot(const symmar::wire::IdPayload& id, int timeout_ms) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(id.port);
  sa.sin_addr.s_addr = id.addr;
  for (int waited = 0; waited < timeout_ms; waited += 10) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) return fd;
    close(fd);
    sleepMs(10);
  }
  return -1;
}

/// Reads rank 0's answer; false when none came within timeout_ms.
bool readAck(int fd, int timeout_ms, symmar::wire::Ack* ack) {
  size_t got = 0;
  while (got < sizeof(*ack)) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    ssize_t n = recv(fd, reinterpret_cast<char*>(ack) + got, sizeof(*ack) - got, 0);
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

// Two processes join as rank 1 and rank 0 reads both hellos in one step (it is stopped while they
// arrive). The first completes the comm; the second is a latecomer, refused as such. Before, the
// pair failed the comm, and a second rank 0 sharing the id through fork could then claim the id
// and wait out its whole timeout.
TEST(SilentWrong, TwoHellosForOneRankReadTogetherFormTheCommWithTheFirst) {
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  symmar::wire::IdPayload payload;
  memcpy(&payload, &id, sizeof(payload));
  fflush(stdout);
  fflush(stderr);
  const pid_t root = fork();
  if (root == 0) {
    symmarComm_t comm = initCpu(id, 2, 0, 10000);
    if (comm) symmarCommDestroy(comm);
    _exit(0);
  }
  int fds[2];
  for (int& fd : fds) fd = connectToRoot(payload, 10000);
  sleepMs(300);  // rank 0 accepts both connections; no hello has come yet
  kill(root, SIGSTOP);
  for (int fd : fds) {
    if (fd < 0) continue;
    const symmar::wire::Hello hello{symmar::wire::kIdMagic, symmar::wire::kIdVersion, 0, 1, 2, payload.nonce};
    EXPECT_EQ(send(fd, &hello, sizeof(hello), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(hello)));
  }
  sleepMs(50);
  kill(root, SIGCONT);
  int accepted = 0, latecomers = 0;
  for (int fd : fds) {
    symmar::wire::Ack ack{};
    if (fd >= 0 && readAck(fd, 5000, &ack)) {
      accepted += ack.result == symmarSuccess;
      latecomers += ack.result == symmarInvalidUsage && ack.reason == symmar::wire::kAckComplete;
    }
  }
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
  int status = 0;
  waitpid(root, &status, 0);
  EXPECT_GE(fds[0], 0);
  EXPECT_GE(fds[1], 0);
  EXPECT_EQ(accepted, 1) << "the first hello for rank 1 must complete the comm";
  EXPECT_EQ(latecomers, 1) << "the second must be refused as a latecomer";
}
