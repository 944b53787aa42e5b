// Reduce-scatter and all-gather through the NVSwitch (NVLink SHARP), per chunk of a rank's block,
// two barriers per chunk as in the multimem allreduce. Inputs are always staged: the multicast view
// needs the same offset on every rank. A half holds world segments of chunk_elems, segment q for
// block q.
//
// Reduce-scatter: each rank stages chunk [b, e) of every block q at segment q of half 0; after the
// first barrier it reduces its own segment across every rank with multimem.ld_reduce into its own
// half 1 (whole vectors; a partial last vector's stale lanes stay in the segment), and after the
// second (every peer done reading half 0) copies it out. Each element is reduced once, by the
// switch, so the rank that owns a block holds the only copy of its bits.
// All-gather: each rank stages its chunk in half 0, then pushes it with multimem.st to its segment
// of every rank's half 1; after the first barrier every rank copies all segments out of its own
// half 1, and the second barrier keeps the next chunk's stores off half 1 until everyone has.
#include <cstdint>

#include "cuda/common.cuh"

namespace symmar {
namespace gpu {
namespace {

/// This rank's staging half `half` (0 or 1), in elements.
template <typename T>
__device__ __forceinline__ typename T::Bits* stagingOf(const KernelArgs& a, int half) {
  return reinterpret_cast<typename T::Bits*>(a.base[a.rank] + a.staging_off +
                                             sched::stagingHalfOffset(a.staging_bytes, half));
}

template <typename T, int Op>
__global__ void __launch_bounds__(kThreads) multimemReduceScatter(const SYMMAR_GRID_CONSTANT KernelArgs a) {
#if defined(SYMMAR_HAS_MULTIMEM)
  using Bits = typename T::Bits;
  using Ops = ptx::multimem<typename T::Tag, typename ptx::OpTag<Op>::type>;
  constexpr size_t vec = Vec<T>::kElems;
  SYMMAR_BLOCK_SHARED(BlockShared, sh);
  uint32_t epoch;
  if (!blockBegin<T>(a, &sh, &epoch)) return;

  // Values are read from the kernel parameters where they are used rather than kept in locals:
  // with the 16-bit reductions this kernel is at the register limit (as in scatter_gather.cu).
  const size_t nchunks = sched::numChunks(a.count, a.chunk_elems);
  for (size_t c = 0; c < nchunks; ++c) {
    const sched::Range cr = sched::chunkRange(a.count, a.chunk_elems, c);
    const sched::Range part = blockPart(nchunks > 1 ? a.chunk_elems : a.count, cr.size(), a.world, -1, vec);
#pragma unroll 1
    for (int q = 0; q < a.world; ++q) {
      copyIn<T>(static_cast<const Bits*>(a.send) + q * a.count + cr.begin,
                stagingOf<T>(a, 0) + q * a.chunk_elems, part, a.aligned);
    }
    ptx::fence_proxy_alias();
    if (!blockBarrier(a, &sh, &epoch, kStagedInput)) return;
    ptx::fence_proxy_alias();

    // Own segment in whole vectors: a partial last vector's stale lanes stay in the segment.
    for (size_t i = part.begin + threadIdx.x * vec; i < part.end; i += kThreads * vec) {
      *reinterpret_cast<uint4*>(stagingOf<T>(a, 1) + a.rank * a.chunk_elems + i) =
          Ops::ld_reduce(reinterpret_cast<const Bits*>(a.mc_base + sched::stagingHalfOffset(a.staging_bytes, 0)) +
                         a.rank * a.chunk_elems + i);
    }
    if (!blockBarrier(a, &sh, &epoch, kStagedInput)) return;
    copyOut<T>(stagingOf<T>(a, 1) + a.rank * a.chunk_elems, static_cast<Bits*>(a.recv) + cr.begin, part, a.aligned);
  }
  blockEnd(a, &sh, epoch, false);
#elif defined(__CUDA_ARCH__)
  // Built for an architecture without multimem: fail loudly rather than return wrong data.
  (void)a;
  __trap();
#else
  (void)a;
#endif
}

template <typename T>
__global__ void __launch_bounds__(kThreads) multimemAllGather(const SYMMAR_GRID_CONSTANT KernelArgs a) {
#if defined(SYMMAR_HAS_MULTIMEM)
  using Bits = typename T::Bits;
  // A copy: multimem.st moves 16 bytes whatever they hold (the f32 form is a plain bit copy).
  using Ops = ptx::multimem<ptx::F32Tag, ptx::OpSum>;
  constexpr size_t vec = Vec<T>::kElems;
  SYMMAR_BLOCK_SHARED(BlockShared, sh);
  uint32_t epoch;
  if (!blockBegin<T>(a, &sh, &epoch)) return;

  // As in the reduce-scatter: parameters read where used.
  const size_t nchunks = sched::numChunks(a.count, a.chunk_elems);
  for (size_t c = 0; c < nchunks; ++c) {
    const sched::Range cr = sched::chunkRange(a.count, a.chunk_elems, c);
    const sched::Range part = blockPart(nchunks > 1 ? a.chunk_elems : a.count, cr.size(), a.world, -1, vec);
    copyIn<T>(static_cast<const Bits*>(a.send) + cr.begin, stagingOf<T>(a, 0), part, a.aligned);
    __syncthreads();  // the vectors below are read by other threads than the ones that staged them
    // Whole vectors: a partial last vector's stale lanes land past the chunk in the segment.
    {
      Bits* mc = reinterpret_cast<Bits*>(a.mc_base + sched::stagingHalfOffset(a.staging_bytes, 1)) +
                 a.rank * a.chunk_elems;
      const Bits* own = stagingOf<T>(a, 0);
      for (size_t i = part.begin + threadIdx.x * vec; i < part.end; i += kThreads * vec) {
        Ops::st(mc + i, *reinterpret_cast<const uint4*>(own + i));
      }
    }
    ptx::fence_proxy_alias();
    if (!blockBarrier(a, &sh, &epoch, kStagedInput)) return;
    ptx::fence_proxy_alias();

#pragma unroll 1
    for (int p = 0; p < a.world; ++p) {
      copyOut<T>(stagingOf<T>(a, 1) + p * a.chunk_elems, static_cast<Bits*>(a.recv) + p * a.count + cr.begin, part,
                 a.aligned);
    }
    if (!blockBarrier(a, &sh, &epoch, kStagedInput)) return;
  }
  blockEnd(a, &sh, epoch, false);
#elif defined(__CUDA_ARCH__)
  (void)a;
  __trap();
#else
  (void)a;
#endif
}

template <typename T, int Op>
struct MultimemReduceScatter {
  static const void* entry() {
    if constexpr (!ptx::has_multimem<typename T::Tag, typename ptx::OpTag<Op>::type>::value) {
      return nullptr;
    } else {
      return reinterpret_cast<const void*>(&multimemReduceScatter<T, Op>);
    }
  }
};

}  // namespace

const void* multimemReduceScatterKernel(symmarDataType_t dtype, symmarRedOp_t op) {
  return kernelFor<MultimemReduceScatter>(dtype, op);
}

const void* multimemAllGatherKernel(size_t elem_bytes) {
  switch (elem_bytes) {
    case 2:
      return reinterpret_cast<const void*>(&multimemAllGather<F16>);
    case 4:
      return reinterpret_cast<const void*>(&multimemAllGather<F32>);
    default:
      return nullptr;
  }
}

}  // namespace gpu
}  // namespace symmar
