// The host backend's staging ring (core/schedule.h: stagingRingShift): each allreduce,
// reduce-scatter or all-gather in its range stages at the next slot of a ring, and a peer reads a
// staged slice at the shift its writer used.
// The shift by hand; calls that move around the ring, cross its size limits, wrap its slots and
// the call number, against the float64 reference on every rank; ranks one call apart (so at other
// places in the ring) refuse the call instead of pairing it; ranks that disagree about the ring all
// stage at the start of the half instead of reading each other at different places.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "api/comm.h"
#include "common/reference.h"
#include "core/schedule.h"
#include "host/host_backend.h"

namespace {

namespace sched = symmar::sched;

bool usesRing(symmarComm_t comm) {
  const auto* host = dynamic_cast<const symmar::HostBackend*>(comm->backend.get());
  return host && host->usesStagingRing();
}

TEST(StagingRing, ShiftWorkedByHand) {
  constexpr size_t kStaging = 32 << 20;  // halves of 16 MiB: the ring spans 4 MiB of each
  // 64 KiB: slots of 128 KiB, 32 of them in 4 MiB.
  EXPECT_EQ(sched::stagingRingShift(65536, kStaging, 0), 0u);
  EXPECT_EQ(sched::stagingRingShift(65536, kStaging, 5), 5u * 131072);
  EXPECT_EQ(sched::stagingRingShift(65536, kStaging, 32), 0u);
  EXPECT_EQ(sched::stagingRingShift(65536, kStaging, 4294967295u), 31u * 131072);  // 2^32 - 1 = 32 x 134217727 + 31
  // 8 KiB is the first size in the ring (slots of 16 KiB, 256 of them); one byte less stays at 0.
  EXPECT_EQ(sched::stagingRingShift(8192, kStaging, 257), 1u * 16384);
  EXPECT_EQ(sched::stagingRingShift(8191, kStaging, 257), 0u);
  // The last size is a quarter of the ring (two slots of 2 MiB); one byte more stays at 0.
  EXPECT_EQ(sched::stagingRingShift(1048576, kStaging, 1), 2097152u);
  EXPECT_EQ(sched::stagingRingShift(1048577, kStaging, 1), 0u);
  // A 1 MiB staging buffer (halves of 512 KiB): the ring is the half, up to 128 KiB calls.
  EXPECT_EQ(sched::stagingRingShift(65536, 1 << 20, 1), 131072u);
  EXPECT_EQ(sched::stagingRingShift(65536, 1 << 20, 4), 0u);        // four slots of 128 KiB
  EXPECT_EQ(sched::stagingRingShift(100000, 1 << 20, 1), 200704u);  // 200000 rounded up to pages
  EXPECT_EQ(sched::stagingRingShift(140000, 1 << 20, 1), 0u);
  // The slots a call has in the ring, 0 where it stages at the half's start.
  EXPECT_EQ(sched::stagingRingSlots(65536, kStaging), 32u);
  EXPECT_EQ(sched::stagingRingSlots(1048576, kStaging), 2u);
  EXPECT_EQ(sched::stagingRingSlots(8191, kStaging), 0u);
  EXPECT_EQ(sched::stagingRingSlots(1048577, kStaging), 0u);
  EXPECT_EQ(sched::stagingRingSlots(100000, 1 << 20), 2u);  // slots of 200704 bytes in 512 KiB
  EXPECT_EQ(sched::stagingRingSlots(140000, 1 << 20), 0u);
  // A collective's own smallest call (the all-gather's 16 KiB blocks).
  EXPECT_EQ(sched::stagingRingSlots(16383, kStaging, 16384), 0u);
  EXPECT_EQ(sched::stagingRingSlots(16384, kStaging, 16384), 128u);
  EXPECT_EQ(sched::stagingRingShift(16384, kStaging, 130, 16384), 2u * 32768);
  EXPECT_EQ(sched::stagingRingShift(16383, kStaging, 130, 16384), 0u);
}

TEST(StagingRing, EveryShiftKeepsTheCallInsideItsHalf) {
  for (size_t staging : {size_t{64} << 10, size_t{1} << 20, size_t{3} << 20, size_t{32} << 20, size_t{33554431}}) {
    const size_t half = sched::stagingHalfBytes(staging);
    for (size_t bytes = 1; bytes <= (size_t{2} << 20); bytes = bytes * 5 / 4 + 1) {
      for (uint32_t call : {0u, 1u, 2u, 7u, 1000u, 65537u, 4294967294u, 4294967295u}) {
        const size_t shift = sched::stagingRingShift(bytes, staging, call);
        // (a call that writes more than a half goes in chunks of a half, at the half's start)
        ASSERT_LE(shift + bytes, bytes <= half ? half : bytes) << staging << " " << bytes << " " << call;
        ASSERT_EQ(shift % 4096, 0u);
      }
    }
  }
}

// Counts around and across the ring's limits (float32: 8 KiB is 2048 elements, a quarter of the
// ring 262144), odd ones included.
const size_t kCounts[] = {2047, 2048, 5000, 16411, 65536, 262144, 262145, 300000};

// Small integers: exact in bfloat16, and so are their sums over a few ranks.
double inputAt(int rank, size_t i, int call) { return static_cast<double>((rank * 7 + i * 3 + call * 5) % 17) - 8; }

// Every rank runs rounds x kCounts allreduces (one-shot and two-shot by turns, float32 and bfloat16,
// in place every third call) and checks every element against the sum in double; returns the
// wrong calls.
int ringCalls(symmarComm_t comm, int rank, int world, int rounds) {
  int wrong = 0, call = 0;
  for (int round = 0; round < rounds; ++round) {
    for (size_t count : kCounts) {
      const symmarDataType_t dt = call % 2 ? symmarBfloat16 : symmarFloat32;
      const bool in_place = call % 3 == 0;
      const symmarAlgo_t algo = call % 4 < 2 ? symmarAlgoTwoShot : symmarAlgoOneShot;
      std::vector<float> send(count), recv(count);  // room for count elements of either dtype
      for (size_t i = 0; i < count; ++i) testref::storeElement(send.data(), dt, i, inputAt(rank, i, call));
      void* out = in_place ? send.data() : recv.data();
      if (symmarAllReduceAlgo(send.data(), out, count, dt, symmarSum, algo, comm, nullptr) != symmarSuccess) {
        fprintf(stderr, "rank %d call %d failed: %s\n", rank, call, symmarGetLastError(comm));
        return wrong + 1;
      }
      for (size_t i = 0; i < count; ++i) {
        double want = 0;
        for (int r = 0; r < world; ++r) want += inputAt(r, i, call);
        if (testref::loadElement(out, dt, i) != want) {
          fprintf(stderr, "rank %d call %d (%zu x dtype %d): element %zu is %g, not %g\n", rank, call, count, dt, i,
                  testref::loadElement(out, dt, i), want);
          ++wrong;
          break;
        }
      }
      ++call;
    }
  }
  return wrong;
}

// Every rank runs rounds x 4 fused calls of 1024 float32 a row (2, 4, 8 and 19 rows: staged and
// published rows in the ring), one-shot and two-shot by turns, no residual, gamma 1: residual_out
// must be the double sum exactly, norm_out that sum over its RMS to float rounding; returns the
// wrong calls.
int fusedRingCalls(symmarComm_t comm, int rank, int world, int rounds) {
  constexpr size_t kHidden = 1024;
  int wrong = 0, call = 0;
  for (int round = 0; round < rounds; ++round) {
    for (size_t tokens : {size_t(2), size_t(4), size_t(8), size_t(19)}) {
      const size_t n = tokens * kHidden;
      std::vector<float> in(n), res(n), norm(n), gamma(kHidden, 1.0f);
      for (size_t i = 0; i < n; ++i) in[i] = static_cast<float>(inputAt(rank, i, call));
      symmarAddRmsNormArgs_t a{};
      a.input = in.data();
      a.residual_out = res.data();
      a.norm_out = norm.data();
      a.gamma = gamma.data();
      a.eps = 1e-6f;
      a.tokens = tokens;
      a.hidden = kHidden;
      a.dtype = symmarFloat32;
      const symmarAlgo_t algo = call % 2 ? symmarAlgoTwoShot : symmarAlgoOneShot;
      if (symmarAllReduceAddRmsNormAlgo(&a, algo, comm, nullptr) != symmarSuccess) {
        fprintf(stderr, "rank %d fused call %d failed: %s\n", rank, call, symmarGetLastError(comm));
        return wrong + 1;
      }
      for (size_t t = 0; t < tokens; ++t) {
        double squares = 0;
        std::vector<double> sum(kHidden);
        for (size_t i = 0; i < kHidden; ++i) {
          for (int r = 0; r < world; ++r) sum[i] += inputAt(r, t * kHidden + i, call);
          squares += sum[i] * sum[i];
        }
        const double inv = 1.0 / std::sqrt(squares / kHidden + 1e-6);
        bool bad = false;
        for (size_t i = 0; i < kHidden && !bad; ++i) {
          const double want = sum[i] * inv;
          bad = res[t * kHidden + i] != sum[i] || std::fabs(norm[t * kHidden + i] - want) > 1e-5 * std::fabs(want) + 1e-6;
        }
        if (bad) {
          fprintf(stderr, "rank %d fused call %d (%zu rows): row %zu is wrong\n", rank, call, tokens, t);
          ++wrong;
          break;
        }
      }
      ++call;
    }
  }
  return wrong;
}

// Blocks (elements per rank) of the reduce-scatters and all-gathers, around and across the ring's
// limits: a reduce-scatter takes the ring from a float32 block of 2048 (8 KiB, what a peer reads)
// to whole buffers of 1 MiB (131072 at 2 ranks), an all-gather from a block of 4096 to 262144.
const size_t kBlocks[] = {2047, 2048, 4095, 4096, 5000, 16411, 65536, 131072, 131073};

// As ringCalls, for one-shot reduce-scatters and all-gathers by turns (in place every third call):
// every output element against the sum in double (reduce-scatter) or the input it copies.
int scatterGatherRingCalls(symmarComm_t comm, int rank, int world, int rounds) {
  int wrong = 0, call = 0;
  for (int round = 0; round < rounds; ++round) {
    for (size_t count : kBlocks) {
      const symmarDataType_t dt = call % 4 < 2 ? symmarBfloat16 : symmarFloat32;
      const size_t elem = dt == symmarFloat32 ? 4 : 2;
      const bool reduce = call % 2 == 0, in_place = call % 3 == 0;
      const size_t whole = count * static_cast<size_t>(world);
      std::vector<float> big(whole), small(count);  // room for either dtype
      char* const own_block = reinterpret_cast<char*>(big.data()) + static_cast<size_t>(rank) * count * elem;
      symmarResult_t res;
      const void* out;
      if (reduce) {
        for (size_t i = 0; i < whole; ++i) testref::storeElement(big.data(), dt, i, inputAt(rank, i, call));
        out = in_place ? static_cast<void*>(own_block) : small.data();
        res = symmarReduceScatterAlgo(big.data(), const_cast<void*>(out), count, dt, symmarSum, symmarAlgoOneShot, comm,
                                      nullptr);
      } else {
        void* send = in_place ? static_cast<void*>(own_block) : small.data();
        for (size_t i = 0; i < count; ++i) testref::storeElement(send, dt, i, inputAt(rank, i, call));
        out = big.data();
        res = symmarAllGatherAlgo(send, big.data(), count, dt, symmarAlgoOneShot, comm, nullptr);
      }
      if (res != symmarSuccess) {
        fprintf(stderr, "rank %d call %d failed: %s\n", rank, call, symmarGetLastError(comm));
        return wrong + 1;
      }
      const size_t n = reduce ? count : whole;
      for (size_t i = 0; i < n; ++i) {
        double want = 0;  // reduce-scatter: element rank * count + i summed; all-gather: rank i / count's input
        if (reduce) {
          for (int r = 0; r < world; ++r) want += inputAt(r, static_cast<size_t>(rank) * count + i, call);
        } else {
          want = inputAt(static_cast<int>(i / count), i % count, call);
        }
        if (testref::loadElement(out, dt, i) != want) {
          fprintf(stderr, "rank %d call %d (%s, %zu x dtype %d): element %zu is %g, not %g\n", rank, call,
                  reduce ? "reduce-scatter" : "all-gather", count, dt, i, testref::loadElement(out, dt, i), want);
          ++wrong;
          break;
        }
      }
      ++call;
    }
  }
  return wrong;
}

TEST(StagingRing, CallsAroundTheRingMatchTheReference) {
  // Forced on: at 3 and 4 ranks on a small machine the ring would be off by default.
  setenv("SYMMAR_HOST_STAGING_RING", "1", 1);
  for (int world : {2, 3, 4}) {
    std::vector<symmarComm_t> comms(static_cast<size_t>(world));
    symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
    cfg.device = SYMMAR_DEVICE_CPU;
    ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
    for (symmarComm_t comm : comms) EXPECT_TRUE(usesRing(comm));
    // 12 rounds at 2 ranks: the 65536-element calls (float32, 256 KiB: 8 slots) come round the
    // ring again, with the other sizes' calls between them.
    std::vector<int> errors(static_cast<size_t>(world));
    std::vector<std::thread> ranks;
    for (int r = 0; r < world; ++r) {
      ranks.emplace_back([&, r] {
        symmarComm_t comm = comms[static_cast<size_t>(r)];
        errors[static_cast<size_t>(r)] =
            ringCalls(comm, r, world, world == 2 ? 12 : 4) + scatterGatherRingCalls(comm, r, world, world == 2 ? 6 : 3);
      });
    }
    for (std::thread& t : ranks) t.join();
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(errors[static_cast<size_t>(r)], 0) << "world " << world << " rank " << r;
      symmarCommDestroy(comms[static_cast<size_t>(r)]);
    }
  }
  unsetenv("SYMMAR_HOST_STAGING_RING");
}

