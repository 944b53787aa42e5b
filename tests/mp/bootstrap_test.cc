// How ranks meet: external allgather, a rank that never arrives, a late duplicate of a rank, clean
// teardown, epoch wrap.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "mp/mp_util.h"

namespace {

// An in-process allgather, as an engine's process group would provide.
struct ThreadGroup {
  explicit ThreadGroup(int n) : n(n) {}
  int n;
  std::mutex m;
  std::condition_variable cv;
  std::vector<char> buf;
  int arrived = 0, departed = 0;
  uint64_t generation = 0;

  int allgather(const void* send, void* recv, size_t bytes, int rank) {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return departed == 0; });  // previous round fully read
    if (arrived == 0) buf.assign(bytes * n, 0);
    memcpy(buf.data() + rank * bytes, send, bytes);
    uint64_t gen = generation;
    if (++arrived == n) {
      ++generation;
      departed = n;
      arrived = 0;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return generation != gen; });
    }
    memcpy(recv, buf.data(), bytes * n);
    if (--departed == 0) cv.notify_all();
    return 0;
  }
};

struct GroupRank {
  ThreadGroup* group;
  int rank;
};

int groupAllGather(const void* send, void* recv, size_t bytes, void* user) {
  auto* gr = static_cast<GroupRank*>(user);
  return gr->group->allgather(send, recv, bytes, gr->rank);
}

symmarConfig_t cpuConfig(int timeout_ms) {
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  cfg.timeout_ms = timeout_ms;
  cfg.staging_bytes = 1 << 20;
  return cfg;
}

}  // namespace

TEST(Bootstrap, ExternalAllGather) {
  const int world = 3;
  ThreadGroup group(world);
  std::vector<GroupRank> users;
  for (int r = 0; r < world; ++r) users.push_back({&group, r});
  auto errors = mp::runThreads(world, [&](int rank) {
    symmarConfig_t cfg = cpuConfig(20000);
    symmarComm_t comm = nullptr;
    if (symmarCommInitExternal(&comm, world, rank, groupAllGather, &users[rank], &cfg) != symmarSuccess) {
      fprintf(stderr, "rank %d: %s\n", rank, symmarGetLastError(nullptr));
      return 1;
    }
    int bad = 0;
    uint64_t digest;
    for (size_t count : {size_t(1), size_t(4097), size_t(200003)}) {
      bad += mp::runCase(comm, rank, world, {symmarBfloat16, symmarSum, count, false, symmarAlgoAuto, false}, &digest);
    }
    void* p = nullptr;  // collective memory calls go through the engine's allgather too
    bad += symmarMemAlloc(comm, 4096, &p) != symmarSuccess;
    bad += symmarMemFree(comm, p) != symmarSuccess;
    return bad + (symmarCommDestroy(comm) != symmarSuccess);
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[r], 0) << "rank " << r;
}

TEST(Bootstrap, RankThatNeverArrivesGivesTimeout) {
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  const int timeout_ms = 1500;
  auto start = std::chrono::steady_clock::now();
  std::vector<symmarResult_t> results(2);
  mp::runThreads(2, [&](int rank) {  // ranks 0 and 1 of 3; rank 2 never comes
    symmarConfig_t cfg = cpuConfig(timeout_ms);
    symmarComm_t comm = nullptr;
    results[rank] = symmarCommInitRank(&comm, 3, id, rank, &cfg);
    return 0;
  });
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(results[0], symmarTimeout);
  EXPECT_EQ(results[1], symmarTimeout);
  EXPECT_LT(secs, timeout_ms / 1000.0 + 2.0) << "bounded by the timeout plus a small margin";
}

TEST(Bootstrap, NoDescriptorsOrMappingsLeftAfterDestroy) {
  const int fds_before = mp::countOpenFds();
  for (int round = 0; round < 3; ++round) {
    std::vector<symmarComm_t> comms(4);
    symmarConfig_t cfg = cpuConfig(20000);
    ASSERT_EQ(symmarCommInitAll(comms.data(), 4, nullptr, &cfg), symmarSuccess) << symmarGetLastError(nullptr);
    EXPECT_GT(mp::countHeapMappings(), 0);
    for (symmarComm_t c : comms) ASSERT_EQ(symmarCommDestroy(c), symmarSuccess);
  }
  EXPECT_EQ(mp::countOpenFds(), fds_before);
  EXPECT_EQ(mp::countHeapMappings(), 0);
}

// A process that creates and destroys comms all its life keeps its heap bounded. Two records stay
// behind a comm, each kept for the last 1024 only: a destroyed comm's emptied struct (so that a
// stale handle is refused, not a use of freed memory) and, for a comm formed as rank 0, its id (an
// id is single-use). Before, every id stayed: 40-50 bytes a comm, for ever. Counted in glibc's
// in-use heap bytes: 1100 cycles fill both records, then 512 more may add allocator slack (about
// 12 bytes a cycle measured here, flat after about 3000 cycles) but not an entry each.
TEST(Bootstrap, CreatingAndDestroyingCommsKeepsTheHeapBounded) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's allocator serves malloc here, and glibc's in-use count (mallinfo2) does not see it";
#endif
  if (mallinfo2().uordblks == 0) GTEST_SKIP() << "this allocator keeps no glibc heap count (mallinfo2 gives 0)";
  symmarConfig_t cfg = cpuConfig(20000);
  cfg.staging_bytes = 64 << 10;
  const auto cycle = [&] {
    std::vector<symmarComm_t> comms(2);
    ASSERT_EQ(symmarCommInitAll(comms.data(), 2, nullptr, &cfg), symmarSuccess) << symmarGetLastError(nullptr);
    for (symmarComm_t c : comms) ASSERT_EQ(symmarCommDestroy(c), symmarSuccess);
  };
  for (int i = 0; i < 1100; ++i) ASSERT_NO_FATAL_FAILURE(cycle());
  const size_t before = mallinfo2().uordblks;
  constexpr int kCycles = 512;
  for (int i = 0; i < kCycles; ++i) ASSERT_NO_FATAL_FAILURE(cycle());
  const double per_cycle = (static_cast<double>(mallinfo2().uordblks) - static_cast<double>(before)) / kCycles;
  EXPECT_LT(per_cycle, 32.0) << "heap bytes kept per create/destroy cycle once the records are full";
}

