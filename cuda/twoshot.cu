// Two-shot allreduce: reduce-scatter by loads (each rank reduces its own slice from every rank's
// input, in rank order), then all-gather by loads of the peers' reduced slices. Per chunk: inputs
// sit in staging half 0 (or in place in the user heap), reduced slices in half 1; two barriers.
#include <cstdint>

#include "cuda/common.cuh"

namespace symmar {
namespace gpu {
namespace {

template <typename T, int Op>
__global__ void __launch_bounds__(kThreads) twoShotAllReduce(const SYMMAR_GRID_CONSTANT KernelArgs a) {
  using Bits = typename T::Bits;
  constexpr size_t vec = Vec<T>::kElems;
  SYMMAR_BLOCK_SHARED(BlockShared, sh);
  uint32_t epoch;
  if (!blockBegin<T>(a, &sh, &epoch)) return;

  const CallShape shape = callShape(a);
  const size_t half0 = sched::stagingHalfOffset(a.staging_bytes, 0);
  const size_t half1 = sched::stagingHalfOffset(a.staging_bytes, 1);
  const Bits* send = static_cast<const Bits*>(a.send);
  Bits* recv = static_cast<Bits*>(a.recv);
  Bits* own_in = reinterpret_cast<Bits*>(a.base[a.rank] + a.staging_off + half0);
  Bits* own_out = reinterpret_cast<Bits*>(a.base[a.rank] + a.staging_off + half1);

  for (size_t c = 0; c < shape.nchunks; ++c) {
    const sched::Range cr = sched::chunkRange(a.count, a.chunk_elems, c);
    const size_t n = cr.size();
    if (a.send_offset == kStagedInput) {
      for (int s = 0; s < a.world; ++s)
        copyIn<T>(send + cr.begin, own_in, blockPart(shape.split_elems, n, a.world, s, vec), a.aligned);
    }
    if (!blockBarrier(a, &sh, &epoch, a.send_offset)) return;

    // Reduce-scatter: this rank's slice, from every rank, in rank order.
    const Bits* src[kMaxRanks];
#pragma unroll
    for (int p = 0; p < kMaxRanks; ++p) src[p] = p < a.world ? sourceOf<T>(a, &sh, p, half0, cr.begin) : nullptr;
    reduceRange<T, Op>(src, a.world, recv + cr.begin, own_out, blockPart(shape.split_elems, n, a.world, a.rank, vec), a.aligned);
    if (!blockBarrier(a, &sh, &epoch, a.send_offset)) return;

    // All-gather: every other slice from its owner's half 1.
    for (int s = 0; s < a.world; ++s) {
      if (s == a.rank) continue;
      const Bits* peer_out = reinterpret_cast<const Bits*>(a.base[s] + a.staging_off + half1);
      copyOut<T>(peer_out, recv + cr.begin, blockPart(shape.split_elems, n, a.world, s, vec), a.aligned);
    }
  }
  // Peers read this rank's input only before the second barrier of each chunk: no end wait needed.
  blockEnd(a, &sh, epoch, false);
}

template <typename T, int Op>
struct TwoShot {
  static const void* entry() { return reinterpret_cast<const void*>(&twoShotAllReduce<T, Op>); }
};

}  // namespace

const void* twoShotKernel(symmarDataType_t dtype, symmarRedOp_t op) { return kernelFor<TwoShot>(dtype, op); }

}  // namespace gpu
}  // namespace symmar
