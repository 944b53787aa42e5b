// Hostile local processes: one that sprays forged descriptors at every symmar fd-passing socket it
// sees in /proc/net/unix (same uid and another uid), and clients that connect to rank 0's port and
// say nothing, half a hello, or HTTP. Comms still form promptly and every sum is right.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "fault/fault_util.h"
#include "mp/mp_util.h"

using fault::checkedAllReduce;
using fault::initCpu;
using fault::since;
using fault::sleepMs;

namespace {

// Sends a datagram carrying fd to the abstract socket name (without the leading '@').
void sendForged(int sock, const std::string& name, int fd, const void* payload, size_t bytes) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path + 1, name.data(), std::min(name.size(), sizeof(sa.sun_path) - 2));
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  iovec iov{const_cast<void*>(payload), bytes};
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
  sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
}

// The attacker: until *stop, offers its own memory (filled with 0x7f bytes) as every rank's
// segment, to every symmar socket, in the formats a naive receiver would take.
[[noreturn]] void attack(uint64_t* stop, bool other_uid) {
  if (other_uid && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(2);
  int mem = memfd_create("attacker", MFD_CLOEXEC);
  if (mem < 0 || ftruncate(mem, 1 << 30) != 0) _exit(3);
  void* p = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
  if (p != MAP_FAILED) memset(p, 0x7f, 1 << 20);
  int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  while (!__atomic_load_n(stop, __ATOMIC_ACQUIRE)) {
    std::ifstream table("/proc/net/unix");
    std::string line;
    while (std::getline(table, line)) {
      size_t at = line.find("@symmar-");
      if (at == std::string::npos || line.find("symmar-id-") != std::string::npos) continue;
      std::string name = line.substr(at + 1);
      while (!name.empty() && isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
      for (int32_t from = 0; from < 4; ++from) {
        sendForged(sock, name, mem, &from, sizeof(from));  // a bare rank number
        struct {
          uint32_t magic;
          int32_t from;
          uint64_t key[2];
        } forged{0x53464450, from, {0, 0}};
        sendForged(sock, name, mem, &forged, sizeof(forged));  // the real layout with a guessed key
      }
    }
  }
  _exit(0);
}

void hostileFdCase(bool other_uid) {
  mp::SharedWords stop(1);
  pid_t attacker = fork();
  if (attacker == 0) attack(&stop[0], other_uid);
  ASSERT_GT(attacker, 0);
  int failures = 0;
  for (int cycle = 0; cycle < 12; ++cycle) {
    symmarUniqueId id;
    ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
    auto status = mp::runForked(2, [&](int rank) {
      symmarComm_t comm = initCpu(id, 2, rank, 5000);
      if (!comm) return 10;
      bool wrong = false;
      for (int it = 0; it < 4; ++it) {
        symmarAlgo_t algo = it % 2 ? symmarAlgoTwoShot : symmarAlgoOneShot;
        if (checkedAllReduce(comm, rank, 2, 4096, it, &wrong, algo) != symmarSuccess || wrong) return 11;
      }
      return symmarCommDestroy(comm) == symmarSuccess ? 0 : 12;
    });
    failures += status[0] != 0 || status[1] != 0;
  }
  __atomic_store_n(&stop[0], 1, __ATOMIC_RELEASE);
  int st = 0;
  waitpid(attacker, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the attacker could not run";
  EXPECT_EQ(failures, 0);
}

}  // namespace

TEST(Hostile, ForgedDescriptorsFromTheSameUserAreIgnored) { hostileFdCase(false); }

TEST(Hostile, ForgedDescriptorsFromAnotherUserAreIgnored) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to run the attacker under another uid";
  hostileFdCase(true);
}

namespace {

// Opens a TCP connection to the port named in an id (the layout of a version-2 id: port at
// bytes 6-7 in host order, address at 8-11 in network order).
int connectToId(const symmarUniqueId& id) {
  uint16_t port;
  uint32_t addr;
  memcpy(&port, id.internal + 6, sizeof(port));
  memcpy(&addr, id.internal + 8, sizeof(addr));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = addr;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

// Regression: rank 0 read hellos one connection at a time with the whole init timeout, so one
// idle connection stalled the comm until it failed. The id's port is only reserved until rank 0
// listens, so the junk connects (from process 3) once rank 0 is up, before ranks 1 and 2 join.
TEST(Hostile, IdleAndForeignConnectionsDoNotStallCommCreation) {
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  mp::SharedWords secs(4);
  auto status = mp::runForked(4, [&](int rank) {
    if (rank == 3) {
      std::vector<int> junk;
      auto start = std::chrono::steady_clock::now();
      while (junk.size() < 3 && since(start) < 5) {
        int fd = connectToId(id);
        if (fd >= 0) junk.push_back(fd);
        else sleepMs(5);
      }
      if (junk.size() < 3) return 20;
      const char half[] = "SYMM\x02";
      send(junk[1], half, 5, MSG_NOSIGNAL);  // half a hello; junk[0] says nothing
      const char http[] = "GET / HTTP/1.0\r\n\r\n";
      send(junk[2], http, sizeof(http) - 1, MSG_NOSIGNAL);  // another protocol
      sleepMs(6000);  // held open while the ranks form the comm
      for (int fd : junk) close(fd);
      return 0;
    }
    if (rank != 0) sleepMs(300);  // the junk is queued before the real ranks arrive
    auto start = std::chrono::steady_clock::now();
    symmarComm_t comm = initCpu(id, 3, rank, 10000);
    secs[rank] = static_cast<uint64_t>(since(start) * 1000);
    if (!comm) return 10;
    bool wrong = false;
    if (checkedAllReduce(comm, rank, 3, 1000, 0, &wrong) != symmarSuccess || wrong) return 11;
    return symmarCommDestroy(comm) == symmarSuccess ? 0 : 12;
  });
  EXPECT_EQ(status[3], 0) << "the junk process could not connect to rank 0";
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(status[r], 0) << "rank " << r;
    EXPECT_LT(secs[r], 4000u) << "rank " << r << " took " << secs[r] << " ms to join";
  }
}
