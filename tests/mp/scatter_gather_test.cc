// Reduce-scatter and all-gather on the host backend: every dtype, op and count (across chunk
// boundaries), in place and not, as threads and as forked processes, against the float64
// reference; call matching against the other collectives; a reduce-scatter's block is the same
// bits as the allreduce's.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/reference.h"
#include "mp/mp_util.h"

namespace {

constexpr size_t kStaging = 64 << 10;  // small, so the larger counts run through many chunks

symmarConfig_t testConfig(int timeout_ms = 60000) {
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  cfg.staging_bytes = kStaging;
  cfg.timeout_ms = timeout_ms;
  return cfg;
}

std::vector<mp::GatherCase> cases(bool full) {
  std::vector<mp::GatherCase> out;
  const size_t counts[] = {0, 1, 7, 1000, 65537};
  const symmarDataType_t dtypes[] = {symmarFloat32, symmarFloat16, symmarBfloat16, symmarInt32, symmarFloat64};
  for (bool scatter : {true, false}) {
    for (symmarDataType_t dtype : dtypes) {
      for (symmarRedOp_t op : {symmarSum, symmarMax, symmarMin}) {
        if (!scatter && op != symmarSum) continue;
        for (size_t count : counts) {
          for (bool in_place : {false, true}) {
            if (!full && (op != symmarSum || count == 7) && dtype != symmarBfloat16) continue;
            const symmarAlgo_t algo = in_place ? symmarAlgoOneShot : symmarAlgoAuto;
            out.push_back({scatter, dtype, op, count, in_place, algo});
            // Lamport's raw exchange: every dtype, blocks up to its slot's size.
            if (count <= 1000) out.push_back({scatter, dtype, op, count, in_place, symmarAlgoLamport});
            // Inputs in the symmetric heap, read in place by the peers: on every rank, on some.
            const int symmetric = count % 2 ? 2 : 1;
            if (op == symmarSum && dtype != symmarFloat64) out.push_back({scatter, dtype, op, count, in_place, algo, symmetric});
          }
        }
      }
    }
  }
  return out;
}

int runAll(symmarComm_t comm, int rank, int world, const std::vector<mp::GatherCase>& all) {
  int errors = 0;
  for (size_t i = 0; i < all.size(); ++i) errors += mp::runGatherCase(comm, rank, world, all[i], static_cast<int>(i));
  return errors;
}

}  // namespace

class HostScatterGather : public ::testing::TestWithParam<int> {};

TEST_P(HostScatterGather, ThreadRanks) {
  const int world = GetParam();
  const auto all = cases(world <= 3);
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = testConfig();
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess) << symmarGetLastError(nullptr);
  auto errors = mp::runThreads(world, [&](int rank) { return runAll(comms[rank], rank, world, all); });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[r], 0) << "rank " << r;
    EXPECT_EQ(symmarCommDestroy(comms[r]), symmarSuccess);
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, HostScatterGather, ::testing::Values(2, 3, 4, 5, 8),
                         [](const ::testing::TestParamInfo<int>& info) { return "world" + std::to_string(info.param); });

