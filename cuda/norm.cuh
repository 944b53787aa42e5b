// Row pieces of the fused residual add + RMSNorm shared by its kernels (add_rms_norm.cu's staged
// forms and the unfused rows, lamport_add_rms_norm.cu's lamport form): a row's sum stored and
// squared vector by vector, its statistic as a block reduction in a fixed order (so every rank that
// finishes a row from the same values computes the same bits), and the norm pass.
#pragma once
#include <stdint.h>
#include <cuda_fp8.h>

#include "cuda/common.cuh"

namespace symmar {
namespace gpu {

/// Lanes of a warp that a block of Threads threads fills (a block below a warp is the emulator's).
template <int Threads>
constexpr int warpLanes() {
  return Threads < 32 ? Threads : 32;
}

/// Block-shared storage of a kernel that finishes rows with Threads threads a block: one partial
/// sum of squares per warp for each row of a batch.
template <int Threads = kThreads>
struct NormShared {
  BlockShared sh;
  float warp_sum[kRowBatch][Threads / warpLanes<Threads>()];
  float inv[kRowBatch];  ///< each row's 1 / RMS where a row is spread over a group (groupInvRms)
};

/// Where a block stands among the fused call's row groups (KernelArgs::row_parts): row r of a chunk
/// goes to group r % groups, whose blocks take its vectors in part order.
struct RowGroup {
  size_t groups;
  size_t group;
  int parts;       ///< blocks of a group (1: a block a row)
  int part;        ///< which of its group's parts this block takes
  uint32_t syncs;  ///< group barriers this block has passed: which set of partial sums the next uses
  __device__ __forceinline__ bool takes(size_t r) const { return r % groups == group; }
};
__device__ __forceinline__ RowGroup rowGroupOf(const KernelArgs& a) {
  const int parts = a.row_parts > 1 ? a.row_parts : 1;
  const int b = static_cast<int>(blockIdx.x);
  return RowGroup{gridDim.x / static_cast<size_t>(parts), static_cast<size_t>(b / parts), parts, b % parts, 0};
}
/// The vectors [begin, end) of a row of `vecs` vectors that this block takes: every block of a
/// group one contiguous share, so the row's parts lie in part order.
__device__ __forceinline__ sched::Range partVecs(const RowGroup& g, size_t vecs) {
  return sched::splitRange(0, vecs, g.parts, g.part, 1);
}

__device__ __forceinline__ unsigned char toE4m3(float f) {
  return static_cast<unsigned char>(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3));
}

/// What the FP8 output multiplies the norm by: 1 / fp8_scale, rounded once. A division per element
/// would call the IEEE division's slow path, whose call costs the row loops a stack frame.
__device__ __forceinline__ float fp8Multiplier(const KernelArgs& a) { return __frcp_rn(a.fp8_scale); }

/// The first half of a row's statistic, for the row in batch slot j: each thread's sum of squares
/// added over its warp in an xor butterfly (both lanes of a pair add the same two values, so every
/// lane ends with the same bits), stored by lane 0. Every thread of the block calls it; a block
/// barrier must come before slotInvRms reads the slot.
template <int Threads>
__device__ __forceinline__ void addRowSquares(NormShared<Threads>* ns, int j, float ss) {
  constexpr int kLanes = warpLanes<Threads>();
  static_assert(Threads % kLanes == 0, "whole warps");
#pragma unroll
  for (int m = kLanes / 2; m > 0; m >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, m);
  if (threadIdx.x % kLanes == 0) ns->warp_sum[j][threadIdx.x / kLanes] = ss;
}

/// 1 / RMS of a row of h elements whose squares add up to sum_squares. The mean is a product with
/// 1 / h rounded once: a division would call its slow path (see fp8Multiplier).
__device__ __forceinline__ float invRms(float sum_squares, size_t h, float eps) {
  return 1.0f / sqrtf(sum_squares * __frcp_rn(static_cast<float>(h)) + eps);
}

/// The second half: 1 / RMS of the row in slot j, the warps' sums added in warp order, so every
/// thread (and every rank that finishes the row from the same values) computes the same bits.
template <int Threads>
__device__ __forceinline__ float slotInvRms(const NormShared<Threads>* ns, int j, size_t h, float eps) {
  constexpr int kWarps = Threads / warpLanes<Threads>();
  float total = ns->warp_sum[j][0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) total += ns->warp_sum[j][w];
  return invRms(total, h, eps);
}

/// The statistics of a batch's n rows where each row is spread over a group of blocks, once the
/// block barrier after addRowSquares has passed: each block's sum of squares of its part of a row
/// (its warps' sums in warp order) goes to DeviceState::row_part; one barrier of the group's blocks
/// (co-resident: the grid is within the co-residency cap); then each row's total is the parts' sums
/// added in part order, so every block of the group, and every rank, computes the same bits. The
/// result is in ns->inv. False when the group barrier failed (the comm failed: a sibling gave up,
/// or the timeout passed); the kernel must stop.
template <int Threads>
__device__ __forceinline__ bool groupInvRms(const KernelArgs& a, NormShared<Threads>* ns, RowGroup* g, int n) {
  constexpr int kWarps = Threads / warpLanes<Threads>();
  const int t = threadIdx.x;
  const int set = static_cast<int>(g->syncs & 1u);
  const size_t first = g->group * static_cast<size_t>(g->parts);
  if (t < n) {
    float mine = ns->warp_sum[t][0];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) mine += ns->warp_sum[t][w];
    a.state->row_part[set][blockIdx.x][t] = mine;
  }
  __syncthreads();
  if (t == 0) {
    uint32_t* word = &a.state->row_sync[first];
    __threadfence();  // this block's sums before its arrival (CUDA's atomics are relaxed)
    const uint32_t old = atomicAdd(word, g->part == 0 ? 0x80000000u - static_cast<uint32_t>(g->parts - 1) : 1u);
    // The wait is on this rank's own blocks: a timeout here is reported as the group's own.
    const auto arrived = [&] { return ((ptx::ld_acquire_sys(word) ^ old) & 0x80000000u) != 0; };
    if (!boundedSpin(a, a.rank, arrived, kReasonRowGroupTimeout)) {
      markAbort(&ns->sh);
    }
  }
  __syncthreads();
  ++g->syncs;
  if (ns->sh.abort) return false;
  if (t < n) {
    // Other blocks' stores: read afresh, never from a line this block's L1 kept from the last use.
    float total = __uint_as_float(ptx::ld_volatile_u32(reinterpret_cast<const uint32_t*>(&a.state->row_part[set][first][t])));
    for (int q = 1; q < g->parts; ++q) {
      total += __uint_as_float(ptx::ld_volatile_u32(reinterpret_cast<const uint32_t*>(&a.state->row_part[set][first + q][t])));
    }
    ns->inv[t] = invRms(total, a.hidden, a.eps);
  }
  __syncthreads();
  return true;
}

