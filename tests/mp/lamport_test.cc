// The host backend's lamport twin across forked processes and threads: every dtype it serves and
// op, counts up to its 256 KiB limit, in place and not, worlds 2..8, against a float64 reference and
// bitwise identical on all ranks; 1,000 calls rotating its buffers among barrier calls; and the
// ways it must fail rather than complete: a mismatched call (also against a barrier call, and every
// call after it), a rank that never calls, a rank that arrives after its peer gave up, a message
// over the limit, a dtype it does not serve.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mp/mp_util.h"

namespace {

symmarConfig_t lamportConfig(int timeout_ms = 60000) {
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  cfg.timeout_ms = timeout_ms;
  return cfg;
}

std::vector<mp::Case> lamportCases() {
  std::vector<mp::Case> cases;
  for (symmarDataType_t dt : {symmarFloat32, symmarFloat16, symmarBfloat16}) {
    const size_t limit = (size_t(256) << 10) / symmarTypeSize(dt);
    for (int op = 0; op < symmarNumOps; ++op) {
      for (size_t n : {size_t(0), size_t(1), size_t(2), size_t(3), size_t(7), size_t(1000), limit - 1, limit}) {
        for (bool in_place : {false, true}) cases.push_back({dt, static_cast<symmarRedOp_t>(op), n, in_place, symmarAlgoLamport, false});
      }
    }
    cases.push_back({dt, symmarSum, 70001 % limit, false, symmarAlgoLamport, true});
  }
  return cases;
}

}  // namespace

class HostLamport : public ::testing::TestWithParam<int> {};

TEST_P(HostLamport, ForkedRanksMatchTheReferenceBitForBit) {
  const int world = GetParam();
  const auto cases = lamportCases();
  mp::SharedWords digests(cases.size() * world);
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  auto status = mp::runForked(world, [&](int rank) {
    symmarConfig_t cfg = lamportConfig();
    symmarComm_t comm = nullptr;
    if (symmarCommInitRank(&comm, world, id, rank, &cfg) != symmarSuccess) return 1;
    int errors = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      uint64_t d = 0;
      errors += mp::runCase(comm, rank, world, cases[i], &d);
      digests[i * world + rank] = d;
    }
    return errors + (symmarCommDestroy(comm) != symmarSuccess);
  });
  for (int r = 0; r < world; ++r) ASSERT_EQ(status[r], 0) << "rank " << r;
  for (size_t i = 0; i < cases.size(); ++i) {
    for (int r = 1; r < world; ++r) ASSERT_EQ(digests[i * world + r], digests[i * world]) << mp::describe(cases[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, HostLamport, ::testing::Values(2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) { return "world" + std::to_string(info.param); });

// The three buffers rotate across 1,000 calls of changing size, with barrier calls in between.
TEST(HostLamportProtocol, ThousandCallsRotateTheBuffers) {
  const int world = 3;
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = lamportConfig();
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
  const size_t counts[] = {1, 4096, 77, 5000, 8, 1023};
  auto errors = mp::runThreads(world, [&](int rank) {
    int bad = 0;
    std::vector<float> buf(5000);
    for (int n = 0; n < 1000; ++n) {
      const symmarAlgo_t algo = n % 7 == 3 ? symmarAlgoOneShot : n % 11 == 5 ? symmarAlgoTwoShot : symmarAlgoLamport;
      const size_t count = counts[n % 6];
      for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((i * 7 + n + rank * 3) % 19) - 9.0f;
      if (symmarAllReduceAlgo(buf.data(), buf.data(), count, symmarFloat32, symmarSum, algo, comms[rank], nullptr) !=
          symmarSuccess) {
        return 1000000;
      }
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int r = 0; r < world; ++r) want += static_cast<float>((i * 7 + n + r * 3) % 19) - 9.0f;
        bad += buf[i] != want;
      }
    }
    return bad;
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[r], 0) << "rank " << r;
    symmarCommDestroy(comms[r]);
  }
}

