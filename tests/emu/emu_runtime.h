// The CUDA execution model on the CPU, for compiling the real kernel sources (cuda/*.cu) as host
// C++: built-in variables, __syncthreads as a real per-block barrier, fences, atomics, the
// timer, bit casts, and block-shared storage. Threads are std::threads (one per emulated CUDA
// thread), so ThreadSanitizer checks the kernels' synchronisation under the C++ memory model.
// Test-only: never part of libsymmar. Include before any kernel source.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector_types.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "cuda/kernel_args.h"

namespace symmar {
namespace emu {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

/// __syncthreads for one block. A thread that exits leaves the barrier (as on the GPU, where an
/// exited thread no longer counts), so a block whose threads return together never hangs.
class BlockBarrier {
 public:
  explicit BlockBarrier(int threads) : expected_(threads) {}
  void wait();
  void leave();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int expected_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

/// One emulated warp (32 lanes, or fewer in a block below 32 threads): where its lanes exchange
/// values for a shuffle, and the barrier that keeps the exchange in step.
struct WarpContext {
  explicit WarpContext(int n) : lanes(n), barrier(n) {}
  int lanes;
  BlockBarrier barrier;
  uint32_t slot[32] = {};
};

/// One emulated block: its barrier, its warps and its shared memory.
struct BlockContext {
  explicit BlockContext(int threads);
  BlockBarrier barrier;
  std::vector<std::unique_ptr<WarpContext>> warps;
  alignas(64) unsigned char shared[4096] = {};
};

/// The built-in variables of the calling emulated thread.
struct ThreadContext {
  Dim3 thread_idx, block_idx, block_dim, grid_dim;
  BlockContext* block = nullptr;
  bool fenced = false;           ///< a fence since this thread's last atomic (atomicOrder)
  void* last_atomic = nullptr;   ///< the word of this thread's last atomic, until a fence acquires it
};
ThreadContext& threadContext();

/// The block's shared storage, viewed as T (a kernel declares one such object).
template <typename T>
T& blockShared() {
  static_assert(sizeof(T) <= sizeof(BlockContext::shared), "block-shared storage too small");
  return *reinterpret_cast<T*>(threadContext().block->shared);
}

/// __shfl_xor_sync on 32-bit words: this lane's value goes out, lane (this ^ lane_mask)'s comes
/// back. Every lane of the calling warp must take part, as the full mask requires on the GPU.
uint32_t shuffleXor(uint32_t bits, int lane_mask);

/// Nanoseconds of a steady clock (the emulated %globaltimer); yields, so spinning threads let the
/// others run.
long long clockNanos();

/// Multicast emulation: a range of "multicast addresses" standing for the same offsets in every
/// rank's allocation, as a multicast object bound to each rank's memory does.
struct MulticastGroup {
  const char* mc_base = nullptr;
  size_t bytes = 0;
  std::vector<char*> ranks;  ///< each rank's unicast allocation
};
/// Registers a group for the kernels launched after this call (until it is unregistered).
void registerMulticast(const MulticastGroup* group);
void unregisterMulticast(const MulticastGroup* group);
/// Every rank's unicast address behind a multicast address (aborts if none is registered).
std::vector<char*> unicastTargets(const void* mc);

/// Programmatic dependent launch: while a gate is set, griddep_wait() in a kernel blocks until the
/// test opens it (standing for the grid the kernel depends on finishing); without one it returns.
void setGridDependency(bool closed);
void openGridDependency();
void gridDependencyWait();

/// One rank's kernel launch: grid of blocks x kThreads threads. An allreduce kernel takes args; the
/// co-scheduling probe (when probe is set) takes *probe instead.
struct Launch {
  const void* kernel;
  int blocks;
  gpu::KernelArgs args;
  const gpu::ProbeArgs* probe = nullptr;
  int threads = gpu::kThreads;  ///< per block
  /// >= 0: run only this block of the grid (a block that starts after its siblings have ended).
  int only_block = -1;
};
/// Runs every launch's grid concurrently (as ranks' kernels run at once on their GPUs) and
/// returns when every emulated thread has exited.
void runConcurrently(const std::vector<Launch>& launches);
/// Runs one grid on lane `lane`'s own threads and returns when it has finished: several lanes may
/// run at once, each from a thread of its own (one lane per rank: a rank's stream, whose kernels
/// run one after another while other ranks' run on, no join between calls). Lanes 0..kMaxLanes-1.
constexpr int kMaxLanes = 16;
void runOnLane(int lane, const Launch& launch);

/// Test hook: called with the address of every acquire load of a flag (ptx::ld_acquire_sys) and of
/// every lamport vector store (ptx::st_volatile_vec) before the access; nullptr (the default) for
/// none. It may block, to hold a rank at a chosen point of its kernel.
using AccessHook = void (*)(const void* address);
void setAccessHook(AccessHook hook);
void accessHook(const void* address);

/// Aborts with a message unless p is aligned to `align` bytes: the GPU faults on a misaligned
/// access (cudaErrorMisalignedAddress), where x86 would quietly forgive it.
void checkAligned(const void* p, size_t align, const char* what);

/// CUDA's atomics are relaxed: ordering comes from a fence before the signalling atomic and one
/// after the observing one. The emulator models that pairing, because ThreadSanitizer ignores
/// std::atomic_thread_fence: an atomic is a release when its thread issued __threadfence since its
/// previous atomic (atomicOrder), and a fence right after an atomic acquires that atomic's word
/// (noteFence). A missing fence then shows as a data race.
std::memory_order atomicOrder();
void noteAtomic(void* word);
void noteFence();

}  // namespace emu
}  // namespace symmar

// ---- what device code sees ----
#define threadIdx (::symmar::emu::threadContext().thread_idx)
#define blockIdx (::symmar::emu::threadContext().block_idx)
#define blockDim (::symmar::emu::threadContext().block_dim)
#define gridDim (::symmar::emu::threadContext().grid_dim)
#define SYMMAR_BLOCK_SHARED(Type, name) Type& name = ::symmar::emu::blockShared<Type>()

#ifndef __global__
#define __global__
#endif
#ifndef __device__
#define __device__
#endif
#ifndef __forceinline__
#define __forceinline__ inline
#endif
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

inline void __syncthreads() { ::symmar::emu::threadContext().block->barrier.wait(); }
// A fence orders through the next atomic of its thread (atomicOrder): ThreadSanitizer does not
// model std::atomic_thread_fence, so that pairing is what carries a fence's ordering here.
inline void __threadfence() {
#if !defined(__SANITIZE_THREAD__)  // GCC refuses the fence under ThreadSanitizer, which ignores it anyway
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  ::symmar::emu::noteFence();
}
inline void __threadfence_system() { __threadfence(); }
inline float __shfl_xor_sync(unsigned /*mask*/, float v, int lane_mask) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof(b));
  b = ::symmar::emu::shuffleXor(b, lane_mask);
  std::memcpy(&v, &b, sizeof(v));
  return v;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  const unsigned old = std::atomic_ref<unsigned>(*p).fetch_add(v, ::symmar::emu::atomicOrder());
  ::symmar::emu::noteAtomic(p);
  return old;
}
inline int atomicExch(int* p, int value) {
  const int old = std::atomic_ref<int>(*p).exchange(value, ::symmar::emu::atomicOrder());
  ::symmar::emu::noteAtomic(p);
  return old;
}
inline unsigned atomicCAS(unsigned* p, unsigned compare, unsigned value) {
  const std::memory_order order = ::symmar::emu::atomicOrder();
  std::atomic_ref<unsigned>(*p).compare_exchange_strong(compare, value, order, std::memory_order_relaxed);
  ::symmar::emu::noteAtomic(p);
  return compare;  // the old value, as CUDA's atomicCAS returns it
}
[[noreturn]] inline void __trap() { std::abort(); }
inline int __ffs(int x) { return __builtin_ffs(x); }
// 1 / x rounded to nearest even, as the GPU's __frcp_rn (an IEEE division of 1 by x is).
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __uint_as_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}
inline uint32_t __float_as_uint(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}
