// Ranks that run a host step's copies and reductions on several threads (SYMMAR_HOST_THREADS,
// host/worker_pool.h): the pool runs every part of a round once, each on a thread of its own, the
// caller's part on the caller; allreduces whose two-shot steps split over helper threads are exact
// on every rank with either kind of staging store, at 2 and 3 ranks; and ranks with different
// thread counts pair, since the bits do not depend on the count.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/comm.h"
#include "host/host_backend.h"
#include "host/worker_pool.h"
#include "host_call_checks.h"

namespace {

int workerThreads(symmarComm_t comm) {
  const auto* host = dynamic_cast<const symmar::HostBackend*>(comm->backend.get());
  return host ? host->workerThreads() : 0;
}

// Counts whose two-shot steps give every thread of 3 at least 64 KiB (a 2 MiB chunk, half of it
// owned), odd ones included: 1 MiB, 3 MiB + 5 elements of float32 (bfloat16: half that).
const std::vector<size_t> kLargeCounts = {262144, 786437};

TEST(WorkerPool, EveryPartOfARoundRunsOnceOnAThreadOfItsOwn) {
  symmar::WorkerPool pool(4);
  ASSERT_EQ(pool.threads(), 4);
  for (int round = 0; round < 3000; ++round) {
    const int asked = round % 7;  // 0..6: clamped to 1..4
    const int parts = std::max(1, std::min(asked, 4));
    std::vector<std::atomic<int>> calls(8);
    std::vector<std::thread::id> ids(8);
    std::atomic<int> wrong_n{0};
    pool.run(asked, [&](int i, int n) {
      if (n != parts) ++wrong_n;
      ++calls[static_cast<size_t>(i)];
      ids[static_cast<size_t>(i)] = std::this_thread::get_id();
    });
    ASSERT_EQ(wrong_n.load(), 0) << "round " << round;
    std::set<std::thread::id> distinct;
    for (int i = 0; i < 8; ++i) {
      ASSERT_EQ(calls[static_cast<size_t>(i)].load(), i < parts ? 1 : 0) << "round " << round << " part " << i;
      if (i < parts) distinct.insert(ids[static_cast<size_t>(i)]);
    }
    ASSERT_EQ(static_cast<int>(distinct.size()), parts) << "round " << round;
    ASSERT_EQ(ids[0], std::this_thread::get_id()) << "part 0 runs on the caller";
  }
}

TEST(WorkerPool, OneThreadIsTheCallerAlone) {
  symmar::WorkerPool pool(1);
  std::vector<std::thread::id> ids;
  pool.run(5, [&](int i, int n) {
    EXPECT_EQ(i, 0);
    EXPECT_EQ(n, 1);
    ids.push_back(std::this_thread::get_id());
  });
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(ids[0], std::this_thread::get_id());
}

TEST(HostThreads, TwoShotStepsOnHelperThreadsAreExactOnEveryRank) {
  setenv("SYMMAR_HOST_THREADS", "3", 1);
  for (const char* stream : {"0", "1"}) {  // plain and streaming staging stores
    setenv("SYMMAR_HOST_STREAM", stream, 1);
    for (int world : {2, 3}) {
      const std::vector<int> errors = hostcalls::onThreadRanks(world, [world](symmarComm_t comm, int r) {
        if (workerThreads(comm) != 3) return 1000;
        return hostcalls::allReduceCalls(comm, r, world, 1) + hostcalls::allReduceCalls(comm, r, world, 2, kLargeCounts);
      });
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(errors[static_cast<size_t>(r)], 0)
            << "world " << world << " SYMMAR_HOST_STREAM=" << stream << " rank " << r << " (1000: no helper threads)";
      }
    }
  }
  unsetenv("SYMMAR_HOST_STREAM");
  unsetenv("SYMMAR_HOST_THREADS");
}

TEST(HostThreads, RanksWithDifferentThreadCountsPair) {
  const char* const threads[2] = {"1", "4"};
  const std::vector<int> status = hostcalls::onForkedRanks(
      2, [&](int rank) { setenv("SYMMAR_HOST_THREADS", threads[rank], 1); },
      [&](symmarComm_t comm, int rank) {
        if (workerThreads(comm) != std::atoi(threads[rank])) return 11;
        return hostcalls::allReduceCalls(comm, rank, 2, 2, kLargeCounts) ? 12 : 0;
      });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(status[static_cast<size_t>(rank)], 0)
        << "rank " << rank << " with " << threads[rank] << " threads (11: not that many; 12: a wrong result)";
  }
}

}  // namespace
