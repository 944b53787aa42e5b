// The threads a rank runs the copies and reductions of a host collective's step on
// (SYMMAR_HOST_THREADS, symmarCommSetHostThreads): the step's bytes split into parts that run at
// once on several cores, as engines' CPU allreduces split theirs over their OpenMP threads. The
// calling thread keeps every barrier between ranks; the parts only copy and reduce, so a part never
// waits on a peer and a failed peer cannot leave one waiting. Two kinds: the comm's own helper
// threads (WorkerPool, idle helpers sleep) and an engine's pool behind a callback (EnginePool).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "symmar/symmar.h"

namespace symmar {

/// The most threads a rank splits a step over (a step's parts are bits of one 64-bit word).
constexpr int kMaxHostThreads = 64;

/// Runs a step's parts on some threads; what every kind of pool offers the executors.
class PartRunner {
 public:
  virtual ~PartRunner() = default;
  /// The most parts a step is split into.
  virtual int threads() const = 0;
  /// Runs part(i, n) for every i in [0, n), n = parts clamped to [1, threads()], and returns when
  /// every part has returned; what the parts wrote is then visible to the caller. part must not
  /// throw. Nothing is allocated: the pool calls part through a pointer to it.
  template <typename Part>
  void run(int parts, const Part& part) {
    parts = parts < 1 ? 1 : (parts > threads() ? threads() : parts);
    runErased(parts, &part, [](const void* p, int i, int n) { (*static_cast<const Part*>(p))(i, n); });
  }

 protected:
  using Call = void (*)(const void* part, int i, int n);
  /// run's work for parts already clamped.
  virtual void runErased(int parts, const void* part, Call call) = 0;
};

/// The comm's own helper threads: part 0 on the calling thread, the others on threads - 1 helpers.
class WorkerPool final : public PartRunner {
 public:
  /// A pool that runs steps in up to `threads` parts: threads - 1 helper threads (none for 1;
  /// fewer where the system refuses to start more, which threads() then says).
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int threads() const override { return static_cast<int>(helpers_.size()) + 1; }

 private:
  void runErased(int parts, const void* part, Call call) override;
  void helperLoop(int index);

  std::mutex mutex_;
  std::condition_variable wake_;  // a new round, or stopping
  std::condition_variable done_;  // the round's helper parts have returned
  const void* part_ = nullptr;    // the round's part, called through call_
  Call call_ = nullptr;
  int parts_ = 0;
  int running_ = 0;     // helper parts of the current round that have not returned
  uint64_t round_ = 0;  // rounds started
  bool stopping_ = false;
  std::vector<std::thread> helpers_;
};

/// An engine's pool (symmarParallelForFn): each step's parts run wherever the engine runs them.
class EnginePool final : public PartRunner {
 public:
  EnginePool(int threads, symmarParallelForFn run, void* user) : threads_(threads), run_(run), user_(user) {}
  int threads() const override { return threads_; }

 private:
  void runErased(int parts, const void* part, Call call) override;

  const int threads_;
  const symmarParallelForFn run_;
  void* const user_;
  std::atomic<bool> warned_{false};  // a step's parts were left to this thread (warned once)
};

/// How many CPUs the calling thread may run on (its affinity mask); 0 where that cannot be read.
/// Threads it starts inherit the mask.
int cpusOfThisThread();

}  // namespace symmar
