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

#include "core/call.h"
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

/// Loads peer p's vector v of the current buffer for every p in `peers` (a bit per rank), all in
/// flight at once rather than one round trip after another; returns the peers whose vector has not
/// arrived yet. Unrolled over kMaxRanks: x is indexed by constants only and stays in registers.
template <typename T>
__device__ __forceinline__ uint32_t lamportLoad(const uint4* current, size_t v, uint32_t peers, Vec<T>* x) {
  constexpr size_t slot_vecs = sched::kLamportSlotBytes / sizeof(uint4);
  uint32_t missing = 0;
#pragma unroll
  for (int p = 0; p < kMaxRanks; ++p) {
    if (peers & (1u << p)) {
      x[p].u = ptx::ld_volatile_vec(current + p * slot_vecs + v);
      if (!lamportArrived<T>(x[p].u)) missing |= 1u << p;
    }
  }
  return missing;
}

/// Spins (bounded) until every peer in `missing` has vector v here, watching the failed word of
/// the lowest peer still missing. Keeps no vector: the caller loads them again once all are in.
template <typename T>
__device__ __forceinline__ bool lamportAwait(const KernelArgs& a, const uint4* current, size_t v, uint32_t missing) {
  constexpr size_t slot_vecs = sched::kLamportSlotBytes / sizeof(uint4);
  while (missing != 0) {
    const int peer = __ffs(static_cast<int>(missing)) - 1;
    const bool ok = boundedSpin(a, peer, [&] {
#pragma unroll
      for (int p = 0; p < kMaxRanks; ++p) {
        if ((missing & (1u << p)) && lamportArrived<T>(ptx::ld_volatile_vec(current + p * slot_vecs + v))) {
          missing &= ~(1u << p);
        }
      }
      return (missing & (1u << peer)) == 0;
    });
    if (!ok) return false;
  }
  return true;
}

/// c ? a : b, lane by lane.
template <typename T>
__device__ __forceinline__ Vec<T> pickVec(bool c, const Vec<T>& a, const Vec<T>& b) {
  Vec<T> r;
  r.u.x = c ? a.u.x : b.u.x;
  r.u.y = c ? a.u.y : b.u.y;
  r.u.z = c ? a.u.z : b.u.z;
  r.u.w = c ? a.u.w : b.u.w;
  return r;
}

/// Waits for one vector (a peer's header) at p; *out receives it.
template <typename T>
__device__ __forceinline__ bool lamportWait(const KernelArgs& a, const uint4* p, int peer, uint4* out) {
  *out = ptx::ld_volatile_vec(p);
  return lamportArrived<T>(*out) || boundedSpin(a, peer, [&] {
    *out = ptx::ld_volatile_vec(p);
    return lamportArrived<T>(*out);
  });
}

/// The header of this call: the call's signature as the host gives it (a plain allreduce's, or the
/// fused call's where this allreduce is its first step), numbered by the lamport calls done, as 16
/// bytes no lane of which is empty.
template <typename T>
__device__ __forceinline__ uint4 lamportHeader(const KernelArgs& a, uint32_t call) {
  const uint64_t sig = numberedSignature(a.signature, call);
  uint4 u;
  u.x = sched::lamportHeaderWord(sig, 0);
  u.y = sched::lamportHeaderWord(sig, 1);
  u.z = sched::lamportHeaderWord(sig, 2);
  u.w = sched::lamportHeaderWord(sig, 3);
  return u;
}

template <typename T, int Op>
__global__ void __launch_bounds__(kLamportThreads, 1) lamportAllReduce(const SYMMAR_GRID_CONSTANT KernelArgs a) {
  using Bits = typename T::Bits;
  constexpr size_t vec = Vec<T>::kElems;
  SYMMAR_BLOCK_SHARED(BlockShared, sh);
  if (!entryCheck(a, &sh)) {
    poisonOutputs<T>(a);
    return;
  }
  const int t = threadIdx.x;
  const uint32_t call = a.state->lamport_calls;  // wraps: only compared for equality (the header)
  const int buf = static_cast<int>(a.state->lamport_buf);
  const int prev = (buf + sched::kLamportBuffers - 1) % sched::kLamportBuffers;
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
                         lamportHeader<T>(a, call));
  }

  // Reduce every slot in rank order once every peer's vector has arrived; this rank's own input is
  // read directly.
  Bits* recv = static_cast<Bits*>(a.recv);
  const uint4* current = lamportSlot(own, a.world, buf, 0);  // slot p: current + p * slot_vecs
  uint32_t peers = 0;
  for (int p = 0; p < a.world; ++p) peers |= p == a.rank ? 0u : 1u << p;
  for (size_t v = mine.begin + t; v < mine.end; v += kLamportThreads) {
    Vec<T> x[kMaxRanks];
    const uint32_t missing = lamportLoad<T>(current, v, peers, x);
    if (missing != 0) {  // rare: wait, then load every peer's vector again (each has arrived)
      if (!lamportAwait<T>(a, current, v, missing)) {
        markAbort(&sh);
        break;
      }
      lamportLoad<T>(current, v, peers, x);
    }
    // Constant indices only (the unrolled loops), and this rank's input chosen by value (a select,
    // not x[a.rank]): x and out stay in registers.
    const Vec<T> own_x = lamportInput<T>(a, v);
    VecAcc<T, Op> acc;
    acc.first(pickVec(a.rank == 0, own_x, x[0]));
#pragma unroll
    for (int p = 1; p < kMaxRanks; ++p) {
      if (p < a.world) acc.add(pickVec(a.rank == p, own_x, x[p]));
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
  if (header_thread) {
    uint4 seen;
    const uint4 want = lamportHeader<T>(a, call);
    if (!lamportWait<T>(a, lamportSlot(own, a.world, buf, t) + sched::kLamportHeaderVec, t, &seen)) {
      markAbort(&sh);
    } else if (seen.x != want.x || seen.y != want.y || seen.z != want.z || seen.w != want.w) {
      reportFailure(a, t, symmarInvalidUsage, kReasonCallMismatch);
      markAbort(&sh);
    }
  }
  // A peer that gave up on this call (this rank was late) may have pushed its data before it did:
  // the values are whole, but no rank may succeed on a call a peer failed.
  if (t < a.world && t != a.rank && ptx::ld_acquire_sys(failedWord(padOf(a, a.rank), t)) != 0) {
    reportFailure(a, t, symmarPeerFailure, kReasonPeerFailed);
    markAbort(&sh);
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
      a.state->lamport_buf = static_cast<uint32_t>((buf + 1) % sched::kLamportBuffers);
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
