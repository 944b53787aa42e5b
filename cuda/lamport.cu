// Lamport one-shot: no barrier. Each rank pushes its input into its slot of every peer's current
// lamport buffer; a reader waits on the data itself, kLamportEmpty (-0.0 in every 16-bit half)
// meaning "not written yet", then reduces the slots in rank order 0..N-1 (fp32), so all ranks
// compute the same bits. A header at the end of the slot carries the call's signature (count,
// dtype, op, call number): block 0 compares it once the data is in, and a peer whose call
// differs fails the call in the same kernel (its vectors may already have been summed into recv, but
// the call never reports success). Three buffers rotate: a call clears the buffer its previous call
// read, which no peer writes again before this rank's next call has published its data. The ring
// index is kept apart from the wrapping call number (a 32-bit count is no multiple of 3). Every
// wait is bounded and the failure words work as for the barrier kernels.
#include <cstdint>

#include "cuda/lamport.cuh"

namespace symmar {
namespace gpu {
namespace {

template <typename T, int Op>
__global__ void __launch_bounds__(kLamportThreads, 1) lamportAllReduce(const SYMMAR_GRID_CONSTANT KernelArgs a) {
  using Bits = typename T::Bits;
  constexpr size_t vec = Vec<T>::kElems;
  SYMMAR_BLOCK_SHARED(BlockShared, sh);
  const size_t nvec = (a.count + vec - 1) / vec;  // data vectors (the header is the slot's last)
  const sched::Range mine = sched::splitRange(0, nvec, static_cast<int>(gridDim.x), static_cast<int>(blockIdx.x), 1);
  if (!entryCheck(a, &sh)) {
    poisonShare<T>(a, mine.begin * vec, mine.end * vec < a.count ? mine.end * vec : a.count);
    return;
  }
  const LamportCall c = lamportCall(a);
  for (size_t v = mine.begin + threadIdx.x; v < mine.end; v += kLamportThreads) lamportPush<T>(a, c.buf, v);
  lamportPushHeader<T>(a, c);

  // Reduce every slot in rank order once every peer's vector has arrived.
  Bits* recv = static_cast<Bits*>(a.recv);
  const uint4* current = lamportCurrent(a, c);
  const uint32_t peers = lamportPeers(a);
  for (size_t v = mine.begin + threadIdx.x; v < mine.end; v += kLamportThreads) {
    VecAcc<T, Op> acc;
    if (!lamportReduce<T, Op>(a, current, peers, v, true, &acc)) {
      markAbort(&sh);
      break;
    }
    const Vec<T> out = acc.result();
    if ((v + 1) * vec <= a.count) {
      storeUser<T>(recv + v * vec, out, a.aligned);
    } else {
#pragma unroll
      for (size_t i = 0; i < vec; ++i) {
        if (v * vec + i < a.count) recv[v * vec + i] = out.e[i];
      }
    }
  }
  lamportFinish<T>(a, &sh, c, nvec);
}

template <typename T, int Op>
struct Lamport {
  static const void* entry() { return reinterpret_cast<const void*>(&lamportAllReduce<T, Op>); }
};

}  // namespace

const void* lamportKernel(symmarDataType_t dtype, symmarRedOp_t op) { return kernelFor<Lamport>(dtype, op); }

}  // namespace gpu
}  // namespace symmar
