// Calls pair by order and signature: a rank passing count 0 where its peer passes 3 fails as a
// mismatch on both ranks, and does not shift the pairing of later calls.
#include <gtest/gtest.h>

#include <cstdio>

#include "fault/fault_util.h"
#include "mp/mp_util.h"

using fault::checkedAllReduce;
using fault::initCpu;

// Rank 1 passes count 0 where rank 0 passes 3: both calls fail as a mismatch, and the next
// (matching) calls pair correctly instead of rank 1's second call meeting rank 0's first.
// Count 0 against count 3: a mismatch on both ranks, for the barrier algorithms (after which the
// comm goes on: both ranks passed the same barrier) and for lamport (whose buffers the mismatched
// call has left in an unknown state: the comm is failed, and no later call succeeds).
TEST(SilentWrong, CountZeroTakesPartInCallMatching) {
  for (symmarAlgo_t algo : {symmarAlgoOneShot, symmarAlgoLamport}) {
    symmarUniqueId id;
    ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
    auto status = mp::runForked(2, [&](int rank) {
      symmarComm_t comm = initCpu(id, 2, rank, 3000);
      if (!comm) return 10;
      bool wrong = false;
      symmarResult_t first =
          rank == 0 ? checkedAllReduce(comm, 0, 2, 3, 0, &wrong, algo)
                    : symmarAllReduceAlgo(nullptr, nullptr, 0, symmarFloat32, symmarSum, algo, comm, nullptr);
      if (first != symmarInvalidUsage) {
        fprintf(stderr, "rank %d: mismatched first call returned %s\n", rank, symmarGetErrorString(first));
        return 11;
      }
      const symmarResult_t second = checkedAllReduce(comm, rank, 2, 3, 1, &wrong, algo);
      if (wrong) return 12;
      if (algo == symmarAlgoLamport) {
        if (second == symmarSuccess) return 15;
        return symmarCommDestroy(comm) == symmarSuccess ? 0 : 14;
      }
      if (second != symmarSuccess) return 12;
      // Count 0 on every rank is a successful call.
      if (symmarAllReduce(nullptr, nullptr, 0, symmarFloat32, symmarSum, comm, nullptr) != symmarSuccess) return 13;
      return symmarCommDestroy(comm) == symmarSuccess ? 0 : 14;
    });
    EXPECT_EQ(status[0], 0) << symmarAlgoName(algo);
    EXPECT_EQ(status[1], 0) << symmarAlgoName(algo);
  }
}
