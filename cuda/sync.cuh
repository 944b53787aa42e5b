// Device synchronisation shared by the allreduce kernels and the fused one: bounded spins, per-block epoch
// barriers over the signal pads (push, then poll locally), the rank-level "call done" flag, and how
// a failed or absent peer is reported. The data path built on it (chunk geometry, copy and reduce
// loops) is cuda/common.cuh.
//
// Synchronisation contract (every rank runs the same sequence, so epochs agree):
//  - block b of rank r pushes epoch e and a 64-bit input offset (where r's input lives for the call)
//    into line (r, b, kSlotStart) of every peer's pad; block b waits until line (p, b, kSlotStart) of
//    its own pad reached e for every peer p.
//  - every chunk of a call splits its elements among blocks the same way (blockPart), so a staging
//    position is written and read by the same block index on every rank: per-block flags suffice.
//  - a call ends with a rank-level flag (kDoneBlock, kSlotEnd) pushed by the last block to finish;
//    the next call waits for every peer's flag first, which covers any change of partition between
//    calls (different counts, algorithms, grid sizes) without an end barrier on the critical path.
//    Grids vary with the message size but are equal on every rank for a call, and each block index
//    keeps its own epoch, so a block that sits out a call stays paired with the same block of peers.
#pragma once
#include <stdint.h>

#include "core/call.h"
#include "core/schedule.h"
#include "cuda/kernel_args.h"
#include "cuda/ptx.cuh"
#include "cuda/vec.cuh"

