#include "host/worker_pool.h"

#include <sched.h>

#include <system_error>

#include "core/log.h"

namespace symmar {

WorkerPool::WorkerPool(int threads) {
  for (int i = 1; i < threads; ++i) {
    try {
      helpers_.emplace_back([this, i] { helperLoop(i); });
    } catch (const std::system_error&) {
      break;  // the system gives no more threads: the pool runs with the helpers it has
    }
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

void WorkerPool::runErased(int parts, const void* part, Call call) {
  if (parts > 1) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      part_ = part;
      call_ = call;
      parts_ = parts;
      running_ = parts - 1;
      ++round_;
    }
    wake_.notify_all();
  }
  call(part, 0, parts);
  if (parts > 1) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return running_ == 0; });
    part_ = nullptr;
  }
}

void WorkerPool::helperLoop(int index) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || round_ != seen; });
    if (stopping_) return;
    seen = round_;
    // A round is read whole under the lock: the next one starts only after every part of this one
    // returned, so a helper that wakes late finds the newest round, never a half-replaced one.
    if (index >= parts_) continue;
    const void* part = part_;
    const Call call = call_;
    const int parts = parts_;
    lock.unlock();
    call(part, index, parts);
    lock.lock();
    if (--running_ == 0) done_.notify_one();
  }
}

namespace {
// What an engine's pool calls for each part. The pool is another project's code: a part it calls
// twice, with an index out of range, or not at all, or one still running when its call returns,
// would leave a step half done or done twice (an in-place reduction then adds twice). So each part
// is claimed before it runs, a claimed part is never run again, and when the pool returns (or
// throws: a C++ pool, such as torch's, may) the calling thread runs every part nobody claimed and
// waits for the claimed ones to finish.
struct EngineStep {
  const void* part;
  void (*call)(const void* part, int i, int n);
  int parts;
  std::atomic<uint64_t> claimed{0};
  std::atomic<uint64_t> done{0};

  void runOnce(int i) {
    if (i < 0 || i >= parts) return;
    const uint64_t bit = uint64_t{1} << i;
    if (claimed.fetch_or(bit, std::memory_order_relaxed) & bit) return;
    call(part, i, parts);
    done.fetch_or(bit, std::memory_order_release);
  }
};

void runEnginePart(void* arg, int i, int /*parts*/) { static_cast<EngineStep*>(arg)->runOnce(i); }
}  // namespace

void EnginePool::runErased(int parts, const void* part, Call call) {
  if (parts == 1) return call(part, 0, 1);  // no round trip through the engine's pool for one part
  EngineStep step;
  step.part = part;
  step.call = call;
  step.parts = parts;
  try {
    run_(runEnginePart, &step, parts, user_);
  } catch (...) {  // the parts it did not run are run below; the step itself does not fail
  }
  const uint64_t all = parts == kMaxHostThreads ? ~uint64_t{0} : (uint64_t{1} << parts) - 1;
  if (step.done.load(std::memory_order_acquire) == all) return;
  bool missed = false;
  for (int i = 0; i < parts; ++i) {
    missed |= !(step.claimed.load(std::memory_order_relaxed) & (uint64_t{1} << i));
    step.runOnce(i);
  }
  while (step.done.load(std::memory_order_acquire) != all) std::this_thread::yield();
  if (missed && !warned_.exchange(true, std::memory_order_relaxed)) {
    SYMMAR_WARN(kSubsysColl, "host: the engine's thread pool (symmarCommSetHostThreads) returned without running "
                "every part of a step; this thread ran the rest (a pool must call each part once)");
  }
}

int cpusOfThisThread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

}  // namespace symmar
