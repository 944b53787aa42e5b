// The unique-id bootstrap's wire: ids, hellos and acks are judged before use; a rank 0 that sends
// garbage (INT32_MIN, unknown codes) gets a clear error, never undefined behaviour; unused ids do
// not pile up listening sockets.
#include "bootstrap/wire.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "symmar/symmar.h"

using namespace symmar;
using namespace symmar::wire;

namespace {

int openFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

Hello goodHello(int rank, int nranks, uint64_t nonce) { return Hello{kIdMagic, kIdVersion, 0, rank, nranks, nonce}; }

/// A listening socket on loopback and an id naming it (a fake rank 0 the test controls).
struct FakeRoot {
  int listener = -1;
  symmarUniqueId id{};
  FakeRoot() {
    listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    EXPECT_EQ(listen(listener, 8), 0);
    getsockname(listener, reinterpret_cast<sockaddr*>(&sa), &len);
    IdPayload p{};
    p.port = ntohs(sa.sin_port);
    p.addr = sa.sin_addr.s_addr;
    p.nonce = 0x1234;
    encodeId(p, &id);
  }
  ~FakeRoot() { close(listener); }
};

/// Rank 1 joins the fake root, which answers its hello with ack.
symmarResult_t joinWithAck(const Ack& ack, std::string* error) {
  FakeRoot root;
  std::thread server([&] {
    int fd = accept(root.listener, nullptr, nullptr);
    Hello h{};
    EXPECT_EQ(recv(fd, &h, sizeof(h), MSG_WAITALL), static_cast<ssize_t>(sizeof(h)));
    EXPECT_EQ(send(fd, &ack, sizeof(ack), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(ack)));
    close(fd);
  });
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  cfg.timeout_ms = 3000;
  symmarComm_t comm = nullptr;
  symmarResult_t res = symmarCommInitRank(&comm, 2, root.id, 1, &cfg);
  *error = symmarGetLastError(nullptr);
  server.join();
  if (comm) symmarCommDestroy(comm);
  return res;
}

}  // namespace

TEST(Wire, IdRoundTripAndEveryCorruptionIsNamed) {
  IdPayload p{};
  p.port = 4242;
  p.addr = htonl(INADDR_LOOPBACK);
  p.nonce = 99;
  symmarUniqueId raw;
  encodeId(p, &raw);
  IdPayload back{};
  const char* why = "unset";
  ASSERT_EQ(decodeId(raw, &back, &why), symmarSuccess);
  EXPECT_EQ(why, nullptr);
  EXPECT_EQ(back.port, 4242);
  EXPECT_EQ(back.nonce, 99u);
  for (size_t byte : {size_t{0}, size_t{5}, size_t{17}, sizeof(IdPayload), size_t{SYMMAR_UNIQUE_ID_BYTES - 1}}) {
    symmarUniqueId bad = raw;
    bad.internal[byte] ^= 0x40;
    EXPECT_EQ(decodeId(bad, &back, &why), symmarInvalidArgument) << "byte " << byte;
    EXPECT_NE(why, nullptr);
  }
}

TEST(Wire, HelloVerdicts) {
  const std::vector<bool> taken = {true, false, true, false};
  EXPECT_EQ(judgeHello(goodHello(1, 4, 7), 7, 4, taken), HelloVerdict::kAccept);
  EXPECT_EQ(judgeHello(goodHello(3, 4, 7), 7, 4, taken), HelloVerdict::kAccept);
  EXPECT_EQ(judgeHello(goodHello(2, 4, 7), 7, 4, taken), HelloVerdict::kDuplicate);
  EXPECT_EQ(judgeHello(goodHello(0, 4, 7), 7, 4, taken), HelloVerdict::kBadRank);
  EXPECT_EQ(judgeHello(goodHello(INT32_MIN, 4, 7), 7, 4, taken), HelloVerdict::kBadRank);
  EXPECT_EQ(judgeHello(goodHello(1, 3, 7), 7, 4, taken), HelloVerdict::kWrongSize);
  EXPECT_EQ(judgeHello(goodHello(1, 4, 8), 7, 4, taken), HelloVerdict::kStray);  // another id
  Hello old = goodHello(1, 4, 7);
  old.version = 1;
  EXPECT_EQ(judgeHello(old, 7, 4, taken), HelloVerdict::kStray);
  EXPECT_EQ(judgeHello(goodHello(3, 4, 7), 7, 4, std::vector<bool>(2, false)), HelloVerdict::kDuplicate);
}

TEST(Wire, AckVerdicts) {
  std::string why;
  EXPECT_EQ(judgeAck(makeAck(symmarSuccess, kAckOk, 4), 4, &why), symmarSuccess);
  EXPECT_EQ(judgeAck(makeAck(symmarSuccess, kAckOk, 3), 4, &why), symmarSystemError);
  EXPECT_EQ(judgeAck(makeAck(symmarInvalidUsage, kAckDuplicate, 4), 4, &why), symmarInvalidUsage);
  EXPECT_NE(why.find("same rank"), std::string::npos) << why;
  EXPECT_EQ(judgeAck(makeAck(symmarTimeout, kAckNotAllJoined, 4), 4, &why), symmarTimeout);
  for (int32_t result : {INT32_MIN, -1, 0, static_cast<int32_t>(symmarNumResults), INT32_MAX}) {
    Ack a{kIdMagic, result, kAckDuplicate, 4};
    if (result == 0) a.reason = kAckNumReasons;  // success with an unknown reason is malformed too
    EXPECT_EQ(judgeAck(a, 4, &why), symmarSystemError) << result;
    EXPECT_NE(why.find("invalid"), std::string::npos);
  }
  EXPECT_EQ(judgeAck(Ack{0, 0, 0, 4}, 4, &why), symmarSystemError);
}

// Regression: rank 0 answering INT32_MIN made the joining rank negate it (undefined behaviour).
TEST(Wire, RankGetsAClearErrorForAGarbageAck) {
  std::string error;
  EXPECT_EQ(joinWithAck(Ack{kIdMagic, INT32_MIN, INT32_MIN, 2}, &error), symmarSystemError);
  EXPECT_NE(error.find("invalid result"), std::string::npos) << error;
  EXPECT_EQ(joinWithAck(makeAck(symmarInvalidUsage, kAckComplete, 2), &error), symmarInvalidUsage);
  EXPECT_NE(error.find("already formed"), std::string::npos) << error;
}

// Regression: every unused id kept a listening socket open for the life of the process.
TEST(Wire, UnusedIdsDoNotAccumulateSockets) {
  const int before = openFds();
  for (int i = 0; i < 300; ++i) {
    symmarUniqueId id;
    ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  }
  EXPECT_LE(openFds() - before, 64);
}