// The lamport call number is 32 bits and wraps; 2^32 is no multiple of 3, so a buffer index taken
// from it would put the wrapped call 0 into the buffer call 2^32-1 has just filled (and clear the
// wrong one before). Ranks start 6 lamport calls before the wrap, with barrier calls in between and
// different data in every call.
TEST(HostLamportProtocol, CallNumberWrapsPastTwoToThe32) {
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  const int world = 3;
  auto status = mp::runForked(world, [&](int rank) {
    setenv("SYMMAR_EPOCH_START", "4294967290", 1);
    symmarConfig_t cfg = lamportConfig(20000);
    symmarComm_t comm = nullptr;
    if (symmarCommInitRank(&comm, world, id, rank, &cfg) != symmarSuccess) return 1;
    int bad = 0;
    std::vector<float> buf(1000);
    for (int n = 0; n < 24 && bad == 0; ++n) {
      const symmarAlgo_t algo = n % 5 == 4 ? symmarAlgoOneShot : symmarAlgoLamport;
      const size_t count = n % 2 ? 1000 : 37;
      for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((i * 5 + n * 3 + rank * 7) % 23) - 11.0f;
      if (symmarAllReduceAlgo(buf.data(), buf.data(), count, symmarFloat32, symmarSum, algo, comm, nullptr) !=
          symmarSuccess) {
        fprintf(stderr, "rank %d call %d: %s\n", rank, n, symmarGetLastError(comm));
        return 1000;
      }
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int r = 0; r < world; ++r) want += static_cast<float>((i * 5 + n * 3 + r * 7) % 23) - 11.0f;
        bad += buf[i] != want;
      }
    }
    return bad + (symmarCommDestroy(comm) != symmarSuccess);
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}

