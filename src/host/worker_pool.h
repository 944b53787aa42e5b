// A rank's helper threads for the copies and reductions of a host collective's step
// (SYMMAR_HOST_THREADS): the step's bytes split into parts that run at once on several cores, as
// engines' CPU allreduces split theirs over their OpenMP threads. The calling thread runs part 0 and
// every barrier between ranks; helpers only copy and reduce the parts they are given, so a helper
// never waits on a peer and a failed peer cannot leave one waiting. Idle helpers sleep.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace symmar {

class WorkerPool {
 public:
  /// A pool that runs steps in up to `threads` parts: threads - 1 helper threads (none for 1;
  /// fewer where the system refuses to start more, which threads() then says).
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int threads() const { return static_cast<int>(helpers_.size()) + 1; }
  /// Runs part(i, n) for every i in [0, n), n = parts clamped to [1, threads()]: part 0 on the
  /// calling thread, the others on helpers. Returns when every part has returned; what the parts
  /// wrote is then visible to the caller. part must not throw. Nothing is allocated: the helpers
  /// call part through a pointer to it.
  template <typename Part>
  void run(int parts, const Part& part) {
    runErased(parts, &part, [](const void* p, int i, int n) { (*static_cast<const Part*>(p))(i, n); });
  }

 private:
  using Call = void (*)(const void* part, int i, int n);
  void runErased(int parts, const void* part, Call call);
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

}  // namespace symmar
