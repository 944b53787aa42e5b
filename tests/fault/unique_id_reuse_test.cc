// A unique id forms one comm: processes that reuse an id (passed on, or inherited through fork)
// never form a second comm that would pair their calls with strangers'.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

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
