// Ranks that run a host step's copies and reductions on several threads (SYMMAR_HOST_THREADS,
// symmarCommSetHostThreads, host/worker_pool.h): the pool runs every part of a round once, each on a
// thread of its own, the caller's part on the caller; an engine's pool that skips, repeats or
// outlives parts still gets every part run exactly once before the step goes on; allreduces whose
// two-shot steps split over helper threads or an engine's pool are exact on every rank with either
// kind of staging store, at 2 and 3 ranks, and so are reduce-scatters and all-gathers; ranks with different thread counts pair, since the bits
// do not depend on the count; and helpers that inherit a one-CPU affinity are reported.
#include <gtest/gtest.h>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "api/comm.h"
#include "common/reference.h"
#include "core/log.h"
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

// Engine pools as another project might write them (symmarParallelForFn), right and wrong ones;
// poolOnThreads counts its calls in the std::atomic<int> its user pointer names.
void poolOnThreads(symmarPartFn part, void* arg, int parts, void* calls) {
  std::vector<std::thread> threads;
  for (int i = 1; i < parts; ++i) threads.emplace_back(part, arg, i, parts);
  part(arg, 0, parts);
  for (std::thread& t : threads) t.join();
  ++*static_cast<std::atomic<int>*>(calls);
}
void poolBackwardsOnTheCaller(symmarPartFn part, void* arg, int parts, void*) {
  for (int i = parts - 1; i >= 0; --i) part(arg, i, parts);
}
void poolThatSkipsOddParts(symmarPartFn part, void* arg, int parts, void*) {
  for (int i = 0; i < parts; i += 2) part(arg, i, parts);
}
void poolThatRepeatsAndStrays(symmarPartFn part, void* arg, int parts, void*) {
  for (int i = -1; i <= parts; ++i) {  // out of range at both ends
    part(arg, i, parts);
    part(arg, i, parts);
  }
}
void poolThatThrowsAfterTheFirstPart(symmarPartFn part, void* arg, int parts, void*) {
  part(arg, 0, parts);
  throw std::runtime_error("the pool cannot start its threads");
}
// Set by a test's part when the last part has begun (and will take a while to finish).
std::atomic<bool> g_last_part_began{false};
void poolThatReturnsEarly(symmarPartFn part, void* arg, int parts, void*) {
  // Starts the last part on a thread it does not wait for, and returns once that part is under way.
  g_last_part_began = false;
  std::thread([=] { part(arg, parts - 1, parts); }).detach();
  while (!g_last_part_began) std::this_thread::yield();
  for (int i = 0; i < parts - 1; ++i) part(arg, i, parts);
}

TEST(EnginePool, EveryPartRunsExactlyOnceBeforeTheStepGoesOn) {
  std::atomic<int> pool_calls{0};
  const struct {
    const char* name;
    symmarParallelForFn run;
  } pools[] = {{"threads", poolOnThreads},
               {"backwards", poolBackwardsOnTheCaller},
               {"skips odd parts", poolThatSkipsOddParts},
               {"repeats and strays", poolThatRepeatsAndStrays},
               {"throws", poolThatThrowsAfterTheFirstPart},
               {"returns early", poolThatReturnsEarly}};
  for (const auto& p : pools) {
    for (int threads : {2, 5, symmar::kMaxHostThreads}) {
      symmar::EnginePool pool(threads, p.run, &pool_calls);
      for (int round = 0; round < 40; ++round) {
        const int parts = 1 + (round * 7) % (threads + 2);  // clamped to threads
        const int expect = std::min(parts, threads);
        std::vector<std::atomic<int>> calls(symmar::kMaxHostThreads + 2);
        std::vector<std::atomic<bool>> finished(symmar::kMaxHostThreads + 2);
        std::atomic<int> wrong_n{0};
        pool.run(parts, [&](int i, int n) {
          if (n != expect) ++wrong_n;
          ++calls[static_cast<size_t>(i)];
          if (i == n - 1) {  // the late part
            g_last_part_began = true;
            std::this_thread::sleep_for(std::chrono::microseconds(200));
          }
          finished[static_cast<size_t>(i)] = true;
        });
        ASSERT_EQ(wrong_n.load(), 0) << p.name << " round " << round;
        for (int i = 0; i < static_cast<int>(calls.size()); ++i) {
          ASSERT_EQ(calls[static_cast<size_t>(i)].load(), i < expect ? 1 : 0)
              << p.name << ", " << threads << " threads, round " << round << ", part " << i;
          ASSERT_EQ(finished[static_cast<size_t>(i)].load(), i < expect)
              << p.name << ": part " << i << " had not finished when the step went on";
        }
      }
    }
  }
  EXPECT_GT(pool_calls.load(), 0) << "the thread pool was never asked";
}

