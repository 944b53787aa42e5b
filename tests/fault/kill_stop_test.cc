// Ranks that die, freeze or leave in the middle of a loop of allreduces, at worlds 2 and 4, small
// (one-shot) and large (two-shot, several chunks) messages. The survivors return symmarTimeout or
// symmarPeerFailure within the timeout plus a margin, and no rank ever returns success with a
// wrong sum: every result is checked against an exact reference.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "fault/fault_util.h"
#include "mp/mp_util.h"

using fault::checkedAllReduce;
using fault::initCpu;
using fault::since;

namespace {

constexpr int kTimeoutMs = 1500;
constexpr int kFaultIteration = 15;

enum class Fault { kKill, kStop, kDestroy };

struct FaultCase {
  int world;
  size_t count;
  Fault fault;
};

void PrintTo(const FaultCase& c, std::ostream* os) {
  *os << "world " << c.world << ", count " << c.count << ", fault " << static_cast<int>(c.fault);
}

std::string caseName(const testing::TestParamInfo<FaultCase>& info) {
  const char* f[] = {"Kill", "Stop", "Destroy"};
  return std::string(f[static_cast<int>(info.param.fault)]) + "World" + std::to_string(info.param.world) +
         (info.param.count > 10000 ? "Large" : "Small");
}

class MidLoop : public testing::TestWithParam<FaultCase> {};

TEST_P(MidLoop, SurvivorsFailPromptlyAndNeverWrong) {
  const FaultCase c = GetParam();
  const int victim = c.world - 1;
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  mp::SharedWords shared(4);  // [0] victim pid, [1] survivors finished
  auto status = mp::runForked(c.world, [&](int rank) {
    symmarComm_t comm = initCpu(id, c.world, rank, kTimeoutMs);
    if (!comm) return 10;
    if (rank == victim) shared[0] = static_cast<uint64_t>(getpid());
    for (int it = 0; it < 100000; ++it) {
      if (rank == victim && it == kFaultIteration) {
        if (c.fault == Fault::kKill) raise(SIGKILL);
        if (c.fault == Fault::kStop) raise(SIGSTOP);  // a survivor kills it once they are done
        return symmarCommDestroy(comm) == symmarSuccess ? 0 : 20;
      }
      bool wrong = false;
      auto start = std::chrono::steady_clock::now();
      symmarResult_t res = checkedAllReduce(comm, rank, c.world, c.count, it, &wrong);
      if (wrong) return 30;
      if (res == symmarSuccess) continue;
      const double secs = since(start);
      int bad = 0;
      if (res != symmarTimeout && res != symmarPeerFailure) {
        fprintf(stderr, "rank %d: %s: %s\n", rank, symmarGetErrorString(res), symmarGetLastError(comm));
        ++bad;
      }
      if (it < kFaultIteration) {
        fprintf(stderr, "rank %d: failed at iteration %d, before the fault\n", rank, it);
        ++bad;
      }
      if (secs > kTimeoutMs / 1000.0 + 2.0) {
        fprintf(stderr, "rank %d: the failing call took %.2f s\n", rank, secs);
        ++bad;
      }
      // The comm stays failed: later calls are refused, never run on stale state.
      if (checkedAllReduce(comm, rank, c.world, 8, it + 1, &wrong) != symmarInvalidUsage || wrong) ++bad;
      if (symmarCommDestroy(comm) != symmarSuccess) ++bad;
      if (__atomic_add_fetch(&shared[1], 1, __ATOMIC_ACQ_REL) == static_cast<uint64_t>(c.world - 1) &&
          c.fault == Fault::kStop) {
        kill(static_cast<pid_t>(shared[0]), SIGKILL);
      }
      return bad;
    }
    return 31;  // never noticed the fault
  });
  for (int r = 0; r < victim; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
  EXPECT_EQ(status[victim], c.fault == Fault::kDestroy ? 0 : -SIGKILL);
}

std::vector<FaultCase> allCases() {
  std::vector<FaultCase> cases;
  for (Fault f : {Fault::kKill, Fault::kStop, Fault::kDestroy}) {
    for (int world : {2, 4}) {
      for (size_t count : {size_t{1000}, size_t{1} << 18}) cases.push_back({world, count, f});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Faults, MidLoop, testing::ValuesIn(allCases()), caseName);

}  // namespace

TEST(Init, RankMissingAtInitGivesTimeoutOnTheOthers) {
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  auto status = mp::runForked(3, [&](int rank) {
    if (rank == 2) return 0;  // never joins
    auto start = std::chrono::steady_clock::now();
    symmarResult_t res = symmarSuccess;
    symmarComm_t comm = initCpu(id, 3, rank, kTimeoutMs, &res);
    const double secs = since(start);
    if (comm || res != symmarTimeout) return 11;
    return secs < kTimeoutMs / 1000.0 + 2.0 ? 0 : 12;
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}
