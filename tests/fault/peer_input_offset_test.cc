// A peer's published input offset is data from another process: one outside its heap is refused
// before anything is read through it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/schedule.h"
#include "fault/fault_util.h"
#include "host/shm_heap.h"
#include "mp/mp_util.h"

using fault::checkedAllReduce;
using fault::initCpu;
using fault::sleepMs;

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
uint64_t twoShotSignature(size_t count, uint32_t call, uint64_t algo_code = symmarAlgoTwoShot) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t v : {static_cast<uint64_t>(count), uint64_t{symmarFloat32}, uint64_t{symmarSum}, algo_code}) {
    h = (h ^ v) * 1099511628211ull;
  }
  return (((h | 1) ^ call) * 1099511628211ull) | 1;
}

// Rank 1 of the comm this process forms arrives at the first barrier (call number 1) with
// input_offset and the signature sig, as a hostile or broken peer would.
bool publishHostileBarrier(uint64_t input_offset, uint64_t sig) {
  char* seg = ownSegment();
  if (!seg) return false;
  namespace sched = symmar::sched;
  const uint32_t epoch = 1;  // the first barrier after a start epoch of 0
  uint32_t* flag =
      reinterpret_cast<uint32_t*>(seg + symmar::ShmHeap::kHeaderBytes + sched::flagOffset(0, sched::kSlotStart));
  auto* words = reinterpret_cast<char*>(flag);
  memcpy(words + sched::paritySlotOffset(epoch, 0), &input_offset, sizeof(input_offset));
  memcpy(words + sched::paritySlotOffset(epoch, 1), &sig, sizeof(sig));
  __atomic_store_n(flag, epoch, __ATOMIC_RELEASE);
  return true;
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
      if (!publishHostileBarrier(uint64_t{1} << 40, twoShotSignature(kCount, 1))) return 20;
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

namespace {

// Rank 1 of a 2-rank comm publishes `word` as its input at the first barrier of a one-shot
// reduce-scatter or all-gather of kScatterGatherBlock floats a rank, which rank 0 makes; rank 0
// exits 0 when accept(result, message) holds. env_name=env_value is set on both ranks first.
constexpr size_t kScatterGatherBlock = 2048;  // 8 KiB blocks, a 16 KiB reduce-scatter input

std::vector<int> hostileScatterGather(bool scatter, uint64_t word, const char* env_name, const char* env_value,
                                      const std::function<bool(symmarResult_t, const std::string&)>& accept) {
  constexpr size_t kBlock = kScatterGatherBlock;
  symmarUniqueId id;
  if (symmarGetUniqueId(&id) != symmarSuccess) return {30, 30};
  return mp::runForked(2, [&](int rank) {
    setenv(env_name, env_value, 1);
    symmarComm_t comm = initCpu(id, 2, rank, 2000);
    if (!comm) return 10;
    if (rank == 1) {
      // The collective's algorithm code in its signature: 200 + 16 x collective + algorithm (core/call.h).
      const uint64_t code = 200 + 16 * (scatter ? 1 : 2) + symmarAlgoOneShot;
      if (!publishHostileBarrier(word, twoShotSignature(kBlock, 1, code))) return 20;
      sleepMs(3000);
      return 0;
    }
    std::vector<float> whole(2 * kBlock, 1.0f), block(kBlock, 1.0f);
    const symmarResult_t res =
        scatter ? symmarReduceScatterAlgo(whole.data(), block.data(), kBlock, symmarFloat32, symmarSum,
                                          symmarAlgoOneShot, comm, nullptr)
                : symmarAllGatherAlgo(block.data(), whole.data(), kBlock, symmarFloat32, symmarAlgoOneShot, comm,
                                      nullptr);
    const std::string err = symmarGetLastError(comm);
    if (!accept(res, err)) {
      fprintf(stderr, "rank 0: %s: %s\n", symmarGetErrorString(res), err.c_str());
      return 11;
    }
    symmarCommDestroy(comm);
    return 0;
  });
}

bool refusedAsOffset(symmarResult_t res, const std::string& err) {
  return res == symmarPeerFailure && err.find("input offset") != std::string::npos;
}

}  // namespace

// The same for a reduce-scatter and an all-gather, whose peers read a symmetric input in place.
// The reduce-scatter's offset leaves room for one block in the 1 MiB heap but not for the whole
// input (nranks blocks) it names: it must be refused as well.
TEST(SilentWrong, PeerInputOffsetOutsideItsHeapIsRefusedByScatterGather) {
  for (bool scatter : {true, false}) {
    for (uint64_t offset : {uint64_t{1} << 40, uint64_t{(1u << 20) - kScatterGatherBlock * sizeof(float)}}) {
      if (!scatter && offset < (uint64_t{1} << 40)) continue;  // one block fits: valid for an all-gather
      const auto status = hostileScatterGather(scatter, offset, "SYMMAR_HEAP_BYTES", "1M", refusedAsOffset);
      EXPECT_EQ(status[0], 0) << (scatter ? "reduce-scatter" : "all-gather") << " offset " << offset;
      EXPECT_EQ(status[1], 0);
    }
  }
}

// A hostile rank 1 publishes, for an all-gather, the tagged address of a send buffer in its
// process (cross_memory.h) that is not mapped there (the first page). Where the comm reads peers'
// processes the read fails and rank 0 returns symmarPeerFailure naming it; with SYMMAR_HOST_CMA=0
// (or where the probe found no access) a tagged word is no input offset and is refused as one.
// The same word in a reduce-scatter, which reads no processes, is refused as well.
TEST(SilentWrong, PeerSendBufferAddressThatCannotBeReadIsRefused) {
  const uint64_t unmapped = (uint64_t{1} << 63) | 0x1000;
  for (const char* cma : {"1", "0"}) {
    for (bool scatter : {false, true}) {
      // Only an all-gather with reads from processes on may try the address.
      const bool may_read = *cma == '1' && !scatter;
      const auto status = hostileScatterGather(scatter, unmapped, "SYMMAR_HOST_CMA", cma,
                                               [&](symmarResult_t res, const std::string& err) {
        const bool unreadable = err.find("could not be read") != std::string::npos;
        if (unreadable) fprintf(stderr, "rank 0 (expected): %s\n", err.c_str());
        return refusedAsOffset(res, err) || (may_read && res == symmarPeerFailure && unreadable);
      });
      EXPECT_EQ(status[0], 0) << "SYMMAR_HOST_CMA=" << cma << (scatter ? " reduce-scatter" : " all-gather");
      EXPECT_EQ(status[1], 0);
    }
  }
}

// The pid in a rank's segment header is data in shared memory too. Rank 1 rewrites its own to
// its parent's (a live process of the same user) after the comm is created; rank 0 must still
// read rank 1's send buffer from rank 1 (the process its probe at creation read), so the
// all-gather succeeds on both ranks with every element right, not read from the parent.
TEST(SilentWrong, RewrittenPidInAPeersHeaderDoesNotRedirectItsReads) {
  constexpr size_t kBlock = 16384;  // 64 KiB a rank: read from the peer's process where possible
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  auto status = mp::runForked(2, [&](int rank) {
    symmarComm_t comm = initCpu(id, 2, rank, 5000);
    if (!comm) return 10;
    if (rank == 1) {
      char* seg = ownSegment();
      if (!seg) return 20;
      reinterpret_cast<symmar::SegmentHeader*>(seg)->pid = getppid();
    }
    std::vector<float> block(kBlock), whole(2 * kBlock);
    for (size_t j = 0; j < kBlock; ++j) block[j] = static_cast<float>(100000 * rank + static_cast<int>(j));
    const symmarResult_t res =
        symmarAllGatherAlgo(block.data(), whole.data(), kBlock, symmarFloat32, symmarAlgoOneShot, comm, nullptr);
    if (res != symmarSuccess) {
      fprintf(stderr, "rank %d: %s: %s\n", rank, symmarGetErrorString(res), symmarGetLastError(comm));
      return 11;
    }
    for (size_t i = 0; i < whole.size(); ++i) {
      if (whole[i] != static_cast<float>(100000 * (i / kBlock) + i % kBlock)) return 12;
    }
    symmarCommDestroy(comm);
    return 0;
  });
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 0);
}