TEST(Bootstrap, TenThousandCallsAcrossEpochWrap) {
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  auto status = mp::runForked(2, [&](int rank) {
    setenv("SYMMAR_EPOCH_START", "4294962000", 1);  // wraps after about 5,300 barriers
    symmarConfig_t cfg = cpuConfig(30000);
    cfg.staging_bytes = 16 << 10;
    symmarComm_t comm = nullptr;
    if (symmarCommInitRank(&comm, 2, id, rank, &cfg) != symmarSuccess) return 1;
    int bad = 0;
    std::vector<int32_t> buf(5000);
    for (int call = 0; call < 10000 && bad == 0; ++call) {
      size_t n = 1 + (call * 7919) % 5000;  // varying sizes, some spanning several chunks
      for (size_t i = 0; i < n; ++i) buf[i] = static_cast<int32_t>(call + i + rank);
      symmarAlgo_t algo = call % 3 == 0 ? symmarAlgoOneShot : (call % 3 == 1 ? symmarAlgoTwoShot : symmarAlgoAuto);
      if (symmarAllReduceAlgo(buf.data(), buf.data(), n, symmarInt32, symmarSum, algo, comm, nullptr) != symmarSuccess) {
        fprintf(stderr, "rank %d call %d: %s\n", rank, call, symmarGetLastError(comm));
        return 1;
      }
      for (size_t i = 0; i < n; ++i) bad += buf[i] != static_cast<int32_t>(2 * (call + i) + 1);
    }
    return bad + (symmarCommDestroy(comm) != symmarSuccess);
  });
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 0);
}

namespace {

/// A table file holding text, for one test's comm; its path.
std::string tableFile(const std::string& text) {
  char path[] = "/tmp/symmar-rank-table-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  return path;
}

/// Creates a 2-rank comm with each rank's table file (empty: the built-in tables only) and expects
/// both ranks to refuse it because they plan differently.
void expectBothRanksRefuse(const std::string (&table_files)[2]) {
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  std::vector<symmarResult_t> results(2);
  std::vector<std::string> errors(2);
  mp::runThreads(2, [&](int rank) {
    symmarConfig_t cfg = cpuConfig(10000);
    if (!table_files[rank].empty()) cfg.table_file = table_files[rank].c_str();
    symmarComm_t comm = nullptr;
    results[rank] = symmarCommInitRank(&comm, 2, id, rank, &cfg);
    errors[rank] = symmarGetLastError(nullptr);
    if (comm) symmarCommDestroy(comm);
    return 0;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r], symmarInvalidUsage) << "rank " << r;
    EXPECT_NE(errors[r].find("plans differently"), std::string::npos) << errors[r];
  }
}

}  // namespace

// A row for any collective counts: rank 0 alone loads a file with an allreduce, a reduce-scatter,
// an all-gather or a fused-call row, and both ranks refuse the comm.
TEST(Bootstrap, RanksWithDifferentTablesRefuseToFormAComm) {
  for (const char* collective : {"allreduce", "reducescatter", "allgather", "addrmsnorm"}) {
    SCOPED_TRACE(collective);
    const std::string files[2] = {  // only rank 0 loads a file: auto would diverge
        tableFile(std::string(R"({"rows": [{"arch": "host", "link": "host", "world": 2, "collective": ")") +
                  collective + R"(", "algos": [{"algo": "oneshot", "max_bytes": 8}]}]})"),
        ""};
    expectBothRanksRefuse(files);
    unlink(files[0].c_str());
  }
}

