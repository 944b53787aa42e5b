// One-shot allreduce: every rank reads every rank's input for its block's part of each chunk and
// reduces it in rank order 0..N-1, so all ranks compute the same bits. One barrier per chunk.
#include <cstdint>

#include "cuda/common.cuh"

namespace symmar {
namespace gpu {
namespace {

template <typename T, int Op>
__global__ void __launch_bounds__(kThreads) oneShotAllReduce(const SYMMAR_GRID_CONSTANT KernelArgs a) {
  using Bits = typename T::Bits;
  constexpr size_t vec = Vec<T>::kElems;
  SYMMAR_BLOCK_SHARED(BlockShared, sh);
  uint32_t epoch;
  if (!blockBegin<T>(a, &sh, &epoch)) return;

  // In place (send == recv) never reads peers' user buffers directly: this rank would overwrite
  // its input while peers still read it. The host clears send_offset for that case.
  const bool peers_read_user = a.send_offset != kStagedInput;
  const CallShape shape = callShape(a);
  const Bits* send = static_cast<const Bits*>(a.send);
  Bits* recv = static_cast<Bits*>(a.recv);
  Bits* own_staging = reinterpret_cast<Bits*>(a.base[a.rank] + a.staging_off);

  for (size_t c = 0; c < shape.nchunks; ++c) {
    const sched::Range cr = sched::chunkRange(a.count, a.chunk_elems, c);
    const sched::Range part = blockPart(shape.split_elems, cr.size(), a.world, -1, vec);
    // Halves alternate, so the next chunk's copy-in never races with this chunk's peer reads.
    const size_t half = sched::stagingHalfOffset(a.staging_bytes, static_cast<int>(c & 1));
    if (!peers_read_user) copyIn<T, kCopyUnroll>(send + cr.begin, own_staging + half / sizeof(Bits), part, a.aligned);
    if (!blockBarrier(a, &sh, &epoch, a.send_offset)) return;
    const Bits* src[kMaxRanks];
#pragma unroll
    for (int p = 0; p < kMaxRanks; ++p) src[p] = p < a.world ? sourceOf<T>(a, &sh, p, half, cr.begin) : nullptr;
    reduceRange<T, Op>(src, a.world, recv + cr.begin, nullptr, part, a.aligned);
  }
  blockEnd(a, &sh, epoch, peers_read_user);
}

template <typename T, int Op>
struct OneShot {
  static const void* entry() { return reinterpret_cast<const void*>(&oneShotAllReduce<T, Op>); }
};

}  // namespace

const void* oneShotKernel(symmarDataType_t dtype, symmarRedOp_t op) { return kernelFor<OneShot>(dtype, op); }

}  // namespace gpu
}  // namespace symmar
