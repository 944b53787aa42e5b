// The data path shared by the allreduce kernels and the fused one: how a call is cut into chunks and
// block parts, the copy loops between user memory and staging, and the rank-ordered reduction. The
// synchronisation every kernel runs around them (barriers, done flags, failure reports) is
// cuda/sync.cuh, included here.
#pragma once
#include <stdint.h>

#include "core/schedule.h"
#include "cuda/kernel_args.h"
#include "cuda/ptx.cuh"
#include "cuda/sync.cuh"
#include "cuda/vec.cuh"

namespace symmar {
namespace gpu {

/// How a call is cut: its chunks, and the element count every chunk's split into rank slices and
/// block parts is computed on (the count itself for a single-chunk call, chunk_elems otherwise), so
/// all chunks of a call split identically and a partial last chunk is just clipped.
struct CallShape {
  size_t nchunks;
  size_t split_elems;
};
__device__ __forceinline__ CallShape callShape(const KernelArgs& a) {
  const size_t nchunks = sched::numChunks(a.count, a.chunk_elems);
  return CallShape{nchunks, nchunks > 1 ? a.chunk_elems : a.count};
}

/// This block's part of slice `slice` (or of the whole chunk when slice < 0) of a chunk of n
/// elements, split as if the chunk had split_elems elements and clipped to n (see CallShape).
__device__ __forceinline__ sched::Range blockPart(size_t split_elems, size_t n, int world, int slice, size_t vec) {
  sched::Range r = slice < 0 ? sched::Range{0, split_elems} : sched::rankSlice(split_elems, world, slice, vec);
  sched::Range b = sched::blockRange(r, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x), vec);
  return sched::Range{sched::minSize(b.begin, n), sched::minSize(b.end, n)};
}

/// Vectors each thread of the copy loops has in flight: its loads of kCopyUnroll vectors are
/// issued before any of their stores, so a thread waits one memory latency per kCopyUnroll vectors
/// (over NVLink or PCIe, where a load takes microseconds, one vector in flight per thread leaves the
/// link mostly idle).
constexpr int kCopyUnroll = 4;

/// Copies [r.begin, r.end) from user memory to an aligned (staging) buffer at the same indices.
/// kUnroll vectors a thread: its loads issued before any of their stores (kCopyUnroll in the
/// allreduce kernels, whose copies move whole messages; 1 where a kernel is near its register limit).
template <typename T, int kUnroll = 1>
__device__ __forceinline__ void copyIn(const typename T::Bits* src, typename T::Bits* dst, sched::Range r,
                                       bool aligned) {
  constexpr size_t vec = Vec<T>::kElems;
  constexpr size_t step = static_cast<size_t>(kThreads) * vec;
  const size_t body = sched::vecBodyEnd(r, vec);
  size_t i = r.begin + threadIdx.x * vec;
  // Misaligned user memory (element by element) takes the plain loop: rare, and its registers.
  for (; kUnroll > 1 && aligned && i + (kUnroll - 1) * step < body; i += kUnroll * step) {
    uint4 v[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) v[k] = *reinterpret_cast<const uint4*>(src + i + k * step);
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) *reinterpret_cast<uint4*>(dst + i + k * step) = v[k];
  }
  for (; i < body; i += step) *reinterpret_cast<uint4*>(dst + i) = loadUser<T>(src + i, aligned).u;
  for (size_t j = body + threadIdx.x; j < r.end; j += kThreads) dst[j] = src[j];
}

