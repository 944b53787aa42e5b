// Calls pair by order and signature: a rank passing count 0 where its peer passes 3 fails as a
// mismatch on both ranks, and does not shift the pairing of later calls; so do calls the host
// fallback serves, and the fused call where it runs as an allreduce and a norm.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

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
      // The comm's state as it reports it: failed after the lamport mismatch, fine otherwise.
      symmarResult_t async = symmarInternalError;
      if (symmarCommGetAsyncError(comm, &async) != symmarSuccess ||
          async != (algo == symmarAlgoLamport ? symmarInvalidUsage : symmarSuccess)) {
        return 16;
      }
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

namespace {

// A stand-in for the host fallback (libsymmar_mpi's MPI collectives): it moves nothing and counts
// its calls in this process, so a test sees whether a call reached it. Like MPI it pairs calls by
// order alone, so only the library can notice that peers made different calls.
int g_fallback_calls = 0;
symmarResult_t countingAllReduce(const void*, void*, size_t, symmarDataType_t, symmarRedOp_t, void*) {
  ++g_fallback_calls;
  return symmarSuccess;
}
symmarResult_t countingReduceScatter(const void*, void*, size_t, symmarDataType_t, symmarRedOp_t, void*) {
  ++g_fallback_calls;
  return symmarSuccess;
}
symmarResult_t countingAllGather(const void*, void*, size_t, symmarDataType_t, void*) {
  ++g_fallback_calls;
  return symmarSuccess;
}

}  // namespace

// Calls the fallback serves meet their peers' calls first: count 0 against count 16, and an
// allreduce against a reduce-scatter, fail on both ranks without reaching the fallback (which would
// have paired them: count 0 made no MPI call at all, so that rank's next call met the peer's
// first); matched calls reach it once per rank, and count 0 on every rank succeeds without it.
TEST(SilentWrong, CallsTheFallbackServesTakePartInCallMatching) {
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  auto status = mp::runForked(2, [&](int rank) {
    symmarComm_t comm = initCpu(id, 2, rank, 3000);
    if (!comm) return 10;
    if (symmarCommSetFallback(comm, countingAllReduce, nullptr, nullptr) != symmarSuccess ||
        symmarCommSetFallbackCollectives(comm, countingReduceScatter, countingAllGather) != symmarSuccess) {
      return 11;
    }
    float x[16] = {}, y[32] = {};
    const symmarAlgo_t mpi = symmarAlgoMpi;
    const symmarResult_t zero_vs_16 =
        symmarAllReduceAlgo(x, y, rank == 0 ? 0 : 16, symmarFloat32, symmarSum, mpi, comm, nullptr);
    const symmarResult_t gather_zero_vs_4 =
        symmarAllGatherAlgo(x, y, rank == 0 ? 0 : 4, symmarFloat32, mpi, comm, nullptr);
    const symmarResult_t allreduce_vs_scatter =
        rank == 0 ? symmarAllReduceAlgo(x, y, 16, symmarFloat32, symmarSum, mpi, comm, nullptr)
                  : symmarReduceScatterAlgo(y, x, 8, symmarFloat32, symmarSum, mpi, comm, nullptr);
    for (symmarResult_t r : {zero_vs_16, gather_zero_vs_4, allreduce_vs_scatter}) {
      if (r != symmarInvalidUsage) {
        fprintf(stderr, "rank %d: a mismatched call returned %s\n", rank, symmarGetErrorString(r));
        return 12;
      }
    }
    if (g_fallback_calls != 0) return 13;
    if (symmarAllReduceAlgo(x, y, 16, symmarFloat32, symmarSum, mpi, comm, nullptr) != symmarSuccess) return 14;
    if (symmarAllReduceAlgo(nullptr, nullptr, 0, symmarFloat32, symmarSum, mpi, comm, nullptr) != symmarSuccess) {
      return 15;
    }
    if (symmarAllGatherAlgo(x, y, 4, symmarFloat32, mpi, comm, nullptr) != symmarSuccess) return 16;
    if (g_fallback_calls != 2) return 17;
    return symmarCommDestroy(comm) == symmarSuccess ? 0 : 18;
  });
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 0);
}

// The fused call without a fused form (here: past the table row's last threshold) runs an
// allreduce of tokens x hidden elements, then the norm on each rank. That allreduce is matched as
// the fused call: 2 x 8 against 4 x 4 (16 elements each), or against a plain allreduce of 16,
// fails on both ranks, where each rank would have normalised the sums by its own rows. A matched
// call after the mismatches pairs.
TEST(SilentWrong, UnfusedFusedCallsOfOtherShapesDoNotPair) {
  char path[] = "/tmp/symmar_unfused_match_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  // The allreduce row takes one-shot: a mismatched lamport call would leave the comm failed (its
  // buffers in an unknown state), and the matched call after the mismatches must still run.
  const std::string table = R"({"rows": [{"arch": "host", "link": "host", "world": [2, 2], "collective": "addrmsnorm",
    "source": "test: every call past the last threshold", "algos": [{"algo": "twoshot", "max_bytes": 1}]},
    {"arch": "host", "link": "host", "world": [2, 2], "source": "test: one-shot",
     "algos": [{"algo": "oneshot", "max_bytes": "unbounded"}]}]})";
  ASSERT_EQ(write(fd, table.data(), table.size()), static_cast<ssize_t>(table.size()));
  close(fd);
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  auto status = mp::runForked(2, [&](int rank) {
    symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
    cfg.device = SYMMAR_DEVICE_CPU;
    cfg.timeout_ms = 3000;
    cfg.table_file = path;
    symmarComm_t comm = nullptr;
    if (symmarCommInitRank(&comm, 2, id, rank, &cfg) != symmarSuccess) return 10;
    float in[16], res[16], norm[16], gamma[8];
    for (int i = 0; i < 16; ++i) in[i] = static_cast<float>((rank + 1) * (i + 1));
    for (float& g : gamma) g = 1.0f;
    symmarAddRmsNormArgs_t a{};
    a.input = in;
    a.residual_out = res;
    a.norm_out = norm;
    a.gamma = gamma;
    a.eps = 1e-6f;
    a.dtype = symmarFloat32;
    a.tokens = rank == 0 ? 2 : 4;
    a.hidden = rank == 0 ? 8 : 4;
    const symmarResult_t shapes = symmarAllReduceAddRmsNorm(&a, comm, nullptr);
    a.tokens = 2;
    a.hidden = 8;
    const symmarResult_t against_plain =
        rank == 0 ? symmarAllReduceAddRmsNorm(&a, comm, nullptr)
                  : symmarAllReduce(in, res, 16, symmarFloat32, symmarSum, comm, nullptr);
    if (shapes != symmarInvalidUsage || against_plain != symmarInvalidUsage) {
      fprintf(stderr, "rank %d: mismatched calls returned %s and %s\n", rank, symmarGetErrorString(shapes),
              symmarGetErrorString(against_plain));
      return 11;
    }
    // The same fused call on both ranks pairs; residual_out is the exact sum of small integers.
    if (symmarAllReduceAddRmsNorm(&a, comm, nullptr) != symmarSuccess) return 12;
    for (int i = 0; i < 16; ++i) {
      if (res[i] != static_cast<float>(3 * (i + 1))) return 13;
    }
    return symmarCommDestroy(comm) == symmarSuccess ? 0 : 14;
  });
  unlink(path);
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 0);
}