TEST(HostScatterGather, ForkedRanksWithUniqueId) {
  const int world = 3;
  const auto all = cases(false);
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  auto status = mp::runForked(world, [&](int rank) {
    symmarConfig_t cfg = testConfig();
    symmarComm_t comm = nullptr;
    if (symmarCommInitRank(&comm, world, id, rank, &cfg) != symmarSuccess) return 100;
    const int errors = runAll(comm, rank, world, all);
    return errors + (symmarCommDestroy(comm) != symmarSuccess);
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}

// Fractional inputs, so sums round: rank r's reduce-scatter block has the bits of block r of the
// allreduce of the same inputs (both reduce each element once, in rank order, in fp32 for 16-bit types).
TEST(HostScatterGather, ReduceScatterBlocksAreTheAllReducesBits) {
  const int world = 4;
  const size_t n = 5000;
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = testConfig();
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
  auto errors = mp::runThreads(world, [&](int rank) {
    int wrong = 0;
    for (symmarDataType_t dtype : {symmarFloat32, symmarFloat16, symmarBfloat16}) {
      const size_t elem = testref::elementSize(dtype);
      std::vector<unsigned char> in(n * world * elem), block(n * elem), all(n * world * elem);
      for (size_t i = 0; i < n * world; ++i) testref::storeElement(in.data(), dtype, i, testref::fractionalInput(rank, i));
      if (symmarReduceScatter(in.data(), block.data(), n, dtype, symmarSum, comms[rank], nullptr) != symmarSuccess ||
          symmarAllReduce(in.data(), all.data(), n * world, dtype, symmarSum, comms[rank], nullptr) != symmarSuccess) {
        return 100;
      }
      wrong += memcmp(block.data(), all.data() + rank * n * elem, n * elem) != 0;
    }
    return wrong;
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[r], 0) << "rank " << r;
    EXPECT_EQ(symmarCommDestroy(comms[r]), symmarSuccess);
  }
}

// Peers read a symmetric send buffer in place: a rank whose call returned may rewrite that buffer at
// once, and no peer may read the rewrite (the call ends only when every peer has read it).
TEST(HostScatterGather, ASymmetricInputIsReadBeforeAnyRankReturns) {
  const int world = 4;
  const size_t n = 40000;  // several chunks of the 64 KiB staging
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = testConfig();
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
  auto errors = mp::runThreads(world, [&](int rank) {
    void* heap = nullptr;
    if (symmarMemAlloc(comms[rank], n * world * sizeof(float), &heap) != symmarSuccess) return 100;
    float* send = static_cast<float*>(heap);
    std::vector<float> gathered(n * world), block(n);
    int wrong = 0;
    for (int call = 0; call < 20; ++call) {
      const bool scatter = call % 2;
      for (size_t i = 0; i < n * world; ++i) send[i] = static_cast<float>(rank + call);
      const symmarResult_t res =
          scatter ? symmarReduceScatter(send, block.data(), n, symmarFloat32, symmarSum, comms[rank], nullptr)
                  : symmarAllGather(send, gathered.data(), n, symmarFloat32, comms[rank], nullptr);
      for (size_t i = 0; i < n * world; ++i) send[i] = -1000.0f;  // the caller reuses its buffer at once
      if (res != symmarSuccess) return 200;
      const float sum = static_cast<float>(world * call + world * (world - 1) / 2);
      for (size_t i = 0; i < n; ++i) {
        wrong += scatter ? block[i] != sum : gathered[(i % world) * n + i] != static_cast<float>(i % world + call);
      }
    }
    return wrong + (symmarMemFree(comms[rank], heap) != symmarSuccess);
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[r], 0) << "rank " << r;
    EXPECT_EQ(symmarCommDestroy(comms[r]), symmarSuccess);
  }
}

// The same for an all-gather's caller send buffer that peers copy from its process (from 32 KiB
// per rank, where the processes can read each other): no peer may read the caller's rewrite.
TEST(HostScatterGather, ACallerInputReadFromItsProcessIsReadBeforeAnyRankReturns) {
  const int world = 3;
  const size_t n = 40000;  // several chunks of the 64 KiB staging
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  auto status = mp::runForked(world, [&](int rank) {
    symmarConfig_t cfg = testConfig();
    symmarComm_t comm = nullptr;
    if (symmarCommInitRank(&comm, world, id, rank, &cfg) != symmarSuccess) return 100;
    std::vector<float> send(n), gathered(n * world);
    int wrong = 0;
    for (int call = 0; call < 20; ++call) {
      for (size_t i = 0; i < n; ++i) send[i] = static_cast<float>(rank * 100 + call) + static_cast<float>(i % 7);
      const symmarResult_t res = symmarAllGatherAlgo(send.data(), gathered.data(), n, symmarFloat32,
                                                     symmarAlgoOneShot, comm, nullptr);
      for (size_t i = 0; i < n; ++i) send[i] = -1000.0f;  // the caller reuses its buffer at once
      if (res != symmarSuccess) return 200;
      for (size_t i = 0; i < n * world; ++i) {
        wrong += gathered[i] != static_cast<float>(static_cast<int>(i / n) * 100 + call) + static_cast<float>(i % n % 7);
      }
    }
    return (wrong > 0) + (symmarCommDestroy(comm) != symmarSuccess);
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}

// Reduce-scatters and all-gathers with caller buffers (one barrier per chunk, staging halves
// alternating; an end barrier where peers read a send buffer in place) mixed with allreduces,
// across the wrap of the barrier epoch: every result exact (int32), on both ranks.
TEST(HostScatterGather, CallsAcrossTheEpochWrap) {
  const int world = 2;
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = testConfig();
  cfg.staging_bytes = 16 << 10;  // the larger counts take several chunks
  setenv("SYMMAR_EPOCH_START", "4294964000", 1);  // wraps after about 3,300 barriers
  const symmarResult_t init = symmarCommInitAll(comms.data(), world, nullptr, &cfg);
  unsetenv("SYMMAR_EPOCH_START");
  ASSERT_EQ(init, symmarSuccess);
  auto errors = mp::runThreads(world, [&](int rank) {
    std::vector<int32_t> send(2 * 9000), recv(2 * 9000);
    int bad = 0;
    for (int call = 0; call < 6000 && bad == 0; ++call) {
      // Per rank; every 50th call 36 KiB, which an all-gather's peers read from the rank's process.
      const size_t n = call % 50 == 1 ? 9000 : 1 + static_cast<size_t>(call * 7919) % 3000;
      for (size_t j = 0; j < n * world; ++j) send[j] = static_cast<int32_t>(call + j + rank);
      symmarResult_t res;
      switch (call % 3) {
        case 0:
          res = symmarReduceScatter(send.data(), recv.data(), n, symmarInt32, symmarSum, comms[rank], nullptr);
          for (size_t i = 0; i < n; ++i) bad += recv[i] != static_cast<int32_t>(2 * (call + rank * n + i) + 1);
          break;
        case 1:
          res = symmarAllGather(send.data(), recv.data(), n, symmarInt32, comms[rank], nullptr);
          for (size_t j = 0; j < n * world; ++j) bad += recv[j] != static_cast<int32_t>(call + j % n + j / n);
          break;
        default:
          res = symmarAllReduce(send.data(), recv.data(), n, symmarInt32, symmarSum, comms[rank], nullptr);
          for (size_t i = 0; i < n; ++i) bad += recv[i] != static_cast<int32_t>(2 * (call + i) + 1);
      }
      if (res != symmarSuccess) return 1000 + call;
    }
    return bad;
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[r], 0) << "rank " << r;
    EXPECT_EQ(symmarCommDestroy(comms[r]), symmarSuccess);
  }
}

// A reduce-scatter on one rank against an all-gather (or an allreduce) of the same count on the
// other is a mismatch on both ranks, not a pairing; the next matching calls pair correctly. One-shot
// throughout: barrier calls that did not match leave nothing behind (lamport's do: below).
TEST(HostScatterGather, MismatchedCollectivesFailOnBothRanks) {
  const int world = 2;
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = testConfig(5000);
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
  auto errors = mp::runThreads(world, [&](int rank) {
    const symmarAlgo_t kOneShot = symmarAlgoOneShot;
    float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8] = {};
    int wrong = 0;
    for (int other = 0; other < 3; ++other) {  // rank 1: all-gather, allreduce, reduce-scatter of count 0
      symmarResult_t res;
      if (rank == 0) {
        res = symmarReduceScatterAlgo(in, out, 4, symmarFloat32, symmarSum, kOneShot, comms[rank], nullptr);
      } else if (other == 0) {
        res = symmarAllGatherAlgo(in, out, 4, symmarFloat32, kOneShot, comms[rank], nullptr);
      } else if (other == 1) {
        // One-shot: a barrier call against lamport's barrier-free one would fail the comm for good.
        res = symmarAllReduceAlgo(in, out, 4, symmarFloat32, symmarSum, kOneShot, comms[rank], nullptr);
      } else {
        res = symmarReduceScatter(nullptr, nullptr, 0, symmarFloat32, symmarSum, comms[rank], nullptr);
      }
      if (res != symmarInvalidUsage) {
        fprintf(stderr, "rank %d, mismatch %d: %s\n", rank, other, symmarGetErrorString(res));
        ++wrong;
      }
      // The next call matches on both ranks and pairs with its counterpart.
      wrong += symmarReduceScatterAlgo(in, out, 4, symmarFloat32, symmarSum, kOneShot, comms[rank], nullptr) !=
               symmarSuccess;
      for (int j = 0; j < 4; ++j) wrong += out[j] != 2 * in[rank * 4 + j];
    }
    return wrong;
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[r], 0) << "rank " << r;
    EXPECT_EQ(symmarCommDestroy(comms[r]), symmarSuccess);
  }
}

// All-gathers whose peers read send buffers from each other's processes, one rank a call ahead:
// rank 1 skips the first call, so each of its calls meets rank 0's call before it, of another
// count: a mismatch on both ranks (symmarInvalidUsage) before any rank reads the other's published
// buffer. Rank 0's last call meets a peer that destroyed its comm. Forked ranks, so the reads would
// cross processes.
TEST(HostScatterGather, AllGathersReadFromProcessesOneCallApartNeverPair) {
  const int world = 2;
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  auto status = mp::runForked(world, [&](int rank) {
    symmarConfig_t cfg = testConfig(2000);
    symmarComm_t comm = nullptr;
    if (symmarCommInitRank(&comm, world, id, rank, &cfg) != symmarSuccess) return 100;
    const size_t counts[] = {16384, 16400, 16416};  // 64 KiB and up a rank
    std::vector<float> send(counts[2], static_cast<float>(rank + 1)), recv(world * counts[2]);
    int wrong = 0;
    for (int k = rank; k < 3; ++k) {  // rank 0: calls 0, 1, 2; rank 1: calls 1, 2
      const symmarResult_t res =
          symmarAllGatherAlgo(send.data(), recv.data(), counts[k], symmarFloat32, symmarAlgoOneShot, comm, nullptr);
      const bool last_alone = rank == 0 && k == 2;
      if (last_alone ? res == symmarSuccess : res != symmarInvalidUsage) {
        fprintf(stderr, "rank %d: call %d: %s\n", rank, k, symmarGetErrorString(res));
        ++wrong;
      }
    }
    return wrong + (symmarCommDestroy(comm) != symmarSuccess);
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}

// Lamport calls that differ (a reduce-scatter against an all-gather, or against a one-shot
// all-gather of the same count) fail on both ranks, and the comm with them: the mismatched call left
// data in the lamport buffers that no later call may take for its own.
TEST(HostScatterGather, LamportMismatchFailsTheCommOnBothRanks) {
  for (symmarAlgo_t other : {symmarAlgoLamport, symmarAlgoOneShot}) {
    const int world = 2;
    std::vector<symmarComm_t> comms(world);
    symmarConfig_t cfg = testConfig(5000);
    ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
    auto errors = mp::runThreads(world, [&](int rank) {
      float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8] = {};
      const symmarResult_t res =
          rank == 0
              ? symmarReduceScatterAlgo(in, out, 4, symmarFloat32, symmarSum, symmarAlgoLamport, comms[rank], nullptr)
              : symmarAllGatherAlgo(in, out, 4, symmarFloat32, other, comms[rank], nullptr);
      int wrong = 0;
      if (res != symmarInvalidUsage ||
          std::string(symmarGetLastError(comms[rank])).find("mismatch") == std::string::npos) {
        fprintf(stderr, "rank %d against %s: %s (%s)\n", rank, symmarAlgoName(other), symmarGetErrorString(res),
                symmarGetLastError(comms[rank]));
        ++wrong;
      }
      wrong += symmarReduceScatterAlgo(in, out, 4, symmarFloat32, symmarSum, symmarAlgoLamport, comms[rank], nullptr) ==
               symmarSuccess;
      return wrong;
    });
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(errors[r], 0) << "rank " << r << " against " << symmarAlgoName(other);
      EXPECT_EQ(symmarCommDestroy(comms[r]), symmarSuccess);
    }
  }
}

// Lamport's reduce-scatter and all-gather send their data raw: every bit pattern arrives as it was,
// the lamport empty pattern (0x80008000, a negative float32 denormal) and negative zeros included,
// which the allreduce's travelling encoding would have turned into other values.
TEST(HostScatterGather, LamportCarriesEveryBitPattern) {
  const int world = 3;
  const size_t n = 12;  // per rank
  const uint32_t patterns[] = {0x80008000u, 0x80000000u, 0x00008000u, 0xffffffffu, 0x7fc00001u, 0x00000000u};
  auto word = [&](int rank, size_t i) { return patterns[(i + static_cast<size_t>(rank)) % 6]; };
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = testConfig();
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
  auto errors = mp::runThreads(world, [&](int rank) {
    int wrong = 0;
    // All-gather: every rank's words at its place, bit for bit.
    std::vector<uint32_t> send(n), gathered(n * world);
    for (size_t i = 0; i < n; ++i) send[i] = word(rank, i);
    if (symmarAllGatherAlgo(send.data(), gathered.data(), n, symmarFloat32, symmarAlgoLamport, comms[rank], nullptr) !=
        symmarSuccess) {
      return 100;
    }
    for (size_t j = 0; j < n * world; ++j) wrong += gathered[j] != word(static_cast<int>(j / n), j % n);
    // Reduce-scatter, float32 sums of the same value on every rank: 3 * -2^-134 (0x80018000), -0.0.
    std::vector<uint32_t> in(n * world), block(n);
    for (size_t j = 0; j < n * world; ++j) in[j] = j % 2 ? 0x80008000u : 0x80000000u;
    if (symmarReduceScatterAlgo(in.data(), block.data(), n, symmarFloat32, symmarSum, symmarAlgoLamport, comms[rank],
                                nullptr) != symmarSuccess) {
      return 200;
    }
    for (size_t i = 0; i < n; ++i) wrong += block[i] != ((rank * n + i) % 2 ? 0x80018000u : 0x80000000u);
    // float16 sums of -0.0: -0.0 (0x8000), as IEEE adds them.
    std::vector<uint16_t> halves(n * world, 0x8000u), half_block(n);
    if (symmarReduceScatterAlgo(halves.data(), half_block.data(), n, symmarFloat16, symmarSum, symmarAlgoLamport,
                                comms[rank], nullptr) != symmarSuccess) {
      return 300;
    }
    for (size_t i = 0; i < n; ++i) wrong += half_block[i] != 0x8000u;
    return wrong;
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[r], 0) << "rank " << r;
    EXPECT_EQ(symmarCommDestroy(comms[r]), symmarSuccess);
  }
}

// Bad arguments get a code and a message before anything is written or any peer is waited for.
TEST(HostScatterGather, BadArgumentsAreRefusedBeforeTheCall) {
  symmarComm_t comm = nullptr;
  symmarConfig_t cfg = testConfig();
  ASSERT_EQ(symmarCommInitAll(&comm, 1, nullptr, &cfg), symmarSuccess);
  std::vector<float> buf(64, 1.0f);
  float* b = buf.data();
  auto lastError = [&] { return std::string(symmarGetLastError(comm)); };
  // Overlapping but not at this rank's block (rank 0 of 1: the block is the whole buffer's start).
  EXPECT_EQ(symmarReduceScatter(b + 1, b, 8, symmarFloat32, symmarSum, comm, nullptr), symmarInvalidArgument);
  EXPECT_NE(lastError().find("in place"), std::string::npos) << lastError();
  EXPECT_EQ(symmarAllGather(b, b + 1, 8, symmarFloat32, comm, nullptr), symmarInvalidArgument);
  EXPECT_EQ(symmarReduceScatter(nullptr, b, 8, symmarFloat32, symmarSum, comm, nullptr), symmarInvalidArgument);
  EXPECT_EQ(symmarAllGather(b, reinterpret_cast<char*>(b) + 1, 4, symmarFloat32, comm, nullptr), symmarInvalidArgument);
  EXPECT_EQ(symmarReduceScatter(b, b + 16, 8, static_cast<symmarDataType_t>(9), symmarSum, comm, nullptr),
            symmarInvalidArgument);
  EXPECT_EQ(symmarReduceScatter(b, b + 16, 8, symmarFloat32, static_cast<symmarRedOp_t>(7), comm, nullptr),
            symmarInvalidArgument);
  EXPECT_EQ(symmarReduceScatter(b, b + 16, SIZE_MAX / 2, symmarFloat32, symmarSum, comm, nullptr),
            symmarInvalidArgument);
  EXPECT_EQ(symmarAllGatherAlgo(b, b + 16, 8, symmarFloat32, static_cast<symmarAlgo_t>(42), comm, nullptr),
            symmarInvalidArgument);
  for (symmarAlgo_t algo : {symmarAlgoTwoShot, symmarAlgoMultimem, symmarAlgoNccl, symmarAlgoMpi}) {
    EXPECT_EQ(symmarReduceScatterAlgo(b, b + 16, 8, symmarFloat32, symmarSum, algo, comm, nullptr), symmarUnsupported)
        << symmarAlgoName(algo);
    EXPECT_EQ(symmarAllGatherAlgo(b, b + 16, 8, symmarFloat32, algo, comm, nullptr), symmarUnsupported)
        << symmarAlgoName(algo);
  }
  // Lamport's blocks must fit its slots (the bound is per rank's block).
  const size_t too_many = SYMMAR_LAMPORT_MAX_BYTES / sizeof(float) + 1;
  std::vector<float> big(too_many, 1.0f);
  EXPECT_EQ(symmarAllGatherAlgo(big.data(), big.data(), too_many, symmarFloat32, symmarAlgoLamport, comm, nullptr),
            symmarUnsupported);
  EXPECT_NE(lastError().find("larger than its buffers hold"), std::string::npos) << lastError();
  EXPECT_EQ(symmarAllGather(b, b + 16, 8, symmarFloat32, comm, reinterpret_cast<void*>(1)), symmarInvalidArgument);
  for (float v : buf) ASSERT_EQ(v, 1.0f) << "a refused call wrote";
  // One rank: the identity, in place or not.
  EXPECT_EQ(symmarReduceScatter(b, b + 32, 8, symmarFloat32, symmarSum, comm, nullptr), symmarSuccess);
  EXPECT_EQ(symmarAllGather(b, b, 8, symmarFloat32, comm, nullptr), symmarSuccess);
  EXPECT_EQ(symmarAllGatherAlgo(b, b + 32, 8, symmarFloat32, symmarAlgoLamport, comm, nullptr), symmarSuccess);
  for (float v : buf) ASSERT_EQ(v, 1.0f) << "an identity changed a value";
  EXPECT_EQ(symmarCommDestroy(comm), symmarSuccess);
}
