// A rank never returns success for a call its peers did not make and complete: a late rank meets a
// call its peer failed (on one host or across hosts), two comms share one unique id, count 0 must
// not shift the pairing of later calls, a peer publishes an out-of-range input offset.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/schedule.h"
#include "fault/fault_util.h"
#include "fault/shm_inter_host.h"
#include "host/shm_heap.h"
#include "mp/mp_util.h"

using fault::checkedAllReduce;
using fault::initCpu;
using fault::since;
using fault::sleepMs;

namespace {

constexpr int kTimeoutMs = 1000;

// Rank 0 times out on a one-shot call rank 1 has not made yet; rank 1 makes it later. Rank 1 must
// fail it too: rank 0 abandoned the call (its flag and staging are no contribution). On two hosts
// rank 0's inter-host record still reaches rank 1 (as a sent MPI message does), and rank 1 must
// not take it for a completed exchange.
void lateRankCase(bool destroy_after_failure, bool two_hosts = false) {
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
      symmarResult_t res = checkedAllReduce(comm, 0, 2, 4, 0, &wrong, symmarAlgoOneShot);
      if (res != symmarTimeout) return 11;
      if (!destroy_after_failure) sleepMs(2 * kTimeoutMs + 500);
      return symmarCommDestroy(comm) == symmarSuccess ? 0 : 12;
    }
    sleepMs(kTimeoutMs + 500);
    symmarResult_t res = checkedAllReduce(comm, 1, 2, 4, 0, &wrong, symmarAlgoOneShot);
    if (res == symmarSuccess) {
      fprintf(stderr, "rank 1: completed a call rank 0 had failed (%s)\n", wrong ? "wrong sum" : "sum happened to fit");
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

namespace {

// This process's own heap segment: the mapping whose header carries its pid.
char* ownSegment() {
  FILE* maps = fopen("/proc/self/maps", "r");
  if (!maps) return nullptr;
  char line[512];
  char* found = nullptr;
  while (!found && fgets(line, sizeof(line), maps)) {
    if (!strstr(line, "symmar-heap")) continue;
    unsigned long lo = 0;
    if (sscanf(line, "%lx-", &lo) != 1) continue;
    auto* header = reinterpret_cast<symmar::SegmentHeader*>(lo);
    if (header->pid == getpid()) found = reinterpret_cast<char*>(lo);
  }
  fclose(maps);
  return found;
}

// The call signature a host two-shot publishes for (count, f32, sum) as call number `call` of its
// comm: the protocol's FNV-1a over (count, dtype, op, algorithm), never 0, then over the call number.
uint64_t twoShotSignature(size_t count, uint32_t call) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t v :
       {static_cast<uint64_t>(count), uint64_t{symmarFloat32}, uint64_t{symmarSum}, uint64_t{symmarAlgoTwoShot}}) {
    h = (h ^ v) * 1099511628211ull;
  }
  return (((h | 1) ^ call) * 1099511628211ull) | 1;
}

}  // namespace

// A hostile rank 1 arrives at rank 0's two-shot barrier with an input offset far outside its
// heap. Rank 0 must refuse it (symmarPeerFailure), not read outside the mapping.
TEST(SilentWrong, PeerInputOffsetOutsideItsHeapIsRefused) {
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  constexpr size_t kCount = 4096;
  auto status = mp::runForked(2, [&](int rank) {
    symmarComm_t comm = initCpu(id, 2, rank, 2000);
    if (!comm) return 10;
    if (rank == 1) {
      char* seg = ownSegment();
      if (!seg) return 20;
      namespace sched = symmar::sched;
      const uint32_t epoch = 1;  // the first barrier after a start epoch of 0, of the first call (number 1)
      uint32_t* flag =
          reinterpret_cast<uint32_t*>(seg + symmar::ShmHeap::kHeaderBytes + sched::flagOffset(0, sched::kSlotStart));
      auto* words = reinterpret_cast<char*>(flag);
      const uint64_t input_offset = uint64_t{1} << 40;
      const uint64_t sig = twoShotSignature(kCount, 1);
      memcpy(words + sched::paritySlotOffset(epoch, 0), &input_offset, sizeof(input_offset));
      memcpy(words + sched::paritySlotOffset(epoch, 1), &sig, sizeof(sig));
      __atomic_store_n(flag, epoch, __ATOMIC_RELEASE);
      sleepMs(3000);
      return 0;
    }
    std::vector<float> buf(kCount, 1.0f);
    symmarResult_t res =
        symmarAllReduceAlgo(buf.data(), buf.data(), kCount, symmarFloat32, symmarSum, symmarAlgoTwoShot, comm, nullptr);
    std::string err = symmarGetLastError(comm);
    if (res != symmarPeerFailure || err.find("input offset") == std::string::npos) {
      fprintf(stderr, "rank 0: %s: %s\n", symmarGetErrorString(res), err.c_str());
      return 11;
    }
    symmarCommDestroy(comm);
    return 0;
  });
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 0);
}
