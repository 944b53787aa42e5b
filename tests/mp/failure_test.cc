// A rank that dies: the others return symmarTimeout or symmarPeerFailure within the timeout plus a
// small margin, the comm stays failed (symmarInvalidUsage with the cause), and destroy works.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "mp/mp_util.h"

namespace {

constexpr int kTimeoutMs = 3000;

// Survivors: run allreduces until one fails, then check the failure semantics. Returns 0 if right.
int survivor(symmarComm_t comm, int rank) {
  std::vector<float> buf(1 << 20, 1.0f);
  auto start = std::chrono::steady_clock::now();
  symmarResult_t res = symmarSuccess;
  for (int i = 0; i < 100000 && res == symmarSuccess; ++i) {
    res = symmarAllReduce(buf.data(), buf.data(), buf.size(), symmarFloat32, symmarSum, comm, nullptr);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int bad = 0;
  if (res != symmarTimeout && res != symmarPeerFailure) {
    fprintf(stderr, "rank %d: expected timeout or peer failure, got %s\n", rank, symmarGetErrorString(res));
    ++bad;
  }
  std::string cause = symmarGetLastError(comm);
  if (secs > kTimeoutMs / 1000.0 + 3.0) {
    fprintf(stderr, "rank %d: failure took %.1f s\n", rank, secs);
    ++bad;
  }
  float x = 1;
  if (symmarAllReduce(&x, &x, 1, symmarFloat32, symmarSum, comm, nullptr) != symmarInvalidUsage) ++bad;
  if (std::string(symmarGetLastError(comm)).find(cause) == std::string::npos) {
    fprintf(stderr, "rank %d: later error lacks the cause '%s': %s\n", rank, cause.c_str(), symmarGetLastError(comm));
    ++bad;
  }
  symmarResult_t async = symmarSuccess;
  if (symmarCommGetAsyncError(comm, &async) != symmarSuccess || async != res) ++bad;
  if (symmarCommDestroy(comm) != symmarSuccess) ++bad;
  return bad;
}

symmarComm_t init(const symmarUniqueId& id, int world, int rank) {
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  cfg.timeout_ms = kTimeoutMs;
  cfg.staging_bytes = 256 << 10;
  symmarComm_t comm = nullptr;
  if (symmarCommInitRank(&comm, world, id, rank, &cfg) != symmarSuccess) return nullptr;
  return comm;
}

}  // namespace

TEST(Failure, RankKilledBeforeACollective) {
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  auto status = mp::runForked(3, [&](int rank) {
    symmarComm_t comm = init(id, 3, rank);
    if (!comm) return 1;
    if (rank == 2) raise(SIGKILL);
    return survivor(comm, rank);
  });
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 0);
  EXPECT_EQ(status[2], -SIGKILL);
}

TEST(Failure, RankKilledDuringCollectives) {
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  auto status = mp::runForked(4, [&](int rank) {
    symmarComm_t comm = init(id, 4, rank);
    if (!comm) return 1;
    if (rank == 3) {
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        raise(SIGKILL);
      }).detach();
    }
    return survivor(comm, rank);
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
  EXPECT_EQ(status[3], -SIGKILL);
}

TEST(Failure, RankThatStopsCallingGivesTimeout) {
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  auto status = mp::runForked(2, [&](int rank) {
    symmarComm_t comm = init(id, 2, rank);
    if (!comm) return 1;
    if (rank == 1) {  // alive but silent past the others' timeout, then leaves cleanly
      std::this_thread::sleep_for(std::chrono::milliseconds(kTimeoutMs + 2500));
      return static_cast<int>(symmarCommDestroy(comm) != symmarSuccess);
    }
    float x = 1;
    auto start = std::chrono::steady_clock::now();
    symmarResult_t res = symmarAllReduce(&x, &x, 1, symmarFloat32, symmarSum, comm, nullptr);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int bad = res != symmarTimeout;
    bad += secs < kTimeoutMs / 1000.0 - 0.1 || secs > kTimeoutMs / 1000.0 + 2.0;
    bad += symmarCommDestroy(comm) != symmarSuccess;
    return bad;
  });
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 0);
}