namespace symmar {
namespace gpu {

/// Declares the kernel's block-shared storage (one object per block). The emulator provides its
/// own definition of the macro (per-block storage of its launcher).
#if !defined(SYMMAR_BLOCK_SHARED)
#define SYMMAR_BLOCK_SHARED(Type, name) __shared__ Type name
#endif

struct BlockShared {
  uint64_t input_offset[kMaxRanks];  ///< every rank's input offset from the last start barrier
  uint64_t call_signature;           ///< KernelArgs::signature numbered by the calls done (blockBegin)
  uint32_t done_epoch;               ///< set in the last block: the done-flag value it published
  int abort;                         ///< a spin of this block timed out or a peer failed
  int failed_before;                 ///< the comm had failed before this kernel started
  int last;                          ///< this block was the last of the grid to finish
  /// The prologue's finding per peer (PeerState bits), each byte written by its peer's thread and
  /// read by every thread as one word.
  union {
    unsigned char byte[kMaxRanks];
    uint64_t word;
  } peer_state;
};
static_assert(kMaxRanks <= 8, "the prologue's peer states fit one 64-bit word");

/// This rank's pad, or rank r's pad as mapped here.
__device__ __forceinline__ char* padOf(const KernelArgs& a, int r) { return a.base[r] + a.pad_off; }

/// The line in `pad` where rank `from` publishes (block, slot).
__device__ __forceinline__ uint32_t* flagIn(char* pad, int from, int block, int slot) {
  return reinterpret_cast<uint32_t*>(pad + padFlagOffset(from, block, slot));
}

/// Kernel parameters stay in the constant bank: functions that take them by reference read them
/// there instead of every thread copying KernelArgs to local memory at entry (a stack frame the
/// build checks is 0 bytes). The emulator passes them by value.
#if defined(__CUDACC__)
#define SYMMAR_GRID_CONSTANT __grid_constant__
#else
#define SYMMAR_GRID_CONSTANT
#endif

__device__ __forceinline__ uint32_t* failedWord(char* pad, int from) {
  return reinterpret_cast<uint32_t*>(pad + padFailedOffset(from));
}

/// Several threads may give up at once: the block's abort flag is set atomically.
__device__ __forceinline__ void markAbort(BlockShared* sh) { atomicExch(&sh->abort, 1); }

/// Records a failure in the comm's status words for the host, and pushes this rank's failed word
/// into every pad (its own included). Both are sticky: every later kernel of this rank, and of every
/// peer, exits at entry; a peer spinning on this rank sees the word in its own pad and gives up.
/// The first failure of the comm claims the status words, so they describe one failure (several
/// threads of several blocks may give up at once). Inlined like everything else: a call would make
/// the values live across it go to the stack (the ABI's caller-saved registers), which the build
/// forbids (no spills, no stack frame).
__device__ __forceinline__ void reportFailure(const KernelArgs& a, int peer, int code, int reason) {
  if (atomicCAS(&a.state->reported, 0u, 1u) == 0u) {
    ptx::st_status(a.status + kStatusPeer, peer);
    ptx::st_status(a.status + kStatusBlock, static_cast<int>(blockIdx.x));
    ptx::st_status(a.status + kStatusReason, reason);
    __threadfence_system();
    ptx::st_status(a.status + kStatusCode, code);
    __threadfence_system();
  }
  for (int r = 0; r < a.world; ++r) ptx::st_release_sys(failedWord(padOf(a, r), a.rank), 1u);
}

/// Spins until ready() (a look at this rank's own memory) holds. Bounded: gives up after
/// timeout_ns (reporting it with timeout_reason), when `peer` has pushed its failed word here, or
/// as soon as another block of this comm has reported a failure. Every wait of every kernel goes
/// through it.
template <typename Ready>
__device__ __forceinline__ bool boundedSpin(const KernelArgs& a, int peer, Ready ready,
                                            int timeout_reason = kReasonTimeout) {
  const long long start = ptx::globaltimer();
  for (uint32_t n = 1;; ++n) {
    if (ready()) return true;
    if ((n & 63u) == 0) {
      if (ptx::ld_acquire_sys(failedWord(padOf(a, a.rank), peer)) != 0) {
        reportFailure(a, peer, symmarPeerFailure, kReasonPeerFailed);
        return false;
      }
      if (ptx::globaltimer() - start > a.timeout_ns) {
        reportFailure(a, peer, symmarTimeout, timeout_reason);
        return false;
      }
      if ((n & 8191u) == 0 && ptx::ld_volatile_u32(&a.state->reported) != 0) return false;
    }
  }
}

/// Spins on a flag in this rank's own pad until it reaches target (boundedSpin).
__device__ __forceinline__ bool spinUntil(const KernelArgs& a, const uint32_t* flag, uint32_t target, int peer) {
  return boundedSpin(a, peer, [&] { return sched::epochReached(ptx::ld_acquire_sys(flag), target); });
}

/// What a prologue's peer thread found in this rank's own pad (bits of a BlockShared::peer_state
/// byte; 0: ready). With kPeerFailedWord or kCommFailedBefore in the block, the kernel poisons its
/// outputs.
enum PeerState : unsigned {
  kPeerReady = 0,
  kPeerNotDone = 1,       ///< the peer's done flag of its previous call had not arrived yet
  kPeerFailedWord = 2,    ///< the peer's failed word was set: reported in prologueVerdict
  kCommFailedBefore = 4,  ///< the comm had failed before this kernel: nothing to report
};

/// The prologue's verdict once its block barrier has passed: the PeerState bits of every peer
/// together, or kCommFailedBefore (kPeerReady: the block may go on). A peer's failed word is
/// reported here, by that peer's thread. Every thread reads every peer's state as one word, so the
/// verdict needs no second block barrier.
__device__ __forceinline__ unsigned prologueVerdict(const KernelArgs& a, const BlockShared* sh) {
  if (sh->failed_before) return kCommFailedBefore;
  // Bytes of the peers only: this rank's own and those past the world were never written.
  const uint64_t world_bytes = a.world >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * a.world)) - 1;
  uint64_t v = sh->peer_state.word & world_bytes & ~(uint64_t{0xff} << (8 * a.rank));
  const int t = threadIdx.x;
  if (t < a.world && t != a.rank && ((v >> (8 * t)) & kPeerFailedWord)) {
    reportFailure(a, t, symmarPeerFailure, kReasonPeerFailed);
  }
  v |= v >> 32;
  v |= v >> 16;
  v |= v >> 8;
  return static_cast<unsigned>(v & 0xff);
}

