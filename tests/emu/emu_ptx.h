// The ptx:: wrappers of cuda/ptx.cuh for the kernel emulator: flags as std::atomic_ref with the
// orders PTX gives them, plain 16-byte loads, and multimem through the multicast registry, which
// reduces the same 16 bytes of every rank exactly as the PTX form defines it (fp32 accumulation for
// .acc::f32 and f32 add; exact max/min of f16/bf16).
//
// SYMMAR_EMU_WEAK_ORDER downgrades release and acquire to relaxed: the negative control that shows
// ThreadSanitizer catches a missing ordering step.
#pragma once
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace symmar {
namespace gpu {
namespace ptx {

#if defined(SYMMAR_EMU_WEAK_ORDER)
constexpr std::memory_order kReleaseOrder = std::memory_order_relaxed;
constexpr std::memory_order kAcquireOrder = std::memory_order_relaxed;
#else
constexpr std::memory_order kReleaseOrder = std::memory_order_release;
constexpr std::memory_order kAcquireOrder = std::memory_order_acquire;
#endif

inline void st_release_sys(uint32_t* p, uint32_t v) {
  ::symmar::emu::checkAligned(p, 4, "flag store");
  std::atomic_ref<uint32_t>(*p).store(v, kReleaseOrder);
}
inline uint32_t ld_acquire_sys(const uint32_t* p) {
  ::symmar::emu::checkAligned(p, 4, "flag load");
  ::symmar::emu::accessHook(p);
  return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(kAcquireOrder);
}
inline void st_relaxed_sys_u64(uint64_t* p, uint64_t v) {
  ::symmar::emu::checkAligned(p, 8, "64-bit store");
  std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_relaxed);
}
inline uint64_t ld_relaxed_sys_u64(const uint64_t* p) {
  ::symmar::emu::checkAligned(p, 8, "64-bit load");
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(p)).load(std::memory_order_relaxed);
}
inline void st_status(volatile int* p, int v) {
  std::atomic_ref<int>(*const_cast<int*>(p)).store(v, std::memory_order_relaxed);
}
inline uint32_t ld_volatile_u32(const uint32_t* p) {
  return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_relaxed);
}
inline long long globaltimer() { return ::symmar::emu::clockNanos(); }
/// The unicast and multicast views are the same host memory here: nothing to order.
inline void fence_proxy_alias() {}
/// Lamport data as four relaxed 32-bit atomics: each lane is written and read whole (a 16-bit lane
/// lies inside one 32-bit word), and ThreadSanitizer sees no plain race on data the protocol reads
/// while peers write it.
inline void st_volatile_vec(void* p, uint4 v) {
  ::symmar::emu::checkAligned(p, 16, "16-byte lamport store");
  ::symmar::emu::accessHook(p);
  uint32_t* w = static_cast<uint32_t*>(p);
  const uint32_t lanes[4] = {v.x, v.y, v.z, v.w};
  for (int i = 0; i < 4; ++i) std::atomic_ref<uint32_t>(w[i]).store(lanes[i], std::memory_order_relaxed);
}
inline uint4 ld_volatile_vec(const void* p) {
  ::symmar::emu::checkAligned(p, 16, "16-byte lamport load");
  uint32_t* w = static_cast<uint32_t*>(const_cast<void*>(p));
  uint4 v;
  v.x = std::atomic_ref<uint32_t>(w[0]).load(std::memory_order_relaxed);
  v.y = std::atomic_ref<uint32_t>(w[1]).load(std::memory_order_relaxed);
  v.z = std::atomic_ref<uint32_t>(w[2]).load(std::memory_order_relaxed);
  v.w = std::atomic_ref<uint32_t>(w[3]).load(std::memory_order_relaxed);
  return v;
}
/// Programmatic dependent launch: the emulator's gate stands for the grid this one depends on.
inline void griddep_wait() { ::symmar::emu::gridDependencyWait(); }
inline void griddep_launch_dependents() {}
inline uint4 ld_vec(const void* p) {
  ::symmar::emu::checkAligned(p, 16, "16-byte load");
  uint4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

namespace emu_detail {

template <typename Tag>
struct Lanes;
template <>
struct Lanes<F32Tag> {
  using Bits = uint32_t;
  static float toFloat(Bits b) { return __uint_as_float(b); }
  static Bits fromFloat(float f) { return __float_as_uint(f); }
};
template <>
struct Lanes<F16Tag> {
  using Bits = uint16_t;
  static float toFloat(Bits b) { return __half2float(__ushort_as_half(b)); }
  static Bits fromFloat(float f) { return __half_as_ushort(__float2half_rn(f)); }
};
template <>
struct Lanes<BF16Tag> {
  using Bits = uint16_t;
  static float toFloat(Bits b) { return __bfloat162float(__ushort_as_bfloat16(b)); }
  static Bits fromFloat(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
};

inline float apply(OpSum, float a, float b) { return a + b; }
inline float apply(OpMax, float a, float b) { return std::fmax(a, b); }
inline float apply(OpMin, float a, float b) { return std::fmin(a, b); }

}  // namespace emu_detail

/// multimem.ld_reduce / multimem.st on a multicast address: every rank's 16 bytes at that offset.
/// Sums accumulate in fp32 and round once (f32 add, .acc::f32 for f16x2/bf16x2); max and min of
/// f16/bf16 are exact (the result is one of the inputs).
template <typename Tag, typename Op>
struct multimem {
  using L = emu_detail::Lanes<Tag>;
  static constexpr int kLanes = 16 / sizeof(typename L::Bits);
  static uint4 ld_reduce(const void* mc) {
    ::symmar::emu::checkAligned(mc, 16, "multimem.ld_reduce");
    const std::vector<char*> targets = ::symmar::emu::unicastTargets(mc);
    float acc[kLanes];
    for (size_t r = 0; r < targets.size(); ++r) {
      typename L::Bits lanes[kLanes];
      std::memcpy(lanes, targets[r], sizeof(lanes));
      for (int i = 0; i < kLanes; ++i) {
        const float x = L::toFloat(lanes[i]);
        acc[i] = r == 0 ? x : emu_detail::apply(Op{}, acc[i], x);
      }
    }
    typename L::Bits out[kLanes];
    for (int i = 0; i < kLanes; ++i) out[i] = L::fromFloat(acc[i]);
    uint4 v;
    std::memcpy(&v, out, sizeof(v));
    return v;
  }
  static void st(void* mc, uint4 v) {
    ::symmar::emu::checkAligned(mc, 16, "multimem.st");
    for (char* target : ::symmar::emu::unicastTargets(mc)) std::memcpy(target, &v, sizeof(v));
  }
};

}  // namespace ptx
}  // namespace gpu
}  // namespace symmar
