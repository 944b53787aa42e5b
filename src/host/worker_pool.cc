#include "host/worker_pool.h"

#include <algorithm>
#include <system_error>

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
  parts = std::max(1, std::min(parts, threads()));
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

}  // namespace symmar