TEST(StagingRing, CallsAcrossTheCallNumberWrapMatchTheReference) {
  // The start epoch doubles as the first call number: the slots' call % slots jumps at the wrap,
  // on every rank alike.
  setenv("SYMMAR_HOST_STAGING_RING", "1", 1);
  setenv("SYMMAR_EPOCH_START", "4294967100", 1);  // wraps after about 200 calls
  std::vector<symmarComm_t> comms(2);
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  const symmarResult_t init = symmarCommInitAll(comms.data(), 2, nullptr, &cfg);
  unsetenv("SYMMAR_EPOCH_START");
  unsetenv("SYMMAR_HOST_STAGING_RING");
  ASSERT_EQ(init, symmarSuccess);
  std::vector<int> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      symmarComm_t comm = comms[static_cast<size_t>(r)];
      errors[static_cast<size_t>(r)] =
          ringCalls(comm, r, 2, 20) + scatterGatherRingCalls(comm, r, 2, 10) + fusedRingCalls(comm, r, 2, 10) +
          ringCalls(comm, r, 2, 20);
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], 0) << "rank " << r;
    symmarCommDestroy(comms[static_cast<size_t>(r)]);
  }
}

// Runs body(comm, rank) in two forked ranks of one comm, rank r with SYMMAR_HOST_STAGING_RING set
// to ring[r] and no cross-memory reads (5 s timeout), and returns their exit statuses (0: passed).
std::vector<int> forkedPair(const std::function<int(symmarComm_t, int)>& body, const char* const ring[2]) {
  symmarUniqueId id;
  if (symmarGetUniqueId(&id) != symmarSuccess) return {-1, -1};
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("SYMMAR_HOST_STAGING_RING", ring[rank], 1);
      setenv("SYMMAR_HOST_CMA", "0", 1);  // all-gathers stage their blocks rather than have peers read them
      symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
      cfg.device = SYMMAR_DEVICE_CPU;
      cfg.timeout_ms = 5000;
      symmarComm_t comm = nullptr;
      if (symmarCommInitRank(&comm, 2, id, rank, &cfg) != symmarSuccess) _exit(10);
      const int res = body(comm, rank);
      symmarCommDestroy(comm);
      _exit(res);
    }
    pids.push_back(pid);
  }
  std::vector<int> status(2);
  for (int rank = 0; rank < 2; ++rank) {
    int st = 0;
    waitpid(pids[static_cast<size_t>(rank)], &st, 0);
    status[static_cast<size_t>(rank)] = WIFEXITED(st) ? WEXITSTATUS(st) : 100 + st;
  }
  return status;
}