// Rows that differ only in the dtypes an entry is for plan differently too: both ranks load a file,
// and only rank 0's keeps its one-shot entry to the 4-byte dtypes.
TEST(Bootstrap, RanksWhoseEntriesDifferOnlyInTheirDtypesRefuseToFormAComm) {
  const std::string row = R"({"rows": [{"arch": "host", "link": "host", "world": 2, "algos": [)";
  const std::string files[2] = {tableFile(row + R"({"algo": "oneshot", "max_bytes": 8, "min_elem_bytes": 4}]}]})"),
                                tableFile(row + R"({"algo": "oneshot", "max_bytes": 8}]}]})")};
  expectBothRanksRefuse(files);
  for (const std::string& f : files) unlink(f.c_str());
}

namespace {

// Rank 1's transport sends a creation record with a staging size of 0: what a broken or foreign
// peer would send. The record (comm_init.cc) is 72 bytes: backend kind and padding, then staging,
// heap, chunk and start epoch, the process identity and a nonce.
constexpr size_t kCreationRecordBytes = 72;
constexpr size_t kStagingOffset = 8;

int corruptingAllGather(const void* send, void* recv, size_t bytes, void* user) {
  auto* gr = static_cast<GroupRank*>(user);
  std::vector<char> record(static_cast<const char*>(send), static_cast<const char*>(send) + bytes);
  if (gr->rank == 1 && bytes == kCreationRecordBytes) memset(record.data() + kStagingOffset, 0, sizeof(uint64_t));
  return gr->group->allgather(record.data(), recv, bytes, gr->rank);
}

// Rank 1's transport claims the cuda backend (the record's first word) while both ranks run the
// host backend: what a peer that picked another backend sends.
int otherBackendAllGather(const void* send, void* recv, size_t bytes, void* user) {
  auto* gr = static_cast<GroupRank*>(user);
  std::vector<char> record(static_cast<const char*>(send), static_cast<const char*>(send) + bytes);
  const int32_t cuda = 1;
  if (gr->rank == 1 && bytes == kCreationRecordBytes) memcpy(record.data(), &cuda, sizeof(cuda));
  return gr->group->allgather(record.data(), recv, bytes, gr->rank);
}

}  // namespace

