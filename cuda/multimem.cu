// Multimem allreduce (NVLink SHARP): every rank stages its input, then for its own slice issues
// multimem.ld_reduce on the multicast address (the switch reduces across all ranks) and
// multimem.st of the result back to every rank's staging half 1; each rank then copies the whole
// chunk out of its own half 1. Only one rank reduces each element, so all ranks hold the same bits.
// Inputs are always staged: the multicast view needs the same offset on every rank.
#include <cstdint>

#include "cuda/common.cuh"

namespace symmar {
namespace gpu {
namespace {

template <typename T, int Op>
__global__ void __launch_bounds__(kThreads) multimemAllReduce(const SYMMAR_GRID_CONSTANT KernelArgs a) {
#if defined(SYMMAR_HAS_MULTIMEM)
  using Bits = typename T::Bits;
  using Ops = ptx::multimem<typename T::Tag, typename ptx::OpTag<Op>::type>;
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
  const Bits* own_out = reinterpret_cast<const Bits*>(a.base[a.rank] + a.staging_off + half1);
  // The multicast object is bound to the staging buffers only: its offsets are staging offsets.
  const Bits* mc_in = reinterpret_cast<const Bits*>(a.mc_base + half0);
  Bits* mc_out = reinterpret_cast<Bits*>(a.mc_base + half1);

  for (size_t c = 0; c < shape.nchunks; ++c) {
    const sched::Range cr = sched::chunkRange(a.count, a.chunk_elems, c);
    const size_t n = cr.size();
    for (int s = 0; s < a.world; ++s)
      copyIn<T, kCopyUnroll>(send + cr.begin, own_in, blockPart(shape.split_elems, n, a.world, s, vec), a.aligned);
    ptx::fence_proxy_alias();
    if (!blockBarrier(a, &sh, &epoch, kStagedInput)) return;
    ptx::fence_proxy_alias();

    // Own slice in whole vectors: a partial last vector reduces stale lanes past n too, which stay
    // inside this chunk's staging half (chunk_elems is a multiple of vec) and are never copied out.
    const sched::Range mine = blockPart(shape.split_elems, n, a.world, a.rank, vec);
    const size_t mine_end = mine.begin + (mine.size() + vec - 1) / vec * vec;
    for (size_t i = mine.begin + threadIdx.x * vec; i < mine_end; i += kThreads * vec) {
      Ops::st(mc_out + i, Ops::ld_reduce(mc_in + i));
    }
    ptx::fence_proxy_alias();
    if (!blockBarrier(a, &sh, &epoch, kStagedInput)) return;
    ptx::fence_proxy_alias();

    for (int s = 0; s < a.world; ++s) {
      copyOut<T, kCopyUnroll>(own_out, recv + cr.begin, blockPart(shape.split_elems, n, a.world, s, vec), a.aligned);
    }
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

template <typename T, int Op>
struct Multimem {
  static const void* entry() {
    // Only for the forms PTX has (ptx::has_multimem: no f32 max/min).
    if constexpr (!ptx::has_multimem<typename T::Tag, typename ptx::OpTag<Op>::type>::value) {
      return nullptr;
    } else {
      return reinterpret_cast<const void*>(&multimemAllReduce<T, Op>);
    }
  }
};

}  // namespace

const void* multimemKernel(symmarDataType_t dtype, symmarRedOp_t op) { return kernelFor<Multimem>(dtype, op); }

}  // namespace gpu
}  // namespace symmar
