// The host backend's staging ring (core/schedule.h: stagingRingShift): each allreduce,
// reduce-scatter or all-gather in its range stages at the next slot of a ring, and a peer reads a
// staged slice at the shift its writer used.
// The shift by hand; calls that move around the ring, cross its size limits, wrap its slots and
// the call number, against the float64 reference on every rank; ranks one call apart (so at other
// places in the ring) refuse the call instead of pairing it; ranks that disagree about the ring all
// stage at the start of the half instead of reading each other at different places; each rank's ring
// lies on its own memory node.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/comm.h"
#include "host_call_checks.h"
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

TEST(StagingRing, CallsAroundTheRingMatchTheReference) {
  // Forced on: at 3 and 4 ranks on a small machine the ring would be off by default.
  setenv("SYMMAR_HOST_STAGING_RING", "1", 1);
  for (int world : {2, 3, 4}) {
    // 12 rounds at 2 ranks: the 65536-element calls (float32, 256 KiB: 8 slots) come round the
    // ring again, with the other sizes' calls between them.
    const std::vector<int> errors = hostcalls::onThreadRanks(world, [world](symmarComm_t comm, int r) {
      if (!usesRing(comm)) return 100;
      return hostcalls::allReduceCalls(comm, r, world, world == 2 ? 12 : 4) +
             hostcalls::scatterGatherCalls(comm, r, world, world == 2 ? 6 : 3);
    });
    for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], 0) << "world " << world << " rank " << r;
  }
  unsetenv("SYMMAR_HOST_STAGING_RING");
}

TEST(StagingRing, CallsAcrossTheCallNumberWrapMatchTheReference) {
  // The start epoch doubles as the first call number: the slots' call % slots jumps at the wrap,
  // on every rank alike.
  setenv("SYMMAR_HOST_STAGING_RING", "1", 1);
  setenv("SYMMAR_EPOCH_START", "4294967100", 1);  // wraps after about 200 calls
  const std::vector<int> errors = hostcalls::onThreadRanks(2, [](symmarComm_t comm, int r) {
    return hostcalls::allReduceCalls(comm, r, 2, 20) + hostcalls::scatterGatherCalls(comm, r, 2, 10) +
           hostcalls::fusedCalls(comm, r, 2, 10) + hostcalls::allReduceCalls(comm, r, 2, 20);
  });
  unsetenv("SYMMAR_EPOCH_START");
  unsetenv("SYMMAR_HOST_STAGING_RING");
  for (int r = 0; r < 2; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], 0) << "rank " << r;
}

// Runs body(comm, rank) in two forked ranks of one comm, rank r with SYMMAR_HOST_STAGING_RING set
// to ring[r] and no cross-memory reads (5 s timeout), and returns their exit statuses (0: passed).
// before_init(rank), where given, runs in each rank before it joins the comm.
std::vector<int> forkedPair(const std::function<int(symmarComm_t, int)>& body, const char* const ring[2],
                            const std::function<void(int)>& before_init = {}) {
  return hostcalls::onForkedRanks(
      2,
      [&](int rank) {
        setenv("SYMMAR_HOST_STAGING_RING", ring[rank], 1);
        setenv("SYMMAR_HOST_CMA", "0", 1);  // all-gathers stage their blocks rather than have peers read them
        if (before_init) before_init(rank);
      },
      body);
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
          return hostcalls::allReduceCalls(comm, rank, 2, 2) + hostcalls::scatterGatherCalls(comm, rank, 2, 1) ? 12 : 0;
        },
        ring);
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_EQ(status[static_cast<size_t>(rank)], 0)
          << "rank " << rank << " (rank " << asking << " asked for the ring)";
    }
  }
}

// The first CPU of each memory node that has CPUs, in node order: {node, cpu}.
std::vector<std::pair<int, int>> nodesWithCpus() {
  std::vector<std::pair<int, int>> nodes;
  for (int node = 0; node < 1024; ++node) {
    const std::string path = "/sys/devices/system/node/node" + std::to_string(node) + "/cpulist";
    FILE* f = std::fopen(path.c_str(), "r");
    if (!f) continue;
    int cpu = -1;
    if (std::fscanf(f, "%d", &cpu) == 1 && cpu >= 0) nodes.emplace_back(node, cpu);
    std::fclose(f);
  }
  return nodes;
}

// The memory node a page of this process lies on (move_pages without a target node only asks).
int pageNode(const char* p) {
  void* pages[1] = {const_cast<char*>(p)};
  int status[1] = {-1};
  if (syscall(SYS_move_pages, 0, 1UL, pages, nullptr, status, 0) != 0) return -1;
  return status[0];
}

TEST(StagingRing, EachRanksRingLiesOnTheMemoryNodeOfItsRank) {
  // A page of shared memory is placed on the node of the CPU that touches it first. Comm creation
  // maps every rank's ring; each rank maps its own before any peer does, so that its staging,
  // which it writes and its peers read, lies on its own node whichever rank is faster.
  const std::vector<std::pair<int, int>> nodes = nodesWithCpus();
  if (nodes.size() < 2) GTEST_SKIP() << "this machine has one memory node with CPUs: every page lies on it";
  const char* const ring[2] = {"1", "1"};
  const std::vector<int> status = forkedPair(
      [&](symmarComm_t comm, int rank) {
        const auto* host = dynamic_cast<const symmar::HostBackend*>(comm->backend.get());
        if (!host || !host->usesStagingRing()) return 11;
        const int node = nodes[static_cast<size_t>(rank)].first;
        const size_t mapped = std::min(sched::kStagingRingBytes, sched::stagingHalfBytes(host->heap()->stagingBytes()));
        for (int half = 0; half < 2; ++half) {
          for (size_t at = 0; at < mapped; at += 16 * 4096) {
            if (pageNode(host->heap()->staging(rank, half) + at) != node) return 12;
          }
        }
        return 0;
      },
      ring,
      [&](int rank) {
        cpu_set_t cpus;
        CPU_ZERO(&cpus);
        CPU_SET(nodes[static_cast<size_t>(rank)].second, &cpus);
        if (sched_setaffinity(0, sizeof(cpus), &cpus) != 0) _exit(13);
      });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(status[static_cast<size_t>(rank)], 0)
        << "rank " << rank << " (12: a page of its ring lies on another node; 13: it could not be bound to node "
        << nodes[static_cast<size_t>(rank)].first << ")";
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
