// A rank that arrives late at a call its peer failed (timed out, then destroyed its comm or not;
// on one host or across hosts) fails that call too: it never returns success for a call its peers
// did not complete.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "fault/fault_util.h"
#include "fault/shm_inter_host.h"
#include "mp/mp_util.h"

using fault::checkedAllReduce;
using fault::initCpu;
using fault::sleepMs;

namespace {

constexpr int kTimeoutMs = 1000;

// kLargeAllGather: blocks of 64 KiB, which peers read from the rank's process where they can.
enum class Kind { kAllReduce, kReduceScatter, kAllGather, kLargeAllGather };

/// One one-shot call of kind whose inputs depend on the rank (small integers: exact sums); *wrong
/// is set when it returned success with any element off the hand-worked value.
symmarResult_t checkedCall(symmarComm_t comm, int rank, Kind kind, bool* wrong) {
  if (kind == Kind::kAllReduce) return checkedAllReduce(comm, rank, 2, 4, 0, wrong, symmarAlgoOneShot);
  const size_t n = kind == Kind::kLargeAllGather ? 16384 : 4;
  std::vector<float> whole(2 * n), block(n);
  symmarResult_t res;
  if (kind == Kind::kReduceScatter) {
    for (size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<float>(10 * rank + static_cast<int>(i));
    res = symmarReduceScatterAlgo(whole.data(), block.data(), n, symmarFloat32, symmarSum, symmarAlgoOneShot, comm,
                                  nullptr);
    // Element j of this rank's block: (0 + rank * n + j) + (10 + rank * n + j).
    for (size_t j = 0; j < n; ++j) {
      *wrong |= block[j] != static_cast<float>(10 + 2 * (static_cast<size_t>(rank) * n + j));
    }
  } else {
    for (size_t j = 0; j < n; ++j) block[j] = static_cast<float>(100000 * rank + static_cast<int>(j));
    res = symmarAllGatherAlgo(block.data(), whole.data(), n, symmarFloat32, symmarAlgoOneShot, comm, nullptr);
    for (size_t i = 0; i < whole.size(); ++i) *wrong |= whole[i] != static_cast<float>(100000 * (i / n) + i % n);
  }
  if (res != symmarSuccess) *wrong = false;  // a failed call owes no values
  return res;
}

// Rank 0 times out on a one-shot call rank 1 has not made yet; rank 1 makes it later. Rank 1 must
// fail it too: rank 0 abandoned the call (its flag and staging are no contribution). On two hosts
// rank 0's inter-host record still reaches rank 1 (as a sent MPI message does), and rank 1 must
// not take it for a completed exchange (of an allreduce, a reduce-scatter or an all-gather).
void lateRankCase(bool destroy_after_failure, bool two_hosts = false, Kind kind = Kind::kAllReduce) {
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  fault::ShmInterHost engine(2);
  auto status = mp::runForked(2, [&](int rank) {
    if (two_hosts) setenv("SYMMAR_HOST_ID", rank ? "b" : "a", 1);
    symmarComm_t comm = initCpu(id, 2, rank, kTimeoutMs);
    if (!comm) return 10;
    if (two_hosts && engine.install(comm, rank) != symmarSuccess) return 15;
    bool wrong = false;
    if (rank == 0) {
      symmarResult_t res = checkedCall(comm, 0, kind, &wrong);
      if (res != symmarTimeout) return 11;
      if (!destroy_after_failure) sleepMs(2 * kTimeoutMs + 500);
      return symmarCommDestroy(comm) == symmarSuccess ? 0 : 12;
    }
    sleepMs(kTimeoutMs + 500);
    symmarResult_t res = checkedCall(comm, 1, kind, &wrong);
    if (res == symmarSuccess) {
      fprintf(stderr, "rank 1: completed a call rank 0 had failed (%s)\n",
              wrong ? "wrong values" : "values happened to fit");
      return 13;
    }
    // Across hosts no failed mark can be seen: the peer's missing second record times the call out.
    if (res != (two_hosts ? symmarTimeout : symmarPeerFailure)) return 14;
    symmarCommDestroy(comm);
    return 0;
  });
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 0);
}

}  // namespace

TEST(SilentWrong, LateRankNeverCompletesACallItsDestroyedPeerFailed) { lateRankCase(true); }
TEST(SilentWrong, LateRankNeverCompletesACallItsLivePeerFailed) { lateRankCase(false); }
TEST(SilentWrong, LateHostNeverCompletesACallItsPeerHostFailed) { lateRankCase(false, true); }
TEST(SilentWrong, LateHostNeverCompletesAReduceScatterItsPeerHostFailed) {
  lateRankCase(false, true, Kind::kReduceScatter);
}
TEST(SilentWrong, LateHostNeverCompletesAnAllGatherItsPeerHostFailed) { lateRankCase(false, true, Kind::kAllGather); }
// The failed rank published its send buffer's address for peers to read from its process: the
// late rank must fail the call before reading it, whether that buffer is still there or not.
TEST(SilentWrong, LateRankNeverCompletesAnAllGatherReadFromItsFailedPeersProcess) {
  lateRankCase(false, false, Kind::kLargeAllGather);
  lateRankCase(true, false, Kind::kLargeAllGather);
}