// The fused allreduce + residual + RMSNorm of count / 1024 rows of 1024 float32 (4, 8 and 19 rows
// for the counts below: every form's staged or published rows in the ring), residual_out and
// norm_out in recv (twice count elements), gamma the send buffer itself.
symmarResult_t fusedRows(symmarComm_t comm, float* send, float* recv, size_t count, symmarAlgo_t algo) {
  symmarAddRmsNormArgs_t a{};
  a.input = send;
  a.residual_out = recv;
  a.norm_out = recv + count;
  a.gamma = send;
  a.eps = 1e-6f;
  a.tokens = count / 1024;
  a.hidden = 1024;
  a.dtype = symmarFloat32;
  return symmarAllReduceAddRmsNormAlgo(&a, algo, comm, nullptr);
}

TEST(StagingRing, RanksOneCallApartNeverPair) {
  // Rank 1 skips the first call, so each of its calls meets rank 0's call before it, of another
  // size and so at another place in the ring: both ranks must refuse it (symmarInvalidUsage)
  // before reading anything staged, never pair it. Rank 0's last call meets a peer that left.
  const char* const both[2] = {"1", "1"};
  // 16-80 KiB of float32 (blocks of 8-40 KiB): rank 1's calls in the ring in every form.
  const size_t counts[] = {4096, 8192, 20000};
  using Form = std::function<symmarResult_t(symmarComm_t, float*, float*, size_t)>;
  const std::pair<const char*, Form> forms[] = {
      {"one-shot allreduce",
       [](symmarComm_t comm, float* send, float* recv, size_t count) {
         return symmarAllReduceAlgo(send, recv, count, symmarFloat32, symmarSum, symmarAlgoOneShot, comm, nullptr);
       }},
      {"two-shot allreduce",
       [](symmarComm_t comm, float* send, float* recv, size_t count) {
         return symmarAllReduceAlgo(send, recv, count, symmarFloat32, symmarSum, symmarAlgoTwoShot, comm, nullptr);
       }},
      {"reduce-scatter",
       [](symmarComm_t comm, float* send, float* recv, size_t count) {
         return symmarReduceScatterAlgo(send, recv, count / 2, symmarFloat32, symmarSum, symmarAlgoOneShot, comm,
                                        nullptr);
       }},
      {"all-gather",
       [](symmarComm_t comm, float* send, float* recv, size_t count) {
         return symmarAllGatherAlgo(send, recv, count / 2, symmarFloat32, symmarAlgoOneShot, comm, nullptr);
       }},
      {"fused one-shot", [](symmarComm_t comm, float* send, float* recv,
                            size_t count) { return fusedRows(comm, send, recv, count, symmarAlgoOneShot); }},
      {"fused two-shot", [](symmarComm_t comm, float* send, float* recv,
                            size_t count) { return fusedRows(comm, send, recv, count, symmarAlgoTwoShot); }},
  };
  for (const auto& form : forms) {
    const std::vector<int> status = forkedPair(
        [&](symmarComm_t comm, int rank) {
          if (!usesRing(comm)) return 11;
          std::vector<float> send(counts[2], 1.0f), recv(2 * counts[2]);
          int wrong = 0;
          for (int k = rank; k < 3; ++k) {  // rank 0: calls 0, 1, 2; rank 1: calls 1, 2
            const symmarResult_t res = form.second(comm, send.data(), recv.data(), counts[k]);
            const bool last_alone = rank == 0 && k == 2;
            if (last_alone ? res == symmarSuccess : res != symmarInvalidUsage) {
              fprintf(stderr, "%s, rank %d call %d: %s\n", form.first, rank, k, symmarGetErrorString(res));
              ++wrong;
            }
          }
          return wrong ? 12 : 0;
        },
        both);
    EXPECT_EQ(status[0], 0) << form.first;
    EXPECT_EQ(status[1], 0) << form.first;
  }
}

