// PTX behind small typed wrappers: system-scope release/acquire flags, the timer, proxy fences and
// multimem (NVLink SHARP) loads/stores. Kernels never contain inline asm themselves.
//
// Built for the kernel emulator (SYMMAR_EMU), the asm is left out and the header named by
// SYMMAR_EMU_PTX_HEADER defines the same functions with C++ atomics (tests/emu).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "symmar/symmar.h"

// multimem exists on SM90+ (and in the emulator, which models it).
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900) || defined(SYMMAR_EMU)
#define SYMMAR_HAS_MULTIMEM 1
#endif

namespace symmar {
namespace gpu {
namespace ptx {

// Element types and ops of the multimem reductions, as tags.
struct F32Tag {};
struct F16Tag {};
struct BF16Tag {};
struct OpSum {};
struct OpMax {};
struct OpMin {};

template <typename Tag, typename Op>
struct multimem;

/// The op tag of a symmarRedOp_t value (symmarSum -> OpSum, ...).
template <int Op>
struct OpTag;
template <>
struct OpTag<symmarSum> {
  using type = OpSum;
};
template <>
struct OpTag<symmarMax> {
  using type = OpMax;
};
template <>
struct OpTag<symmarMin> {
  using type = OpMin;
};

/// Whether PTX has a multimem.ld_reduce form for (element tag, op): every f16/bf16 op, and only
/// the add for f32 (there is no f32 max/min form). The multimem kernel exists exactly for these.
template <typename Tag, typename Op>
struct has_multimem {
  static constexpr bool value = true;
};
template <>
struct has_multimem<F32Tag, OpMax> {
  static constexpr bool value = false;
};
template <>
struct has_multimem<F32Tag, OpMin> {
  static constexpr bool value = false;
};

#if !defined(SYMMAR_EMU)
/// Publishes a flag: orders every earlier write of this thread (and, through a preceding
/// __syncthreads, of its block) before the flag at system scope, so peers on other GPUs see the data.
__device__ __forceinline__ void st_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
/// Reads a peer's flag; later reads of this thread see what the peer published before the flag.
__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
/// Plain (relaxed, system scope) 64-bit accesses for the descriptor that rides with a flag.
__device__ __forceinline__ void st_relaxed_sys_u64(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t ld_relaxed_sys_u64(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
/// Nanoseconds of the GPU's global timer: wall time, unlike clock64, whose rate follows the SM
/// clock (a bound in cycles at the peak clock would last longer on a throttled GPU).
__device__ __forceinline__ long long globaltimer() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
/// The comm's status words (host-mapped memory the host polls): plain volatile accesses.
__device__ __forceinline__ void st_status(volatile int* p, int v) { *p = v; }
/// A word other blocks of this GPU update with atomics, read afresh (not from a stale register or L1).
__device__ __forceinline__ uint32_t ld_volatile_u32(const uint32_t* p) { return *static_cast<const volatile uint32_t*>(p); }
/// Multicast and unicast addresses alias the same memory: order accesses across the two views.
__device__ __forceinline__ void fence_proxy_alias() { asm volatile("fence.proxy.alias;" ::: "memory"); }

/// 16-byte load of memory that peers write: cached in L2 only, never a stale L1 line.
__device__ __forceinline__ uint4 ld_vec(const void* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

/// Lamport data: 16-byte volatile accesses (morally strong, never cached stale in L1). A reader
/// checks each lane for the empty pattern, so a vector seen half written is simply read again.
__device__ __forceinline__ void st_volatile_vec(void* p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ uint4 ld_volatile_vec(const void* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

/// Programmatic dependent launch (sm_90+): wait until the grid this one depends on has finished
/// and its memory is visible (before the first read of user input or of the comm's state), and
/// let the next grid start its own prologue. No-ops where PDL does not exist or was not requested.
__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ---- multimem: reductions through the NVSwitch (SM90+, multicast addresses only) ----
// f16/bf16 sums accumulate in fp32 inside the switch (.acc::f32), which PTX allows only for add;
// max/min of f16/bf16 are exact without it. There is no f32 max/min here on purpose: the planner
// never asks for it.
#define SYMMAR_MULTIMEM_LD_REDUCE(TAG, OP, INSTR)                                    \
  template <>                                                                        \
  struct multimem<TAG, OP> {                                                         \
    static __device__ __forceinline__ uint4 ld_reduce(const void* mc) {              \
      uint4 v;                                                                       \
      asm volatile(INSTR " {%0,%1,%2,%3}, [%4];"                                     \
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)                      \
                   : "l"(mc)                                                         \
                   : "memory");                                                      \
      return v;                                                                      \
    }                                                                                \
    static __device__ __forceinline__ void st(void* mc, uint4 v) {                   \
      asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(mc), \
                   "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)                            \
                   : "memory");                                                      \
    }                                                                                \
  };

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
SYMMAR_MULTIMEM_LD_REDUCE(F32Tag, OpSum, "multimem.ld_reduce.relaxed.sys.global.add.v4.f32")
SYMMAR_MULTIMEM_LD_REDUCE(F16Tag, OpSum, "multimem.ld_reduce.relaxed.sys.global.add.acc::f32.v4.f16x2")
SYMMAR_MULTIMEM_LD_REDUCE(F16Tag, OpMax, "multimem.ld_reduce.relaxed.sys.global.max.v4.f16x2")
SYMMAR_MULTIMEM_LD_REDUCE(F16Tag, OpMin, "multimem.ld_reduce.relaxed.sys.global.min.v4.f16x2")
SYMMAR_MULTIMEM_LD_REDUCE(BF16Tag, OpSum, "multimem.ld_reduce.relaxed.sys.global.add.acc::f32.v4.bf16x2")
SYMMAR_MULTIMEM_LD_REDUCE(BF16Tag, OpMax, "multimem.ld_reduce.relaxed.sys.global.max.v4.bf16x2")
SYMMAR_MULTIMEM_LD_REDUCE(BF16Tag, OpMin, "multimem.ld_reduce.relaxed.sys.global.min.v4.bf16x2")
#endif
#undef SYMMAR_MULTIMEM_LD_REDUCE
#endif  // !SYMMAR_EMU

}  // namespace ptx
}  // namespace gpu
}  // namespace symmar

#if defined(SYMMAR_EMU)
#include SYMMAR_EMU_PTX_HEADER
#endif