/// Copies [r.begin, r.end) from an aligned (staging, possibly a peer's) buffer to user memory,
/// kUnroll vectors a thread as copyIn.
template <typename T, int kUnroll = 1>
__device__ __forceinline__ void copyOut(const typename T::Bits* src, typename T::Bits* dst, sched::Range r,
                                        bool aligned) {
  constexpr size_t vec = Vec<T>::kElems;
  constexpr size_t step = static_cast<size_t>(kThreads) * vec;
  const size_t body = sched::vecBodyEnd(r, vec);
  size_t i = r.begin + threadIdx.x * vec;
  for (; kUnroll > 1 && aligned && i + (kUnroll - 1) * step < body; i += kUnroll * step) {
    uint4 v[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) v[k] = ptx::ld_vec(src + i + k * step);
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) *reinterpret_cast<uint4*>(dst + i + k * step) = v[k];
  }
  for (; i < body; i += step) {
    Vec<T> v;
    v.u = ptx::ld_vec(src + i);
    storeUser<T>(dst + i, v, aligned);
  }
  for (size_t j = body + threadIdx.x; j < r.end; j += kThreads) dst[j] = src[j];
}

/// Where rank p's input for a chunk starting at element `first` lives: in place in its user heap
/// (input offset = byte offset of its send buffer) or in its staging half.
template <typename T>
__device__ __forceinline__ const typename T::Bits* sourceOf(const KernelArgs& a, const BlockShared* sh, int p,
                                                            size_t half_off, size_t first) {
  using Bits = typename T::Bits;
  if (sh->input_offset[p] == kStagedInput) return reinterpret_cast<const Bits*>(a.base[p] + a.staging_off + half_off);
  return reinterpret_cast<const Bits*>(a.base[p] + sh->input_offset[p]) + first;
}

/// Reduces [r.begin, r.end) over every rank's source in rank order 0..N-1 (fp32 accumulation) and
/// stores the result to dst (user memory) and, when non-null, to dst2 (aligned staging).
template <typename T, int Op>
__device__ __forceinline__ void reduceRange(const typename T::Bits* const* src, int world, typename T::Bits* dst,
                                            typename T::Bits* dst2, sched::Range r, bool aligned) {
  using Bits = typename T::Bits;
  constexpr size_t vec = Vec<T>::kElems;
  const size_t body = sched::vecBodyEnd(r, vec);
  for (size_t i = r.begin + threadIdx.x * vec; i < body; i += kThreads * vec) {
    Vec<T> v[kMaxRanks];
#pragma unroll
    for (int p = 0; p < kMaxRanks; ++p) {
      if (p < world) v[p].u = ptx::ld_vec(src[p] + i);
    }
    VecAcc<T, Op> acc;
    acc.first(v[0]);
#pragma unroll
    for (int p = 1; p < kMaxRanks; ++p) {
      if (p < world) acc.add(v[p]);
    }
    const Vec<T> out = acc.result();
    storeUser<T>(dst + i, out, aligned);
    if (dst2) *reinterpret_cast<uint4*>(dst2 + i) = out.u;
  }
  for (size_t i = body + threadIdx.x; i < r.end; i += kThreads) {
    float f = T::toFloat(src[0][i]);
#pragma unroll
    for (int p = 1; p < kMaxRanks; ++p) {
      if (p < world) f = combine<Op>(f, T::toFloat(src[p][i]));
    }
    const Bits b = T::fromFloat(f);
    dst[i] = b;
    if (dst2) dst2[i] = b;
  }
}

/// The instance of an allreduce kernel for (dtype, op): K<T, Op>::entry() names it (or returns
/// nullptr for a combination it does not serve). i32 and f64 have no kernels: the fallback serves them.
template <template <typename, int> class K, typename T>
const void* kernelForOp(symmarRedOp_t op) {
  switch (op) {
    case symmarSum:
      return K<T, symmarSum>::entry();
    case symmarMax:
      return K<T, symmarMax>::entry();
    case symmarMin:
      return K<T, symmarMin>::entry();
    default:
      return nullptr;
  }
}

template <template <typename, int> class K>
const void* kernelFor(symmarDataType_t dtype, symmarRedOp_t op) {
  switch (dtype) {
    case symmarFloat32:
      return kernelForOp<K, F32>(op);
    case symmarFloat16:
      return kernelForOp<K, F16>(op);
    case symmarBfloat16:
      return kernelForOp<K, BF16>(op);
    default:
      return nullptr;
  }
}

}  // namespace gpu
}  // namespace symmar