/// 1 / RMS of one row from each thread's sum of squares: two block barriers, where a shared-memory
/// tree takes one a level.
template <int Threads>
__device__ __forceinline__ float rowInvRms(NormShared<Threads>* ns, float ss, size_t h, float eps) {
  addRowSquares(ns, 0, ss);
  __syncthreads();
  const float inv = slotInvRms(ns, 0, h, eps);
  __syncthreads();  // every thread has read the slot before the next row's stores
  return inv;
}

/// Whether rows are whole 16-byte vectors: then every staged row is vector-aligned, and a thread
/// takes whole vectors. It depends on the call alone, so every rank sums a row's squares in the
/// same order (the alignment of a rank's own buffers only picks how they are accessed).
template <typename T>
__device__ __forceinline__ bool vectorRows(size_t h) {
  return h % Vec<T>::kElems == 0;
}
__device__ __forceinline__ bool vecAligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % sched::kVecBytes == 0;
}

/// E FP8 bytes stored at once where p allows (E = elements of a vector: 8 or 4).
template <int E>
union Fp8Pack;
template <>
union Fp8Pack<8> {
  uint2 w;
  unsigned char b[8];
};
template <>
union Fp8Pack<4> {
  uint32_t w;
  unsigned char b[4];
};

/// The end of one vector of a row's sum: residual_in added where given (res_in), rounded to the
/// dtype once, stored to residual_out, and its squares (of the stored values) added to *ss.
template <typename T>
__device__ __forceinline__ void storeSumVec(VecAcc<T, symmarSum>* acc, const typename T::Bits* res_in, bool in_al,
                                            typename T::Bits* res_out, bool out_al, float* ss) {
  if (res_in) acc->add(loadUser<T>(res_in, in_al));
  const Vec<T> stored = acc->result();
  storeUser<T>(res_out, stored, out_al);
#pragma unroll
  for (int e = 0; e < Vec<T>::kElems; ++e) {
    const float r = T::toFloat(stored.e[e]);
    *ss += r * r;
  }
}

/// The norm pass of vectors [vr.begin, vr.end) of row `row` (whole vectors), once its sums are in
/// residual_out and inv is known: norm_out = residual_out * inv * gamma, and its FP8 form where
/// asked. Each thread reads back the vectors it stored in the sum pass (the same range and stride).
template <typename T, int Threads>
__device__ __forceinline__ void normRowVec(const KernelArgs& a, size_t row, sched::Range vr, float inv) {
  using Bits = typename T::Bits;
  constexpr int E = Vec<T>::kElems;
  const size_t h = a.hidden;
  const Bits* res_out = static_cast<const Bits*>(a.recv) + row * h;
  const Bits* gamma = static_cast<const Bits*>(a.gamma);
  Bits* norm = static_cast<Bits*>(a.norm_out) + row * h;
  unsigned char* fp8 = a.fp8_out ? a.fp8_out + row * h : nullptr;
  const bool out_al = vecAligned(a.recv), gamma_al = vecAligned(a.gamma), norm_al = vecAligned(a.norm_out);
  const bool fp8_al = reinterpret_cast<uintptr_t>(a.fp8_out) % E == 0;
  const float fp8_mul = fp8 ? fp8Multiplier(a) : 0.0f;
  for (size_t v = vr.begin + threadIdx.x; v < vr.end; v += Threads) {
    const size_t i = v * E;
    const Vec<T> r = loadUser<T>(res_out + i, out_al);
    const Vec<T> g = loadUser<T>(gamma + i, gamma_al);
    Vec<T> n;
    Fp8Pack<E> q;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float y = T::toFloat(r.e[e]) * inv * T::toFloat(g.e[e]);
      n.e[e] = T::fromFloat(y);
      if (fp8) q.b[e] = toE4m3(y * fp8_mul);
    }
    storeUser<T>(norm + i, n, norm_al);
    if (!fp8) continue;
    if (fp8_al) {
      *reinterpret_cast<decltype(q.w)*>(fp8 + i) = q.w;
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) fp8[i + e] = q.b[e];
    }
  }
}

}  // namespace gpu
}  // namespace symmar
