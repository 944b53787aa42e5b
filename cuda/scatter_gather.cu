// Reduce-scatter and all-gather in the one-shot pattern, per chunk of a rank's block (count is
// one block's elements): one barrier per chunk, staging halves alternating as in the one-shot
// allreduce, every block of the grid handling the same part of each chunk on every rank.
//
// Reduce-scatter: each rank stages chunk [b, e) of every block q at q's segment of its half (a
// segment is chunk_elems long), then reduces its own block's chunk from every rank's segment for
// it, in rank order 0..N-1, so each block has the allreduce's bits. All-gather: each rank stages
// its chunk, then copies every rank's chunk to its place in the output. An input in the symmetric
// heap is not staged: peers read it in place, and the last block waits for every peer's done flag.
#include <cstdint>

#include "cuda/common.cuh"

namespace symmar {
namespace gpu {
namespace {

template <typename T, int Op>
__global__ void __launch_bounds__(kThreads) reduceScatter(const SYMMAR_GRID_CONSTANT KernelArgs a) {
  using Bits = typename T::Bits;
  constexpr size_t vec = Vec<T>::kElems;
  SYMMAR_BLOCK_SHARED(BlockShared, sh);
  uint32_t epoch;
  if (!blockBegin<T>(a, &sh, &epoch)) return;

  // Values are read from the kernel parameters where they are used rather than kept in locals:
  // with the 16-bit reductions this kernel is at the register limit.
  const size_t nchunks = sched::numChunks(a.count, a.chunk_elems);
  for (size_t c = 0; c < nchunks; ++c) {
    const sched::Range cr = sched::chunkRange(a.count, a.chunk_elems, c);
    const sched::Range part = blockPart(nchunks > 1 ? a.chunk_elems : a.count, cr.size(), a.world, -1, vec);
    const size_t half = sched::stagingHalfOffset(a.staging_bytes, static_cast<int>(c & 1));
    if (a.send_offset == kStagedInput) {
      // Block q's chunk goes to segment q (chunk_elems long) of the half.
#pragma unroll 1
      for (int q = 0; q < a.world; ++q) {
        copyIn<T>(static_cast<const Bits*>(a.send) + q * a.count + cr.begin,
                  reinterpret_cast<Bits*>(a.base[a.rank] + a.staging_off + half) + q * a.chunk_elems, part, a.aligned);
      }
    }
    if (!blockBarrier(a, &sh, &epoch, a.send_offset)) return;
    // This rank's block: its segment of each rank's half, or its place in an input read in place.
    const Bits* src[kMaxRanks];
#pragma unroll
    for (int p = 0; p < kMaxRanks; ++p) {
      src[p] = p < a.world ? sourceOf<T>(a, &sh, p, half + a.rank * a.chunk_elems * sizeof(Bits),
                                         a.rank * a.count + cr.begin)
                           : nullptr;
    }
    // In place recv is this rank's block of send, which no peer reads: they read their own blocks.
    reduceRange<T, Op>(src, a.world, static_cast<Bits*>(a.recv) + cr.begin, nullptr, part, a.aligned);
  }
  blockEnd(a, &sh, epoch, a.send_offset != kStagedInput);
}

template <typename T>
__global__ void __launch_bounds__(kThreads) allGather(const SYMMAR_GRID_CONSTANT KernelArgs a) {
  using Bits = typename T::Bits;
  constexpr size_t vec = Vec<T>::kElems;
  SYMMAR_BLOCK_SHARED(BlockShared, sh);
  uint32_t epoch;
  if (!blockBegin<T>(a, &sh, &epoch)) return;

  // As in reduceScatter: parameters read where used (the 16-bit copies are at the register limit).
  const size_t nchunks = sched::numChunks(a.count, a.chunk_elems);
  for (size_t c = 0; c < nchunks; ++c) {
    const sched::Range cr = sched::chunkRange(a.count, a.chunk_elems, c);
    const sched::Range part = blockPart(nchunks > 1 ? a.chunk_elems : a.count, cr.size(), a.world, -1, vec);
    const size_t half = sched::stagingHalfOffset(a.staging_bytes, static_cast<int>(c & 1));
    if (a.send_offset == kStagedInput) {
      copyIn<T>(static_cast<const Bits*>(a.send) + cr.begin,
                reinterpret_cast<Bits*>(a.base[a.rank] + a.staging_off + half), part, a.aligned);
    }
    if (!blockBarrier(a, &sh, &epoch, a.send_offset)) return;
    for (int p = 0; p < a.world; ++p) {
      Bits* dst = static_cast<Bits*>(a.recv) + p * a.count + cr.begin;
      const Bits* src = sourceOf<T>(a, &sh, p, half, cr.begin);
      // In place with a symmetric input the own block is the input peers read: it is already there.
      if (src != dst) copyOut<T>(src, dst, part, a.aligned);
    }
  }
  blockEnd(a, &sh, epoch, a.send_offset != kStagedInput);
}

template <typename T, int Op>
struct ReduceScatter {
  static const void* entry() { return reinterpret_cast<const void*>(&reduceScatter<T, Op>); }
};

}  // namespace

const void* reduceScatterKernel(symmarDataType_t dtype, symmarRedOp_t op) { return kernelFor<ReduceScatter>(dtype, op); }

const void* allGatherKernel(size_t elem_bytes) {
  switch (elem_bytes) {
    case 2:
      return reinterpret_cast<const void*>(&allGather<F16>);
    case 4:
      return reinterpret_cast<const void*>(&allGather<F32>);
    default:
      return nullptr;
  }
}

}  // namespace gpu
}  // namespace symmar
