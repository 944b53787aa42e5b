// Fused allreduce + residual add + RMSNorm (+ FP8 E4M3 output) in the lamport pattern: no barrier,
// for the smallest batches, where the staged forms' barriers are most of the call. Rows go to
// groups of blocks as in the staged forms (RowGroup: a block a row, or a row's vectors split among a
// group where the call has fewer rows than the grid may have blocks); a block pushes its part of its
// rows into its slot of every peer's current lamport buffer, then finishes that part as the peers'
// vectors arrive: every rank's vector summed in rank order with residual_in, rounded once, then
// normalised (and quantised to FP8) with the row's statistic (its group's parts added in part
// order after a barrier of the group: groupInvRms), so every rank computes the same bits. Lamport
// vectors carry their own arrival, so no block pairs with a peer's block of the same index. The header, the end checks, the clearing and the rotation are
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
  RowGroup g = rowGroupOf(a);
  const sched::Range vr = partVecs(g, row_vecs);  // this block's vectors of each of its rows
  if (!entryCheck(a, &ns.sh)) {
    for (size_t r = g.group; r < tokens; r += g.groups) poisonShare<T>(a, r * h + vr.begin * E, r * h + vr.end * E);
    return;
  }
  const LamportCall c = lamportCall(a);
  for (size_t r = g.group; r < tokens; r += g.groups) {
    for (size_t j = vr.begin + threadIdx.x; j < vr.end; j += kLamportThreads) lamportPush<T>(a, c.buf, r * row_vecs + j);
  }
  lamportPushHeader<T>(a, c);

  const uint4* current = lamportCurrent(a, c);
  const uint32_t peers = lamportPeers(a);
  const bool in_al = vecAligned(a.residual_in), out_al = vecAligned(a.recv);
  bool waiting = true;  // until a wait gives up
  for (size_t r = g.group; r < tokens; r += g.groups) {
    const Bits* res_in = a.residual_in ? static_cast<const Bits*>(a.residual_in) + r * h : nullptr;
    Bits* res_out = static_cast<Bits*>(a.recv) + r * h;
    float ss = 0.0f;
    for (size_t j = vr.begin + threadIdx.x; j < vr.end; j += kLamportThreads) {
      VecAcc<T, symmarSum> acc;
      if (!lamportReduce<T, symmarSum>(a, current, peers, r * row_vecs + j, waiting, &acc)) {
        markAbort(&ns.sh);
        waiting = false;
      }
      storeSumVec<T>(&acc, res_in ? res_in + j * E : nullptr, in_al, res_out + j * E, out_al, &ss);
    }
    float inv;
    if (g.parts > 1) {
      // A failed group barrier means the comm has failed: stop, as the staged forms do.
      addRowSquares(&ns, 0, ss);
      __syncthreads();
      if (!groupInvRms(a, &ns, &g, 1)) return;
      inv = ns.inv[0];
    } else {
      inv = rowInvRms(&ns, ss, h, a.eps);
    }
    normRowVec<T, kLamportThreads>(a, r, vr, inv);
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