TEST(HostThreads, SetHostThreadsChecksItsArgumentsAndReplacesThePool) {
  const std::vector<int> errors = hostcalls::onThreadRanks(2, [](symmarComm_t comm, int) {
    int wrong = 0;
    for (int bad : {0, -3, symmar::kMaxHostThreads + 1}) {
      wrong += symmarCommSetHostThreads(comm, bad, nullptr, nullptr) != symmarInvalidArgument;
      wrong += std::string(symmarGetLastError(comm)).find("outside 1..64") == std::string::npos;
    }
    wrong += workerThreads(comm) != 1;  // unchanged by the refusals
    wrong += symmarCommSetHostThreads(comm, 3, nullptr, nullptr) != symmarSuccess || workerThreads(comm) != 3;
    wrong += symmarCommSetHostThreads(comm, 4, poolBackwardsOnTheCaller, nullptr) != symmarSuccess ||
             workerThreads(comm) != 4;
    wrong += symmarCommSetHostThreads(comm, 1, poolBackwardsOnTheCaller, nullptr) != symmarSuccess ||
             workerThreads(comm) != 1;
    return wrong;
  });
  EXPECT_EQ(errors, std::vector<int>(2, 0));
  EXPECT_EQ(symmarCommSetHostThreads(nullptr, 2, nullptr, nullptr), symmarInvalidArgument);
}

TEST(HostThreads, TwoShotStepsOnAnEnginesPoolAreExactOnEveryRank) {
  for (int world : {2, 3}) {
    std::vector<std::atomic<int>> pool_calls(static_cast<size_t>(world));
    const std::vector<int> errors = hostcalls::onThreadRanks(world, [&](symmarComm_t comm, int r) {
      std::atomic<int>* calls = &pool_calls[static_cast<size_t>(r)];
      // Rank 0 on a pool of threads, the others on pools that leave parts to the step or repeat them.
      const symmarParallelForFn run =
          r == 0 ? poolOnThreads : r == 1 ? poolThatSkipsOddParts : poolThatRepeatsAndStrays;
      if (symmarCommSetHostThreads(comm, 3, run, calls) != symmarSuccess) return 1000;
      return hostcalls::allReduceCalls(comm, r, world, 2, kLargeCounts);
    });
    for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], 0) << "world " << world << " rank " << r;
    EXPECT_GT(pool_calls[0].load(), 0) << "world " << world << ": rank 0's steps never reached its pool";
  }
}

TEST(HostThreads, ReduceScattersAndAllGathersOnSeveralThreadsAreExactOnEveryRank) {
  // Threads of one process (each rank on a different kind of pool), then processes, whose
  // all-gathers read their peers' large send buffers from their processes in parts.
  for (int world : {2, 3}) {
    const std::vector<int> errors = hostcalls::onThreadRanks(world, [&](symmarComm_t comm, int r) {
      const symmarParallelForFn run = r == 0 ? poolOnThreads : r == 1 ? poolBackwardsOnTheCaller : nullptr;
      std::atomic<int> calls{0};
      if (symmarCommSetHostThreads(comm, 3, run, &calls) != symmarSuccess) return 1000;
      const int wrong = hostcalls::scatterGatherCalls(comm, r, world, 1);
      return wrong + (r == 0 && calls == 0 ? 2000 : 0);
    });
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(errors[static_cast<size_t>(r)], 0) << "world " << world << " rank " << r << " (2000: no step in parts)";
    }
  }
  const std::vector<int> status = hostcalls::onForkedRanks(
      2, [](int) { setenv("SYMMAR_HOST_THREADS", "3", 1); },
      [](symmarComm_t comm, int rank) { return hostcalls::scatterGatherCalls(comm, rank, 2, 1) ? 12 : 0; });
  EXPECT_EQ(status, std::vector<int>(2, 0)) << "forked ranks (12: a wrong result)";
}

TEST(HostThreads, FusedRowsOnSeveralThreadsAreExactOnEveryRank) {
  // 67 and 200 rows of 4 KiB: every form's rows and copies split over 3 threads.
  for (int world : {2, 3}) {
    const std::vector<int> errors = hostcalls::onThreadRanks(world, [&](symmarComm_t comm, int r) {
      const symmarParallelForFn run = r == 0 ? poolOnThreads : r == 1 ? nullptr : poolThatSkipsOddParts;
      std::atomic<int> calls{0};
      if (symmarCommSetHostThreads(comm, 3, run, &calls) != symmarSuccess) return 1000;
      const int wrong = hostcalls::fusedCalls(comm, r, world, 1, {67, 200});
      return wrong + (r == 0 && calls == 0 ? 2000 : 0);
    });
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(errors[static_cast<size_t>(r)], 0) << "world " << world << " rank " << r << " (2000: no step in parts)";
    }
  }
}