/// Entry of every kernel, after the grid dependency (programmatic dependent launch: the kernel
/// that produced the input has finished). A comm that failed before (this rank's own record of a
/// failure, in device memory: no round trip to the host-mapped status words, or a failed word a
/// peer pushed into this rank's pad) makes the block exit here, before it touches a flag or a
/// peer's memory: a graph replay or a call queued before the host noticed never pairs with
/// abandoned data. True when the block may go on; one block barrier, after which the next kernel
/// on the stream may start its own prologue (it waits for this one's end before reading anything).
/// A block that gets false writes NaN over its share of the outputs (poisonShare), so that a
/// replayed graph shows the failure in its results instead of leaving the last good ones in place:
/// on a comm that failed before, every block fails here and the whole output becomes NaN.
__device__ __forceinline__ bool entryCheck(const KernelArgs& a, BlockShared* sh) {
  ptx::griddep_wait();
  const int t = threadIdx.x;
  if (t == 0) {
    sh->failed_before = ptx::ld_volatile_u32(&a.state->reported) != 0;
    sh->abort = 0;
  }
  if (t < a.world && t != a.rank) {
    sh->peer_state.byte[t] = ptx::ld_acquire_sys(failedWord(padOf(a, a.rank), t)) != 0 ? kPeerFailedWord : kPeerReady;
  }
  __syncthreads();
  ptx::griddep_launch_dependents();
  return prologueVerdict(a, sh) == kPeerReady;
}

/// This block's share of [0, n) elements of `out`, overwritten with `bits` (a grid-stride loop: the
/// blocks together cover every element). Local writes only: pairs with no peer.
template <typename Bits>
__device__ __forceinline__ void fillElements(void* out, size_t n, Bits bits) {
  if (!out) return;
  Bits* p = static_cast<Bits*>(out);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) p[i] = bits;
}

/// The outputs of a call on a failed comm: NaN in recv (and, for the fused call, in the norm and
/// FP8 outputs; 0x7f is E4M3's NaN).
template <typename T>
__device__ __forceinline__ void poisonOutputs(const KernelArgs& a) {
  fillElements<typename T::Bits>(a.recv, a.recv_count ? a.recv_count : a.count, T::kNaN);
  fillElements<typename T::Bits>(a.norm_out, a.count, T::kNaN);
  fillElements<unsigned char>(a.fp8_out, a.count, 0x7f);
}

/// Elements [begin, end) of an allreduce's outputs (recv, and the fused call's norm and FP8
/// outputs) overwritten with NaN by this block's threads. For a kernel whose blocks may write their
/// outputs after a failure (the lamport forms): a block that fails at entry poisons only the share
/// it would have written, never a part a sibling block that passed its entry is writing.
template <typename T>
__device__ __forceinline__ void poisonShare(const KernelArgs& a, size_t begin, size_t end) {
  using Bits = typename T::Bits;
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    static_cast<Bits*>(a.recv)[i] = T::kNaN;
    if (a.norm_out) static_cast<Bits*>(a.norm_out)[i] = T::kNaN;
    if (a.fp8_out) a.fp8_out[i] = 0x7f;
  }
}