TEST(HostLamportFailure, AMismatchedCallSucceedsOnNoRank) {
  const int world = 2;
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = lamportConfig(2000);
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
  std::vector<symmarResult_t> res(world);
  std::vector<std::string> text(world);
  mp::runThreads(world, [&](int rank) {
    std::vector<float> buf(300, 1.0f);
    res[rank] = symmarAllReduceAlgo(buf.data(), buf.data(), rank == 0 ? 100 : 200, symmarFloat32, symmarSum,
                                    symmarAlgoLamport, comms[rank], nullptr);
    text[rank] = symmarGetLastError(comms[rank]);
    return 0;
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_NE(res[r], symmarSuccess) << "rank " << r;
    symmarCommDestroy(comms[r]);
  }
  EXPECT_NE(text[0].find("mismatch"), std::string::npos) << text[0];
}

// Rank 0 makes a lamport call where rank 1 makes a one-shot call: each sees the other's call is
// not its own (a header where a barrier flag was due, a barrier flag ahead where a header was due).
TEST(HostLamportFailure, ALamportCallAgainstABarrierCallIsAMismatchOnBothRanks) {
  const int world = 2;
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = lamportConfig(5000);
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
  std::vector<symmarResult_t> res(world);
  const auto start = std::chrono::steady_clock::now();
  mp::runThreads(world, [&](int rank) {
    std::vector<float> buf(16, 1.0f);
    res[rank] = symmarAllReduceAlgo(buf.data(), buf.data(), 16, symmarFloat32, symmarSum,
                                    rank == 0 ? symmarAlgoLamport : symmarAlgoOneShot, comms[rank], nullptr);
    return 0;
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 4.0)
      << "found at once, not at the 5 s timeout";
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(res[r], symmarInvalidUsage) << "rank " << r;
    symmarCommDestroy(comms[r]);
  }
}

namespace {

enum class BarrierCall { kOneShot, kTwoShot, kFused };
const char* nameOf(BarrierCall k) {
  return k == BarrierCall::kOneShot ? "one-shot" : k == BarrierCall::kTwoShot ? "two-shot" : "fused";
}

// One call of 16 floats: a lamport allreduce, or the barrier call k (the fused call: 2 rows of 8).
symmarResult_t callOnce(symmarComm_t comm, bool lamport, BarrierCall k, int rank) {
  std::vector<float> x(16, static_cast<float>(rank + 1)), residual(16), norm(16), gamma(8, 1.0f);
  if (lamport || k != BarrierCall::kFused) {
    const symmarAlgo_t algo = lamport                      ? symmarAlgoLamport
                              : k == BarrierCall::kOneShot ? symmarAlgoOneShot
                                                           : symmarAlgoTwoShot;
    return symmarAllReduceAlgo(x.data(), x.data(), 16, symmarFloat32, symmarSum, algo, comm, nullptr);
  }
  symmarAddRmsNormArgs_t a{};
  a.input = x.data();
  a.residual_out = residual.data();
  a.norm_out = norm.data();
  a.gamma = gamma.data();
  a.eps = 1e-6f;
  a.tokens = 2;
  a.hidden = 8;
  a.dtype = symmarFloat32;
  return symmarAllReduceAddRmsNormAlgo(&a, symmarAlgoOneShot, comm, nullptr);
}

}  // namespace

// Rank 0: lamport, barrier call, lamport, lamport; rank 1: barrier call, lamport, lamport, lamport.
// The first two calls differ between the ranks and the last two come after a mismatch: no call may
// succeed on any rank. A refused barrier call that left the comm usable (its flag raised, the
// lamport call number unmoved) let rank 1's next lamport call pair with rank 0's pending one, and
// every call after it paired with the peer's previous one.
TEST(HostLamportFailure, ABarrierCallRefusedAgainstALamportCallFailsTheCommOnBothRanks) {
  const int world = 2, calls = 4;
  for (BarrierCall k : {BarrierCall::kOneShot, BarrierCall::kTwoShot, BarrierCall::kFused}) {
    for (int trial = 0; trial < 5; ++trial) {
      std::vector<symmarComm_t> comms(world);
      symmarConfig_t cfg = lamportConfig(3000);
      ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
      std::vector<symmarResult_t> res(world * calls);
      mp::runThreads(world, [&](int rank) {
        for (int n = 0; n < calls; ++n) {
          const bool lamport = rank == 0 ? n != 1 : n != 0;
          res[rank * calls + n] = callOnce(comms[rank], lamport, k, rank);
        }
        return 0;
      });
      for (int r = 0; r < world; ++r) {
        for (int n = 0; n < calls; ++n) {
          EXPECT_NE(res[r * calls + n], symmarSuccess)
              << nameOf(k) << ", trial " << trial << ": rank " << r << ", call " << n;
        }
        EXPECT_EQ(res[r * calls], symmarInvalidUsage) << nameOf(k) << ": rank " << r << " names the mismatch";
        symmarCommDestroy(comms[r]);
      }
    }
  }
}

// A rank that arrives after its peer gave up on a lamport call finds the peer's data in its buffer
// but must not complete the call: the peer returned symmarTimeout for it.
TEST(HostLamportFailure, ARankArrivingAfterThePeersTimeoutDoesNotSucceed) {
  const int world = 2;
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = lamportConfig(300);
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
  std::vector<symmarResult_t> res(world);
  mp::runThreads(world, [&](int rank) {
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    std::vector<float> buf(64, 1.0f);
    res[rank] = symmarAllReduceAlgo(buf.data(), buf.data(), 64, symmarFloat32, symmarSum, symmarAlgoLamport,
                                    comms[rank], nullptr);
    return 0;
  });
  EXPECT_EQ(res[0], symmarTimeout);
  EXPECT_NE(res[1], symmarSuccess) << "rank 0 did not complete this call";
  for (int r = 0; r < world; ++r) symmarCommDestroy(comms[r]);
}

TEST(HostLamportFailure, ARankThatNeverCallsTimesOutTheOthers) {
  const int world = 3;
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = lamportConfig(500);
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
  std::vector<symmarResult_t> res(world, symmarSuccess);
  const auto start = std::chrono::steady_clock::now();
  mp::runThreads(2, [&](int rank) {
    std::vector<float> buf(64, 1.0f);
    res[rank] = symmarAllReduceAlgo(buf.data(), buf.data(), 64, symmarFloat32, symmarSum, symmarAlgoLamport,
                                    comms[rank], nullptr);
    return 0;
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[r], symmarTimeout) << "rank " << r;
  for (int r = 0; r < world; ++r) symmarCommDestroy(comms[r]);
}

TEST(HostLamportFailure, OverTheLimitOrAnotherDtypeIsRefusedOnEveryRank) {
  const int world = 2;
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = lamportConfig(2000);
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
  mp::runThreads(world, [&](int rank) {
    std::vector<float> buf((256 << 10) / 4 + 1, 1.0f);
    EXPECT_EQ(symmarAllReduceAlgo(buf.data(), buf.data(), buf.size(), symmarFloat32, symmarSum, symmarAlgoLamport,
                                  comms[rank], nullptr),
              symmarUnsupported);
    EXPECT_EQ(symmarAllReduceAlgo(buf.data(), buf.data(), 16, symmarInt32, symmarSum, symmarAlgoLamport, comms[rank],
                                  nullptr),
              symmarUnsupported);
    // The comm is still good: the refusals moved nothing on any rank.
    std::vector<float> x(100, static_cast<float>(rank + 1));
    EXPECT_EQ(symmarAllReduceAlgo(x.data(), x.data(), 100, symmarFloat32, symmarSum, symmarAlgoLamport, comms[rank],
                                  nullptr),
              symmarSuccess);
    EXPECT_EQ(x[99], 3.0f);
    return 0;
  });
  for (int r = 0; r < world; ++r) symmarCommDestroy(comms[r]);
}
