// Fused allreduce + residual add + RMSNorm (+ FP8 E4M3 output) in the lamport pattern: no barrier,
// for the smallest batches, where the staged forms' barriers are most of the call. Block b takes
// rows b, b + grid, ...: it pushes them into its slot of every peer's current lamport buffer, then
// finishes them as the peers' rows arrive: every rank's row summed in rank order with residual_in,
// rounded once, then normalised (and quantised to FP8), as the staged one-shot finishes a row, so
// every rank computes the same bits. The header, the end checks, the clearing and the rotation are
// the plain lamport call's (lamport.cuh): the two share the buffers and the call numbering, and the
// header's signature (the fused call's) keeps a fused call from pairing with a peer's plain one.
// Rows are whole 16-byte vectors and the call fits a slot (the host offers the form only then).
// A wait that gives up marks the call failed; the block's threads then sum what is there without
// waiting, so that its barriers still meet, and the call reports the failure.
#include <cstdint>

#include "cuda/lamport.cuh"
#include "cuda/norm.cuh"

namespace symmar {
namespace gpu {
namespace {

template <typename T>
__global__ void __launch_bounds__(kLamportThreads, 1) lamportAddRmsNorm(const SYMMAR_GRID_CONSTANT KernelArgs a) {
  using Bits = typename T::Bits;
  constexpr size_t E = Vec<T>::kElems;
  SYMMAR_BLOCK_SHARED(NormShared<kLamportThreads>, ns);
  const size_t h = a.hidden, row_vecs = h / E, tokens = a.count / h;
  if (!entryCheck(a, &ns.sh)) {
    for (size_t r = blockIdx.x; r < tokens; r += gridDim.x) poisonShare<T>(a, r * h, (r + 1) * h);
    return;
  }
  const LamportCall c = lamportCall(a);
  for (size_t r = blockIdx.x; r < tokens; r += gridDim.x) {
    for (size_t j = threadIdx.x; j < row_vecs; j += kLamportThreads) lamportPush<T>(a, c.buf, r * row_vecs + j);
  }
  lamportPushHeader<T>(a, c);

  const uint4* current = lamportCurrent(a, c);
  const uint32_t peers = lamportPeers(a);
  const bool in_al = vecAligned(a.residual_in), out_al = vecAligned(a.recv);
  bool waiting = true;  // until a wait gives up
  for (size_t r = blockIdx.x; r < tokens; r += gridDim.x) {
    const Bits* res_in = a.residual_in ? static_cast<const Bits*>(a.residual_in) + r * h : nullptr;
    Bits* res_out = static_cast<Bits*>(a.recv) + r * h;
    float ss = 0.0f;
    for (size_t j = threadIdx.x; j < row_vecs; j += kLamportThreads) {
      VecAcc<T, symmarSum> acc;
      if (!lamportReduce<T, symmarSum>(a, current, peers, r * row_vecs + j, waiting, &acc)) {
        markAbort(&ns.sh);
        waiting = false;
      }
      storeSumVec<T>(&acc, res_in ? res_in + j * E : nullptr, in_al, res_out + j * E, out_al, &ss);
    }
    normRowVec<T, kLamportThreads>(a, r, sched::Range{0, row_vecs}, rowInvRms(&ns, ss, h, a.eps));
  }
  lamportFinish<T>(a, &ns.sh, c, tokens * row_vecs);
}

}  // namespace

const void* lamportAddRmsNormKernel(symmarDataType_t dtype) {
  switch (dtype) {
    case symmarFloat32:
      return reinterpret_cast<const void*>(&lamportAddRmsNorm<F32>);
    case symmarFloat16:
      return reinterpret_cast<const void*>(&lamportAddRmsNorm<F16>);
    case symmarBfloat16:
      return reinterpret_cast<const void*>(&lamportAddRmsNorm<BF16>);
    default:
      return nullptr;
  }
}

}  // namespace gpu
}  // namespace symmar
