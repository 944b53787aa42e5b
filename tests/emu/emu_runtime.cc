#include "emu/emu_runtime.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <thread>

namespace symmar {
namespace emu {
namespace {

std::mutex g_groups_mutex;
std::vector<const MulticastGroup*> g_groups;

}  // namespace

void BlockBarrier::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t gen = generation_;
  if (++arrived_ >= expected_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != gen; });
}

void BlockBarrier::leave() {
  std::lock_guard<std::mutex> lock(mutex_);
  --expected_;
  if (arrived_ > 0 && arrived_ >= expected_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
  }
}

BlockContext::BlockContext(int threads) : barrier(threads) {
  for (int first = 0; first < threads; first += 32) {
    warps.push_back(std::make_unique<WarpContext>(threads - first < 32 ? threads - first : 32));
  }
}

uint32_t shuffleXor(uint32_t bits, int lane_mask) {
  const ThreadContext& ctx = threadContext();
  const unsigned t = ctx.thread_idx.x, lane = t % 32;
  WarpContext& warp = *ctx.block->warps[t / 32];
  if ((lane ^ static_cast<unsigned>(lane_mask)) >= static_cast<unsigned>(warp.lanes)) {
    fprintf(stderr, "emulator: shuffle lane mask %d leaves the warp\n", lane_mask);
    std::abort();
  }
  warp.slot[lane] = bits;
  warp.barrier.wait();  // every lane's value is out
  const uint32_t got = warp.slot[lane ^ static_cast<unsigned>(lane_mask)];
  warp.barrier.wait();  // every lane has read before a next shuffle overwrites the slots
  return got;
}

ThreadContext& threadContext() {
  static thread_local ThreadContext ctx;
  return ctx;
}

std::memory_order atomicOrder() {
  ThreadContext& ctx = threadContext();
  const bool fenced = ctx.fenced;
  ctx.fenced = false;
  return fenced ? std::memory_order_release : std::memory_order_relaxed;
}

void noteAtomic(void* word) { threadContext().last_atomic = word; }

void noteFence() {
  ThreadContext& ctx = threadContext();
  if (ctx.last_atomic) {
    // Every word the kernels use atomics on is 32-bit.
    (void)std::atomic_ref<uint32_t>(*static_cast<uint32_t*>(ctx.last_atomic)).load(std::memory_order_acquire);
    ctx.last_atomic = nullptr;
  }
  ctx.fenced = true;
}

namespace {
std::atomic<AccessHook> g_access_hook{nullptr};
}  // namespace

void setAccessHook(AccessHook hook) { g_access_hook.store(hook); }

void accessHook(const void* address) {
  if (AccessHook h = g_access_hook.load(std::memory_order_relaxed)) h(address);
}

void checkAligned(const void* p, size_t align, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % align != 0) {
    fprintf(stderr, "emulator: misaligned %s at %p (needs %zu-byte alignment)\n", what, p, align);
    std::abort();
  }
}