// Ranks that would run different backends never form a comm: the healthy rank names the peer.
TEST(Bootstrap, APeerOnAnotherBackendFailsCreation) {
  const int world = 2;
  ThreadGroup group(world);
  std::vector<GroupRank> users;
  for (int r = 0; r < world; ++r) users.push_back({&group, r});
  auto errors = mp::runThreads(world, [&](int rank) {
    symmarConfig_t cfg = cpuConfig(5000);
    symmarComm_t comm = nullptr;
    symmarResult_t res = symmarCommInitExternal(&comm, world, rank, otherBackendAllGather, &users[rank], &cfg);
    const std::string error = symmarGetLastError(nullptr);
    if (comm) symmarCommDestroy(comm);
    const bool named = error.find("rank 1 the cuda backend") != std::string::npos;
    if (res == symmarSuccess || (rank == 0 && (res != symmarInvalidUsage || !named))) {
      fprintf(stderr, "rank %d: %s: %s\n", rank, symmarGetErrorString(res), error.c_str());
      return 1;
    }
    return 0;
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[r], 0) << "rank " << r;
}

// Regression: the agreed sizes took the smallest value any rank sent, unchecked; a peer sending a
// staging size of 0 gave every rank a comm whose calls could not run. Now creation fails: the
// healthy rank names the peer and the value (the broken one fails too, on its own transport).
TEST(Bootstrap, PeerSettingsOutsideTheRegistryRangesFailCreation) {
  const int world = 2;
  ThreadGroup group(world);
  std::vector<GroupRank> users;
  for (int r = 0; r < world; ++r) users.push_back({&group, r});
  auto errors = mp::runThreads(world, [&](int rank) {
    symmarConfig_t cfg = cpuConfig(5000);
    symmarComm_t comm = nullptr;
    symmarResult_t res = symmarCommInitExternal(&comm, world, rank, corruptingAllGather, &users[rank], &cfg);
    const std::string error = symmarGetLastError(nullptr);
    if (comm) symmarCommDestroy(comm);
    const bool named = error.find("rank 1 sent 0 for SYMMAR_STAGING_BYTES") != std::string::npos;
    if (res == symmarSuccess || (rank == 0 && (res != symmarInvalidUsage || !named))) {
      fprintf(stderr, "rank %d: %s: %s\n", rank, symmarGetErrorString(res), error.c_str());
      return 1;
    }
    return 0;
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[r], 0) << "rank " << r;
}

// SYMMAR_HOST_ID makes processes on one machine count as separate hosts (the way multi-host comms
// are tested here): ranks with different ids share no memory, so without an MPI fallback the comm
// has no algorithm and says so; ranks with the same id are local as before.
TEST(Bootstrap, HostIdSeparatesOrJoinsHosts) {
  for (bool same : {false, true}) {
    symmarUniqueId id;
    ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
    auto status = mp::runForked(2, [&](int rank) {
      setenv("SYMMAR_HOST_ID", same ? "node-a" : (rank == 0 ? "node-a" : "node-b"), 1);
      symmarConfig_t cfg = cpuConfig(10000);
      symmarComm_t comm = nullptr;
      if (symmarCommInitRank(&comm, 2, id, rank, &cfg) != symmarSuccess) return 1;
      symmarTopology_t topo;
      if (symmarCommTopology(comm, &topo) != symmarSuccess) return 2;
      float x[4] = {1, 2, 3, 4};
      const symmarResult_t res = symmarAllReduce(x, x, 4, symmarFloat32, symmarSum, comm, nullptr);
      int bad = 0;
      if (same) {
        bad += topo.link != symmarLinkHostMemory;
        bad += res != symmarSuccess || x[3] != 8.0f;
      } else {
        bad += topo.link != symmarLinkUnknown;
        bad += res != symmarUnsupported;  // no shared memory and no mpi fallback: a clear refusal
        bad += std::string(symmarGetLastError(comm)).empty();
      }
      return bad + (symmarCommDestroy(comm) != symmarSuccess) * 10;
    });
    EXPECT_EQ(status[0], 0) << (same ? "same host id" : "different host ids");
    EXPECT_EQ(status[1], 0) << (same ? "same host id" : "different host ids");
  }
}

// A process that joins as a rank the comm already has, after the comm formed, is refused at once
// with the reason, not left to its timeout: while the comm lives (rank 0 answers), once its ranks
// destroyed it and exited (the id's listening socket, shared with this test process through fork,
// still takes connections nobody answers), and while they destroy it. The ranks are unaffected.
TEST(Bootstrap, ALateDuplicateOfARankIsRefusedAtOnceWithTheReason) {
  enum Timing { kCommLives, kCommGone, kCommEnding };
  for (int trial = 0; trial < 6; ++trial) {
    const Timing timing = static_cast<Timing>(trial % 3);
    symmarUniqueId id;
    ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
    mp::SharedWords words(3);  // [0]: ranks that formed the comm, [1]: ranks that left, [2]: duplicate done
    auto status = mp::runForked(3, [&](int who) {
      symmarConfig_t cfg = cpuConfig(20000);
      symmarComm_t comm = nullptr;
      if (who < 2) {  // ranks 0 and 1
        if (symmarCommInitRank(&comm, 2, id, who, &cfg) != symmarSuccess) return 1;
        __atomic_add_fetch(&words[0], 1, __ATOMIC_RELEASE);
        for (int i = 0; timing == kCommLives && i < 30000 && __atomic_load_n(&words[2], __ATOMIC_ACQUIRE) == 0; ++i) {
          usleep(1000);
        }
        float x[4] = {1, 2, 3, 4};
        const bool good =
            symmarAllReduce(x, x, 4, symmarFloat32, symmarSum, comm, nullptr) == symmarSuccess && x[3] == 8.0f;
        const int rc = (good ? 0 : 2) + (symmarCommDestroy(comm) != symmarSuccess) * 4;
        __atomic_add_fetch(&words[1], 1, __ATOMIC_RELEASE);
        return rc;
      }
      const int wait_for = timing == kCommGone ? 1 : 0;  // [1] counts ranks that left, [0] ranks that formed
      while (__atomic_load_n(&words[wait_for], __ATOMIC_ACQUIRE) < 2) usleep(1000);
      if (timing == kCommGone) usleep(20000);  // the ranks' processes exit
      const auto start = std::chrono::steady_clock::now();
      const symmarResult_t res = symmarCommInitRank(&comm, 2, id, 1, &cfg);  // rank 1 again
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string error = symmarGetLastError(nullptr);
      __atomic_store_n(&words[2], 1, __ATOMIC_RELEASE);
      if (res == symmarInvalidUsage && secs < 5.0 && error.find("already formed") != std::string::npos) return 0;
      fprintf(stderr, "duplicate of rank 1: %s after %.1f s: %s\n", symmarGetErrorString(res), secs, error.c_str());
      return 8;
    });
    for (int who = 0; who < 3; ++who) EXPECT_EQ(status[who], 0) << "trial " << trial << ", process " << who;
  }
}
