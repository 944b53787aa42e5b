// Crashes found from outside: a heap that cannot be mapped, calls on a destroyed comm, destroy
// racing a call. Each now returns an error code with a message.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "fault/fault_util.h"
#include "mp/mp_util.h"

using fault::initCpu;
using fault::since;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// Bytes of address space this process uses now.
size_t addressSpaceBytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  size_t kb = 0;
  while (status >> key) {
    if (key == "VmSize:") {
      status >> kb;
      break;
    }
  }
  return kb * 1024;
}

}  // namespace

// Regression: a rank whose segment could not be mapped segfaulted in its destructor, and its
// peers waited out their timeout.
TEST(Crash, HeapThatCannotBeMappedFailsEveryRankCleanly) {
  if (kAddressSanitizer) GTEST_SKIP() << "address-space limits break AddressSanitizer's own shadow mappings";
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  auto status = mp::runForked(2, [&](int rank) {
    if (rank == 1) {  // room for everything but the 256 MiB heap segments
      // One reading for both limits: two could differ (the reading itself maps and unmaps), and
      // a soft limit above the hard one is refused.
      const rlim_t limit = addressSpaceBytes() + (96u << 20);
      rlimit lim{limit, limit};
      if (setrlimit(RLIMIT_AS, &lim) != 0) return 20;
    }
    auto start = std::chrono::steady_clock::now();
    symmarResult_t res = symmarSuccess;
    symmarComm_t comm = initCpu(id, 2, rank, 8000, &res);
    if (comm) {
      fprintf(stderr, "rank %d: init succeeded under the limit\n", rank);
      return 11;
    }
    if (res != symmarSystemError) {
      fprintf(stderr, "rank %d: %s: %s\n", rank, symmarGetErrorString(res), symmarGetLastError(nullptr));
      return 12;
    }
    return since(start) < 5.0 ? 0 : 13;  // well before the 8 s timeout
  });
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 0);
}

// Regression: symmarCommGetAsyncError on a destroyed comm segfaulted; symmarCommRank returned
// stale data.
TEST(Crash, EveryEntryPointRefusesADestroyedComm) {
  symmarComm_t comm = nullptr;
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  ASSERT_EQ(symmarCommInitAll(&comm, 1, nullptr, &cfg), symmarSuccess);
  ASSERT_EQ(symmarCommDestroy(comm), symmarSuccess);
  float x = 1;
  int i = 0;
  symmarResult_t async = symmarSuccess;
  symmarTopology_t topo;
  char text[64];
  void* p = nullptr;
  symmarAlgo_t algo;
  EXPECT_EQ(symmarAllReduce(&x, &x, 1, symmarFloat32, symmarSum, comm, nullptr), symmarInvalidUsage);
  EXPECT_NE(std::string(symmarGetLastError(comm)).find("not a live communicator"), std::string::npos);
  EXPECT_EQ(symmarAllReduceAlgo(&x, &x, 1, symmarFloat32, symmarSum, symmarAlgoOneShot, comm, nullptr),
            symmarInvalidUsage);
  EXPECT_EQ(symmarCommGetAsyncError(comm, &async), symmarInvalidUsage);
  EXPECT_EQ(symmarCommRank(comm, &i), symmarInvalidUsage);
  EXPECT_EQ(symmarCommCount(comm, &i), symmarInvalidUsage);
  EXPECT_EQ(symmarCommTopology(comm, &topo), symmarInvalidUsage);
  EXPECT_EQ(symmarCommDescribe(comm, text, sizeof(text)), symmarInvalidUsage);
  EXPECT_EQ(symmarCommPlan(comm, 1, symmarFloat32, symmarSum, &algo), symmarInvalidUsage);
  EXPECT_EQ(symmarMemAlloc(comm, 64, &p), symmarInvalidUsage);
  EXPECT_EQ(symmarMemFree(comm, &x), symmarInvalidUsage);
  EXPECT_EQ(symmarCommDestroy(comm), symmarInvalidUsage);
}

// Regression: destroy during another thread's allreduce freed the comm under the call. Now one of
// them is refused with symmarInvalidUsage; nothing crashes (run under AddressSanitizer in CI).
TEST(Crash, DestroyRacingCallsIsRefusedNotFreedUnderThem) {
  for (int round = 0; round < 20; ++round) {
    symmarComm_t comm = nullptr;
    symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
    cfg.device = SYMMAR_DEVICE_CPU;
    ASSERT_EQ(symmarCommInitAll(&comm, 1, nullptr, &cfg), symmarSuccess);
    std::atomic<bool> go{false};
    std::atomic<int> bad{0};
    std::thread caller([&] {
      std::vector<float> buf(4096, 1.0f);
      while (!go.load()) {
      }
      for (int i = 0; i < 2000; ++i) {
        symmarResult_t res =
            symmarAllReduce(buf.data(), buf.data(), buf.size(), symmarFloat32, symmarSum, comm, nullptr);
        if (res != symmarSuccess && res != symmarInvalidUsage) bad.fetch_add(1);
        int rank = -1;
        res = symmarCommRank(comm, &rank);
        if (res == symmarSuccess && rank != 0) bad.fetch_add(1);
      }
    });
    go.store(true);
    symmarResult_t res = symmarInvalidUsage;
    while (res == symmarInvalidUsage) res = symmarCommDestroy(comm);  // refused while a call runs
    caller.join();
    EXPECT_EQ(res, symmarSuccess);
    EXPECT_EQ(bad.load(), 0);
  }
}