TEST(StagingRing, RanksThatDisagreeAllStageAtTheStartOfTheHalf) {
  // One rank asks for the ring and the other not: neither takes it, and every call is right. A
  // rank that took it alone would stage where its peer does not read.
  for (int asking : {0, 1}) {
    const char* const ring[2] = {asking == 0 ? "1" : "0", asking == 1 ? "1" : "0"};
    const std::vector<int> status = forkedPair(
        [&](symmarComm_t comm, int rank) {
          if (usesRing(comm)) return 11;
          return ringCalls(comm, rank, 2, 2) + scatterGatherRingCalls(comm, rank, 2, 1) ? 12 : 0;
        },
        ring);
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_EQ(status[static_cast<size_t>(rank)], 0)
          << "rank " << rank << " (rank " << asking << " asked for the ring)";
    }
  }
}

TEST(StagingRing, OffByDefaultWhereRanksOutnumberTheCores) {
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores == 0 || cores + 1 > 9) GTEST_SKIP() << "needs at most 8 cores to outnumber them with threads: " << cores;
  const int world = static_cast<int>(cores) + 1;
  std::vector<symmarComm_t> comms(static_cast<size_t>(world));
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
  for (symmarComm_t comm : comms) {
    EXPECT_FALSE(usesRing(comm));
    symmarCommDestroy(comm);
  }
}

}  // namespace