// A waiting rank looks its peer up in /proc (has it exited?) only where the peer's pid names a
// process of its own pid namespace. Rank 1 marks its header as of another namespace, with the pid
// of a process that has exited here, and arrives late; rank 0, waiting past its spin phase, must
// not take the peer for exited: both ranks' allreduce succeeds, exact.
TEST(SilentWrong, APeerInAnotherPidNamespaceIsNotTakenForExited) {
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  auto status = mp::runForked(2, [&](int rank) {
    symmarComm_t comm = initCpu(id, 2, rank, 5000);
    if (!comm) return 10;
    if (rank == 1) {
      const pid_t gone = fork();  // a pid that names no live process here once reaped
      if (gone == 0) _exit(0);
      if (gone < 0 || waitpid(gone, nullptr, 0) != gone) return 20;
      auto* header = reinterpret_cast<symmar::SegmentHeader*>(ownSegment());
      if (!header) return 21;
      header->pid = gone;
      header->pid_ns ^= 2;  // another namespace than rank 0's (the same as this one's until now)
      usleep(400 * 1000);
    }
    bool wrong = false;
    const symmarResult_t res = checkedAllReduce(comm, rank, 2, 64, 0, &wrong, symmarAlgoOneShot);
    if (res != symmarSuccess || wrong) {
      fprintf(stderr, "rank %d: %s: %s\n", rank, symmarGetErrorString(res), symmarGetLastError(comm));
      return 11;
    }
    symmarCommDestroy(comm);
    return 0;
  });
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 0);
}