/// Start of every barrier kernel, the entry check merged in: thread 0 reads the comm's failure
/// record and the call count while thread p < world reads peer p's failed word and done flag in this
/// rank's own pad; one block barrier, and the verdict. Every peer must have finished its previous
/// call (its done flag, pushed here: it has almost always arrived) before this call writes what the
/// peer may still read; where one has not, its thread waits for it and a second barrier follows.
/// Only this rank's own memory is read before the verdict: a comm that failed before still exits
/// here before it touches a peer (on a failed comm: NaN outputs). False when the block must exit.
/// A failing block poisons every output, not only its share: a barrier kernel's blocks write only
/// after a barrier with every peer passed, and stop at the first failed one, so a sibling writes
/// beside the poison only where a failure came between their barriers (a timeout mid-call); the
/// call fails either way.
template <typename T>
__device__ __forceinline__ bool blockBegin(const KernelArgs& a, BlockShared* sh, uint32_t* epoch) {
  ptx::griddep_wait();
  const int t = threadIdx.x;
  const uint32_t calls = a.state->end_epoch;
  if (t == 0) {
    sh->failed_before = ptx::ld_volatile_u32(&a.state->reported) != 0;
    sh->abort = 0;
    sh->call_signature = numberedSignature(a.signature, calls);
  }
  const bool peer_thread = t < a.world && t != a.rank;
  if (peer_thread) {
    // The failed word and the done flag are loaded together; the flag has almost always arrived.
    const bool failed = ptx::ld_acquire_sys(failedWord(padOf(a, a.rank), t)) != 0;
    const uint32_t* flag = flagIn(padOf(a, a.rank), t, kDoneBlock, sched::kSlotEnd);
    const bool done = sched::epochReached(ptx::ld_acquire_sys(flag), calls);
    sh->peer_state.byte[t] = failed ? kPeerFailedWord : done ? kPeerReady : kPeerNotDone;
  }
  __syncthreads();
  ptx::griddep_launch_dependents();  // the next kernel's prologue may start; its reads still wait for us
  const unsigned verdict = prologueVerdict(a, sh);
  if (verdict & (kPeerFailedWord | kCommFailedBefore)) {
    poisonOutputs<T>(a);
    return false;
  }
  *epoch = a.state->start_epoch[blockIdx.x];
  if (verdict == kPeerReady) return true;
  // A peer still finishes its previous call: wait for it (rare), then agree again.
  if (peer_thread && (sh->peer_state.byte[t] & kPeerNotDone) &&
      !spinUntil(a, flagIn(padOf(a, a.rank), t, kDoneBlock, sched::kSlotEnd), calls, t)) {
    markAbort(sh);
  }
  __syncthreads();
  return sh->abort == 0;
}

/// Start-slot barrier of this block: thread p pushes epoch, input offset and the call's numbered
/// signature into peer p's pad (after the block's writes: the barrier orders them before the
/// release), then waits on this rank's pad for peer p's. sh->input_offset[p] receives peer p's
/// input offset. A peer whose signature differs made another call (or its calls went out of step
/// with this rank's): the comm fails on both ranks (symmarInvalidUsage), where the call would
/// otherwise have paired with it. False on failure.
__device__ __forceinline__ bool blockBarrier(const KernelArgs& a, BlockShared* sh, uint32_t* epoch,
                                             uint64_t input_offset) {
  const uint32_t e = sched::nextEpoch(*epoch);
  *epoch = e;
  const int t = threadIdx.x;
  const int b = static_cast<int>(blockIdx.x);
  __syncthreads();
  if (t == a.rank) sh->input_offset[t] = input_offset;
  if (t < a.world && t != a.rank) {
    uint32_t* out = flagIn(padOf(a, t), a.rank, b, sched::kSlotStart);
    ptx::st_relaxed_sys_u64(reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(out) + sched::kFlagInputWord),
                            input_offset);
    ptx::st_relaxed_sys_u64(reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(out) + kFlagSignatureWord),
                            sh->call_signature);
    ptx::st_release_sys(out, e);
    const uint32_t* in = flagIn(padOf(a, a.rank), t, b, sched::kSlotStart);
    if (spinUntil(a, in, e, t)) {
      const uint64_t d = ptx::ld_relaxed_sys_u64(
          reinterpret_cast<const uint64_t*>(reinterpret_cast<const char*>(in) + sched::kFlagInputWord));
      sh->input_offset[t] = d;
      const uint64_t sig = ptx::ld_relaxed_sys_u64(
          reinterpret_cast<const uint64_t*>(reinterpret_cast<const char*>(in) + kFlagSignatureWord));
      // Another call fails the comm; so does an input offset outside the peer's user heap (an
      // offset into its mapping: this rank would read outside the mapping). One report for both
      // keeps one copy of its code in every kernel's barrier.
      const bool other_call = sig != sh->call_signature;
      if (other_call || (d != kStagedInput && (d - a.input_lo >= a.input_span || d % sched::kVecBytes != 0))) {
        reportFailure(a, t, other_call ? symmarInvalidUsage : symmarPeerFailure,
                      other_call ? kReasonCallMismatch : kReasonBadInputOffset);
        markAbort(sh);
      }
    } else {
      markAbort(sh);
    }
  }
  __syncthreads();
  return sh->abort == 0;
}

