// Lamport building blocks shared by the plain lamport allreduce (lamport.cu) and its fused form
// with the residual add + RMSNorm (lamport_add_rms_norm.cu): the data carries its own "arrived"
// mark (kLamportEmpty, -0.0 in every 16-bit half, means "not written yet"), a header vector at the
// end of a slot carries the call's signature, and three buffers rotate (see lamport.cu).
#pragma once
#include <stdint.h>

#include "core/call.h"
#include "cuda/common.cuh"

namespace symmar {
namespace gpu {

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

/// Where this call's lamport traffic goes: its number (wrapping, compared for equality only), the
/// buffer it writes and the one its previous call read (cleared by this call).
struct LamportCall {
  uint32_t number;
  int buf, prev;
};
__device__ __forceinline__ LamportCall lamportCall(const KernelArgs& a) {
  const int buf = static_cast<int>(a.state->lamport_buf);
  return LamportCall{a.state->lamport_calls, buf, (buf + sched::kLamportBuffers - 1) % sched::kLamportBuffers};
}

/// Pushes vector v of this rank's input into its slot of every peer's current buffer. Loops over
/// ranks run to kMaxRanks with constant indices: a.base[p] then stays in the parameter space.
template <typename T>
__device__ __forceinline__ void lamportPush(const KernelArgs& a, int buf, size_t v) {
  const Vec<T> x = lamportInput<T>(a, v);
#pragma unroll
  for (int p = 0; p < kMaxRanks; ++p) {
    if (p < a.world && p != a.rank) ptx::st_volatile_vec(lamportSlot(a.base[p] + a.lamport_off, a.world, buf, a.rank) + v, x.u);
  }
}

/// Whether this thread carries the header to peer t (block 0, one thread per peer).
__device__ __forceinline__ bool lamportHeaderThread(const KernelArgs& a) {
  return blockIdx.x == 0 && static_cast<int>(threadIdx.x) < a.world && static_cast<int>(threadIdx.x) != a.rank;
}

/// Block 0 pushes the call's header to every peer (after its data: a reader checks it last).
template <typename T>
__device__ __forceinline__ void lamportPushHeader(const KernelArgs& a, const LamportCall& c) {
  const int t = threadIdx.x;
  if (lamportHeaderThread(a)) {
    ptx::st_volatile_vec(lamportSlot(a.base[t] + a.lamport_off, a.world, c.buf, a.rank) + sched::kLamportHeaderVec,
                         lamportHeader<T>(a, c.number));
  }
}

/// Every slot of the current buffer here: vector v of peer p at current + p * slot_vecs + v.
__device__ __forceinline__ const uint4* lamportCurrent(const KernelArgs& a, const LamportCall& c) {
  return lamportSlot(a.base[a.rank] + a.lamport_off, a.world, c.buf, 0);
}

/// Vector v of the call's result: every rank's vector summed in rank order (this rank's own input
/// read directly, chosen by value: x stays in registers), in *acc. With `wait`, waits (bounded) for
/// the peers' vectors and returns false when a wait gave up (the call has failed: *acc then holds
/// what had arrived); without, sums what is there (after a failure, to keep the block together).
template <typename T, int Op>
__device__ __forceinline__ bool lamportReduce(const KernelArgs& a, const uint4* current, uint32_t peers, size_t v,
                                              bool wait, VecAcc<T, Op>* acc) {
  Vec<T> x[kMaxRanks];
  bool ok = true;
  const uint32_t missing = lamportLoad<T>(current, v, peers, x);
  if (missing != 0 && wait) {  // rare: wait, then load every peer's vector again (each has arrived)
    ok = lamportAwait<T>(a, current, v, missing);
    if (ok) lamportLoad<T>(current, v, peers, x);
  }
  const Vec<T> own_x = lamportInput<T>(a, v);
  acc->first(pickVec(a.rank == 0, own_x, x[0]));
#pragma unroll
  for (int p = 1; p < kMaxRanks; ++p) {
    if (p < a.world) acc->add(pickVec(a.rank == p, own_x, x[p]));
  }
  return ok;
}

/// The peers of this rank, a bit each.
__device__ __forceinline__ uint32_t lamportPeers(const KernelArgs& a) {
  uint32_t peers = 0;
  for (int p = 0; p < a.world; ++p) peers |= p == a.rank ? 0u : 1u << p;
  return peers;
}

/// The end of every lamport call, every block: block 0 checks each peer's header (a peer whose call
/// differs fails the call), and every block checks the peers' failed words (a peer that gave up on
/// this call may have pushed its data before it did: the values are whole, but no rank may succeed
/// on a call a peer failed). Then, unless the call failed, the block clears its share of what the
/// previous call left in the buffer it read, and the last block advances the rotation. `nvec`:
/// the data vectors this call wrote into each slot.
template <typename T>
__device__ __forceinline__ void lamportFinish(const KernelArgs& a, BlockShared* sh, const LamportCall& c, size_t nvec) {
  const int t = threadIdx.x;
  char* own = a.base[a.rank] + a.lamport_off;
  if (lamportHeaderThread(a)) {
    uint4 seen;
    const uint4 want = lamportHeader<T>(a, c.number);
    if (!lamportWait<T>(a, lamportSlot(own, a.world, c.buf, t) + sched::kLamportHeaderVec, t, &seen)) {
      markAbort(sh);
    } else if (seen.x != want.x || seen.y != want.y || seen.z != want.z || seen.w != want.w) {
      reportFailure(a, t, symmarInvalidUsage, kReasonCallMismatch);
      markAbort(sh);
    }
  }
  if (t < a.world && t != a.rank && ptx::ld_acquire_sys(failedWord(padOf(a, a.rank), t)) != 0) {
    reportFailure(a, t, symmarPeerFailure, kReasonPeerFailed);
    markAbort(sh);
  }
  __syncthreads();
  if (sh->abort) return;  // the comm has failed: nothing more is written, the rotation stops

  // Clear what the previous call left in the buffer it read (every peer's slot: data and header).
  const sched::Range clear = sched::splitRange(0, a.state->lamport_used[c.prev], static_cast<int>(gridDim.x),
                                               static_cast<int>(blockIdx.x), 1);
  uint4 empty;
  empty.x = empty.y = empty.z = empty.w = sched::kLamportEmpty;
  for (int p = 0; p < a.world; ++p) {
    if (p == a.rank) continue;
    uint4* slot = lamportSlot(own, a.world, c.prev, p);
    for (size_t v = clear.begin + t; v < clear.end; v += blockDim.x) ptx::st_volatile_vec(slot + v, empty);
    if (blockIdx.x == 0 && t == 0) ptx::st_volatile_vec(slot + sched::kLamportHeaderVec, empty);
  }
  __syncthreads();
  if (t == 0) {
    __threadfence();
    const uint32_t done = atomicAdd(&a.state->lamport_done, 1u);
    if (done == gridDim.x - 1) {
      __threadfence();
      a.state->lamport_done = 0;
      a.state->lamport_used[c.buf] = static_cast<uint32_t>(nvec);
      a.state->lamport_buf = static_cast<uint32_t>((c.buf + 1) % sched::kLamportBuffers);
      a.state->lamport_calls = c.number + 1;
    }
  }
}

}  // namespace gpu
}  // namespace symmar