TEST(HostThreads, UnfusedRowsOnSeveralThreadsAreTheRowsOfOneThread) {
  // The add and norm after an allreduce (the backend's addRmsNormRows), bf16 rows of 4096 from
  // small integers, on 1 thread and then on 3: the same bits, and the norm of the float64 sums.
  constexpr size_t kTokens = 70, kHidden = 4096;
  std::vector<uint16_t> sums(kTokens * kHidden), residual(kTokens * kHidden), gamma(kHidden);
  for (size_t i = 0; i < sums.size(); ++i) {
    testref::storeElement(sums.data(), symmarBfloat16, i, static_cast<double>(static_cast<int>(i % 17) - 8));
    testref::storeElement(residual.data(), symmarBfloat16, i, static_cast<double>(static_cast<int>(i % 5) - 2));
  }
  for (size_t i = 0; i < kHidden; ++i) testref::storeElement(gamma.data(), symmarBfloat16, i, 1.0);
  std::vector<std::vector<uint16_t>> norms;
  const std::vector<int> errors = hostcalls::onThreadRanks(1, [&](symmarComm_t comm, int) {
    auto* host = dynamic_cast<symmar::HostBackend*>(comm->backend.get());
    for (int threads : {1, 3}) {
      if (!host || symmarCommSetHostThreads(comm, threads, nullptr, nullptr) != symmarSuccess) return 1;
      std::vector<uint16_t> res_out(sums.size()), norm_out(sums.size());
      symmar::AddRmsNormCall c{};  // no input: the sums stand for the allreduce's output
      c.residual_in = residual.data();
      c.residual_out = res_out.data();
      c.norm_out = norm_out.data();
      c.gamma = gamma.data();
      c.eps = 1e-6f;
      c.tokens = kTokens;
      c.hidden = kHidden;
      c.dtype = symmarBfloat16;
      if (host->addRmsNormRows(c, sums.data()) != symmarSuccess) return 2;
      norms.push_back(norm_out);
    }
    return 0;
  });
  ASSERT_EQ(errors, std::vector<int>{0});
  ASSERT_EQ(norms.size(), 2u);
  EXPECT_TRUE(norms[0] == norms[1]) << "3 threads changed the bits";
  for (size_t t = 0; t < kTokens; ++t) {
    double squares = 0;
    for (size_t i = 0; i < kHidden; ++i) {
      const double x = testref::loadElement(sums.data(), symmarBfloat16, t * kHidden + i) +
                       testref::loadElement(residual.data(), symmarBfloat16, t * kHidden + i);
      squares += x * x;
    }
    const double inv = 1.0 / std::sqrt(squares / kHidden + 1e-6);
    for (size_t i = 0; i < kHidden; i += 511) {
      const double x = testref::loadElement(sums.data(), symmarBfloat16, t * kHidden + i) +
                       testref::loadElement(residual.data(), symmarBfloat16, t * kHidden + i);
      const double got = testref::loadElement(norms[1].data(), symmarBfloat16, t * kHidden + i);
      ASSERT_NEAR(got, x * inv, 1e-2 * std::fabs(x * inv) + 1e-3) << "row " << t << " element " << i;
    }
  }
}

TEST(HostThreads, HelpersOfAThreadBoundToOneCpuAreReported) {
  const std::string log = "/tmp/symmar-host-threads-" + std::to_string(getpid()) + ".";
  const std::vector<int> status = hostcalls::onForkedRanks(
      2,
      [&](int rank) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(0, &one);  // as an engine binds its main thread to its first core
        sched_setaffinity(0, sizeof(one), &one);
        setenv("SYMMAR_HOST_THREADS", rank == 0 ? "2" : "1", 1);
        setenv("SYMMAR_DEBUG_FILE", (log + std::to_string(rank)).c_str(), 1);
        symmar::reloadLogConfig();
      },
      [&](symmarComm_t comm, int rank) {
        std::ifstream in(log + std::to_string(rank));
        std::stringstream text;
        text << in.rdbuf();
        const bool warned = text.str().find("may run on 1 CPU(s), which its helpers inherit") != std::string::npos;
        if (warned != (rank == 0)) return 11;
        return hostcalls::allReduceCalls(comm, rank, 2, 1, kLargeCounts) ? 12 : 0;
      });
  for (int rank = 0; rank < 2; ++rank) {
    std::remove((log + std::to_string(rank)).c_str());
    EXPECT_EQ(status[static_cast<size_t>(rank)], 0)
        << "rank " << rank << " (11: the warning " << (rank == 0 ? "missing" : "given without helpers")
        << "; 12: a wrong result)";
  }
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