/// End of every kernel: saves the block's epoch; the last block pushes the rank's done flag to every
/// peer. With wait_peers the last block also waits for every peer's done flag (peers read this
/// rank's user buffer in place, which the caller may overwrite as soon as the kernel ends).
///
/// Before it does, the last block looks for a peer's failed word: a peer that gave up on this call
/// (a timeout while this rank was late) may have published its flags before it did, and its stream
/// may since have reused the input a block read in place. Such a call must fail here too, not raise
/// the done flag as if it had succeeded. The peer's failed word is stored before its kernel ends,
/// so before any reuse of its buffers, and the last block looks after every block's reads (each
/// came before that block's count). A grid of one block is its own last: no count, no fence.
__device__ __forceinline__ void blockEnd(const KernelArgs& a, BlockShared* sh, uint32_t epoch, bool wait_peers) {
  const int t = threadIdx.x;
  const bool alone = gridDim.x == 1;
  const bool peer_thread = t < a.world && t != a.rank;
  __syncthreads();  // every read of this block came before
  if (t == 0) {
    a.state->start_epoch[blockIdx.x] = epoch;
    bool last = alone;
    if (!alone) {
      __threadfence();
      const uint32_t prev = atomicAdd(&a.state->done_count, 1u);
      last = prev == gridDim.x - 1;
      if (last) {
        // Every other block's reads of peer memory happened before its fence and count; this fence
        // (GPU scope: the blocks share the GPU) orders them before the done flags pushed below, whose
        // system-scope release is cumulative over what this block observed.
        __threadfence();
        a.state->done_count = 0;
      }
    }
    if (last) {
      const uint32_t e = sched::nextEpoch(a.state->end_epoch);
      a.state->end_epoch = e;
      sh->done_epoch = e;
    }
    sh->last = last;
  }
  if (alone && peer_thread && ptx::ld_acquire_sys(failedWord(padOf(a, a.rank), t)) != 0) {
    reportFailure(a, t, symmarPeerFailure, kReasonPeerFailed);
    markAbort(sh);
  }
  __syncthreads();
  if (!sh->last) return;
  if (!alone) {
    if (peer_thread && ptx::ld_acquire_sys(failedWord(padOf(a, a.rank), t)) != 0) {
      reportFailure(a, t, symmarPeerFailure, kReasonPeerFailed);
      markAbort(sh);
    }
    __syncthreads();
  }
  if (sh->abort || !peer_thread) return;  // the comm has failed: every later kernel exits at entry
  ptx::st_release_sys(flagIn(padOf(a, t), a.rank, kDoneBlock, sched::kSlotEnd), sh->done_epoch);
  if (wait_peers) spinUntil(a, flagIn(padOf(a, a.rank), t, kDoneBlock, sched::kSlotEnd), sh->done_epoch, t);
}

}  // namespace gpu
}  // namespace symmar
