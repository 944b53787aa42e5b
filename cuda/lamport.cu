// Lamport one-shot: no barrier. Each rank pushes its input into its slot of every peer's current
// lamport buffer; a reader waits on the data itself, kLamportEmpty (-0.0 in every 16-bit half)
// meaning "not written yet", then reduces the slots in rank order 0..N-1 (fp32), so all ranks
// compute the same bits. A header at the end of the slot carries the call's signature (count,
// dtype, op, call number): a peer whose call differs is found instead of read. Three buffers rotate: a call
// clears the buffer its previous call read, which no peer writes again before this rank's next
// call has published its data. Every wait is bounded and the failure words work as for the
// barrier kernels.
#include <cstdint>

#include "cuda/common.cuh"

namespace symmar {
namespace gpu {
namespace {

template <typename T>
__device__ __forceinline__ bool lamportArrived(uint4 u) {
  if (sizeof(typename T::Bits) == 4) {
    return u.x != sched::kLamportEmpty && u.y != sched::kLamportEmpty && u.z != sched::kLamportEmpty &&
           u.w != sched::kLamportEmpty;
  }
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
  bool all = true;
#pragma unroll
  for (int i = 0; i < 4; ++i) all = all && (w[i] & 0xffffu) != 0x8000u && (w[i] >> 16) != 0x8000u;
  return all;
}

/// Vector v of this rank's input as it travels: a partial last vector padded with +0.0, and no lane
/// equal to the empty pattern (f16/bf16 -0.0 becomes +0.0; the f32 word kLamportEmpty, -0.0).
template <typename T>
__device__ __forceinline__ Vec<T> lamportInput(const KernelArgs& a, size_t v) {
  using Bits = typename T::Bits;
  constexpr size_t vec = Vec<T>::kElems;
  const Bits* send = static_cast<const Bits*>(a.send) + v * vec;
  Vec<T> x;
  if ((v + 1) * vec <= a.count) {
    x = loadUser<T>(send, a.aligned);
  } else {
#pragma unroll
    for (size_t i = 0; i < vec; ++i) x.e[i] = v * vec + i < a.count ? send[i] : Bits(0);
  }
#pragma unroll
  for (size_t i = 0; i < vec; ++i) {
    if (sizeof(Bits) == 4 && x.e[i] == static_cast<Bits>(sched::kLamportEmpty)) x.e[i] = static_cast<Bits>(0x80000000u);
    if (sizeof(Bits) == 2 && x.e[i] == static_cast<Bits>(0x8000u)) x.e[i] = 0;
  }
  return x;
}

/// Slot `from` of lamport buffer `buffer` in an area (a rank's allocation + lamport_off).
__device__ __forceinline__ uint4* lamportSlot(char* area, int world, int buffer, int from) {
  return reinterpret_cast<uint4*>(area + sched::lamportSlotOffset(buffer, from, world));
}

template <typename T>
__device__ __forceinline__ bool lamportWait(const KernelArgs& a, const uint4* p, int peer, uint4* out) {
  // Most vectors have arrived by the time they are read: one look, then the bounded spin.
  *out = ptx::ld_volatile_vec(p);
  return lamportArrived<T>(*out) || boundedSpin(a, peer, [&] {
    *out = ptx::ld_volatile_vec(p);
    return lamportArrived<T>(*out);
  });
}

/// The header of this call: its signature, as 16 bytes no lane of which is empty.
template <typename T, int Op>
__device__ __forceinline__ uint4 lamportHeader(const KernelArgs& a, uint32_t call) {
  uint4 u;
  u.x = sched::lamportSignatureWord(a.count, T::kType, Op, call, 0);
  u.y = sched::lamportSignatureWord(a.count, T::kType, Op, call, 1);
  u.z = sched::lamportSignatureWord(a.count, T::kType, Op, call, 2);
  u.w = sched::lamportSignatureWord(a.count, T::kType, Op, call, 3);
  return u;
}

template <typename T, int Op>
__global__ void __launch_bounds__(kLamportThreads) lamportAllReduce(KernelArgs a) {
  using Bits = typename T::Bits;
  constexpr size_t vec = Vec<T>::kElems;
  SYMMAR_BLOCK_SHARED(BlockShared, sh);
  if (!entryCheck(a, &sh)) return;
  const int t = threadIdx.x;
  const uint32_t call = a.state->lamport_calls;
  const int buf = static_cast<int>(call % sched::kLamportBuffers);
  const int prev = static_cast<int>((call + sched::kLamportBuffers - 1) % sched::kLamportBuffers);
  const size_t nvec = (a.count + vec - 1) / vec;  // data vectors (the header is the slot's last)
  const sched::Range mine = sched::splitRange(0, nvec, static_cast<int>(gridDim.x), static_cast<int>(blockIdx.x), 1);

  // Push this block's vectors to every peer, and (block 0) the header. Loops over ranks run to
  // kMaxRanks with constant indices: a.base[p] then stays in the parameter space.
  char* own = a.base[a.rank] + a.lamport_off;
  for (size_t v = mine.begin + t; v < mine.end; v += kLamportThreads) {
    const Vec<T> x = lamportInput<T>(a, v);
#pragma unroll
    for (int p = 0; p < kMaxRanks; ++p) {
      if (p < a.world && p != a.rank) ptx::st_volatile_vec(lamportSlot(a.base[p] + a.lamport_off, a.world, buf, a.rank) + v, x.u);
    }
  }
  const bool header_thread = blockIdx.x == 0 && t < a.world && t != a.rank;
  if (header_thread) {
    ptx::st_volatile_vec(lamportSlot(a.base[t] + a.lamport_off, a.world, buf, a.rank) + sched::kLamportHeaderVec,
                         lamportHeader<T, Op>(a, call));
  }
  ptx::griddep_launch_dependents();

  // Reduce every slot in rank order as its data arrives; this rank's own input is read directly.
  Bits* recv = static_cast<Bits*>(a.recv);
  // Slot p of the current buffer is `current + p * slot_vecs`: one pointer for every peer.
  const uint4* current = lamportSlot(own, a.world, buf, 0);
  constexpr size_t slot_vecs = sched::kLamportSlotBytes / sizeof(uint4);
  for (size_t v = mine.begin + t; v < mine.end; v += kLamportThreads) {
    VecAcc<T, Op> acc;
    bool ok = true;
#pragma unroll
    for (int p = 0; p < kMaxRanks; ++p) {
      if (p >= a.world || !ok) continue;
      Vec<T> x;
      if (p == a.rank) {
        x = lamportInput<T>(a, v);
      } else {
        ok = lamportWait<T>(a, current + p * slot_vecs + v, p, &x.u);
      }
      if (p == 0) {
        acc.first(x);
      } else {
        acc.add(x);
      }
    }
    if (!ok) {
      markAbort(&sh);
      break;
    }
    const Vec<T> out = acc.result();
    if ((v + 1) * vec <= a.count) {
      storeUser<T>(recv + v * vec, out, a.aligned);
    } else {
      for (size_t i = 0; v * vec + i < a.count; ++i) recv[v * vec + i] = out.e[i];
    }
  }
  if (header_thread) {
    uint4 seen;
    const uint4 want = lamportHeader<T, Op>(a, call);
    if (!lamportWait<T>(a, lamportSlot(own, a.world, buf, t) + sched::kLamportHeaderVec, t, &seen)) {
      markAbort(&sh);
    } else if (seen.x != want.x || seen.y != want.y || seen.z != want.z || seen.w != want.w) {
      reportFailure(a, t, symmarInvalidUsage, kReasonCallMismatch);
      markAbort(&sh);
    }
  }
  __syncthreads();
  if (sh.abort) return;  // the comm has failed: nothing more is written, the rotation stops

  // Clear what the previous call left in the buffer it read (every peer's slot: data and header).
  const sched::Range clear = sched::splitRange(0, a.state->lamport_used[prev], static_cast<int>(gridDim.x),
                                               static_cast<int>(blockIdx.x), 1);
  uint4 empty;
  empty.x = empty.y = empty.z = empty.w = sched::kLamportEmpty;
  for (int p = 0; p < a.world; ++p) {
    if (p == a.rank) continue;
    uint4* slot = lamportSlot(own, a.world, prev, p);
    for (size_t v = clear.begin + t; v < clear.end; v += kLamportThreads) ptx::st_volatile_vec(slot + v, empty);
    if (blockIdx.x == 0 && t == 0) ptx::st_volatile_vec(slot + sched::kLamportHeaderVec, empty);
  }
  __syncthreads();
  if (t == 0) {
    __threadfence();
    const uint32_t done = atomicAdd(&a.state->lamport_done, 1u);
    if (done == gridDim.x - 1) {
      __threadfence();
      a.state->lamport_done = 0;
      a.state->lamport_used[buf] = static_cast<uint32_t>(nvec);
      a.state->lamport_calls = call + 1;
    }
  }
}

template <typename T, int Op>
struct Lamport {
  static const void* entry() { return reinterpret_cast<const void*>(&lamportAllReduce<T, Op>); }
};

}  // namespace

const void* lamportKernel(symmarDataType_t dtype, symmarRedOp_t op) { return kernelFor<Lamport>(dtype, op); }

}  // namespace gpu
}  // namespace symmar