long long clockNanos() {
  std::this_thread::yield();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void registerMulticast(const MulticastGroup* group) {
  std::lock_guard<std::mutex> lock(g_groups_mutex);
  g_groups.push_back(group);
}

void unregisterMulticast(const MulticastGroup* group) {
  std::lock_guard<std::mutex> lock(g_groups_mutex);
  for (auto it = g_groups.begin(); it != g_groups.end(); ++it) {
    if (*it == group) {
      g_groups.erase(it);
      return;
    }
  }
}

std::vector<char*> unicastTargets(const void* mc) {
  const char* p = static_cast<const char*>(mc);
  std::lock_guard<std::mutex> lock(g_groups_mutex);
  for (const MulticastGroup* g : g_groups) {
    if (p >= g->mc_base && p + 16 <= g->mc_base + g->bytes) {
      std::vector<char*> out;
      for (char* base : g->ranks) out.push_back(base + (p - g->mc_base));
      return out;
    }
  }
  fprintf(stderr, "emulator: multimem access to %p outside every multicast range\n", mc);
  std::abort();
}

namespace {

/// Emulated threads are pooled OS threads: a launch hands each one its (block, thread) and waits
/// for all of them, so thousands of launches do not pay thread creation each time. All of a
/// launch's threads run at once (the kernels spin on each other, as resident blocks do on a GPU).
class WorkerPool {
 public:
  ~WorkerPool() {
    for (auto& w : workers_) {
      {
        std::lock_guard<std::mutex> lock(w->mutex);
        w->stop = true;
      }
      w->cv.notify_one();
      w->thread.join();
    }
  }

  void run(const std::vector<std::function<void()>>& jobs) {
    std::lock_guard<std::mutex> serial(run_mutex_);
    while (workers_.size() < jobs.size()) workers_.push_back(std::make_unique<Worker>(this));
    {
      std::lock_guard<std::mutex> lock(done_mutex_);
      pending_ = jobs.size();
    }
    for (size_t i = 0; i < jobs.size(); ++i) {
      Worker& w = *workers_[i];
      {
        std::lock_guard<std::mutex> lock(w.mutex);
        w.job = jobs[i];
      }
      w.cv.notify_one();
    }
    std::unique_lock<std::mutex> lock(done_mutex_);
    done_cv_.wait(lock, [&] { return pending_ == 0; });
  }

 private:
  struct Worker {
    explicit Worker(WorkerPool* pool) : thread([this, pool] { loop(pool); }) {}
    void loop(WorkerPool* pool) {
      for (;;) {
        std::function<void()> job;
        {
          std::unique_lock<std::mutex> lock(mutex);
          cv.wait(lock, [&] { return stop || job_set(); });
          if (stop) return;
          job.swap(this->job);
        }
        job();
        std::lock_guard<std::mutex> lock(pool->done_mutex_);
        if (--pool->pending_ == 0) pool->done_cv_.notify_all();
      }
    }
    bool job_set() const { return static_cast<bool>(job); }
    std::mutex mutex;
    std::condition_variable cv;
    std::function<void()> job;
    bool stop = false;
    std::thread thread;  // last: starts once the members above exist
  };

  std::mutex run_mutex_;
  std::mutex done_mutex_;
  std::condition_variable done_cv_;
  size_t pending_ = 0;
  std::vector<std::unique_ptr<Worker>> workers_;
};

WorkerPool& pool() {
  static WorkerPool p;
  return p;
}

}  // namespace

namespace {
struct DependencyGate {
  std::mutex mutex;
  std::condition_variable cv;
  bool closed = false;
};
DependencyGate& gate() {
  static DependencyGate g;
  return g;
}
}  // namespace

void setGridDependency(bool closed) {
  std::lock_guard<std::mutex> lock(gate().mutex);
  gate().closed = closed;
}

void openGridDependency() {
  {
    std::lock_guard<std::mutex> lock(gate().mutex);
    gate().closed = false;
  }
  gate().cv.notify_all();
}

void gridDependencyWait() {
  std::unique_lock<std::mutex> lock(gate().mutex);
  gate().cv.wait(lock, [] { return !gate().closed; });
}

namespace {

/// Appends one job per emulated thread of l's grid (and the grid's blocks to `blocks`).
void addJobs(const Launch& l, std::vector<std::unique_ptr<BlockContext>>* blocks,
             std::vector<std::function<void()>>* jobs) {
  using Kernel = void (*)(gpu::KernelArgs);
  using ProbeKernel = void (*)(gpu::ProbeArgs);
  const Kernel kernel = reinterpret_cast<Kernel>(const_cast<void*>(l.kernel));
  for (int b = 0; b < l.blocks; ++b) {
    if (l.only_block >= 0 && b != l.only_block) continue;
    blocks->push_back(std::make_unique<BlockContext>(l.threads));
    BlockContext* block = blocks->back().get();
    for (int t = 0; t < l.threads; ++t) {
      jobs->emplace_back([=] {
        ThreadContext& ctx = threadContext();
        ctx.thread_idx = Dim3{static_cast<unsigned>(t), 0, 0};
        ctx.block_idx = Dim3{static_cast<unsigned>(b), 0, 0};
        ctx.block_dim = Dim3{static_cast<unsigned>(l.threads), 1, 1};
        ctx.grid_dim = Dim3{static_cast<unsigned>(l.blocks), 1, 1};
        ctx.block = block;
        ctx.fenced = false;
        ctx.last_atomic = nullptr;
        if (l.probe) {
          reinterpret_cast<ProbeKernel>(const_cast<void*>(l.kernel))(*l.probe);
        } else {
          kernel(l.args);
        }
        block->warps[t / 32]->barrier.leave();
        block->barrier.leave();
        ctx.block = nullptr;
      });
    }
  }
}

}  // namespace

void runConcurrently(const std::vector<Launch>& launches) {
  std::vector<std::unique_ptr<BlockContext>> blocks;
  std::vector<std::function<void()>> jobs;
  for (const Launch& l : launches) addJobs(l, &blocks, &jobs);
  pool().run(jobs);
}

void runOnLane(int lane, const Launch& launch) {
  static WorkerPool lanes[kMaxLanes];
  if (lane < 0 || lane >= kMaxLanes) std::abort();
  std::vector<std::unique_ptr<BlockContext>> blocks;
  std::vector<std::function<void()>> jobs;
  addJobs(launch, &blocks, &jobs);
  lanes[lane].run(jobs);
}

}  // namespace emu
}  // namespace symmar
