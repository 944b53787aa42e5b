// What the host passes to every allreduce kernel, and the kernel lookup the host launches through.
// Plain C++ (no device code) so src/gpu can include it without nvcc.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/schedule.h"
#include "symmar/symmar.h"

namespace symmar {
namespace gpu {

// The schedule's own constants, visible unqualified in the kernels.
using sched::kMaxRanks;
using sched::kStagedInput;
/// Threads per block of every allreduce kernel (launch bounds use it too). Every loop strides by
/// it, so the kernel emulator may run smaller blocks (at least kMaxRanks threads: one per peer).
#if defined(SYMMAR_EMU_THREADS)
constexpr int kThreads = SYMMAR_EMU_THREADS;
#else
constexpr int kThreads = 512;
#endif
static_assert(kThreads >= kMaxRanks, "the barriers use one thread per peer");
/// Threads per block of the lamport kernel: its read loop keeps every peer's vector in flight, so
/// it runs half the threads with twice the registers each (no spills at 8 ranks).
constexpr int kLamportThreads = kThreads / 2;
static_assert(kLamportThreads >= kMaxRanks, "lamport uses one thread per peer for the trailers");
/// Rank-level "call done" flag: block 0's end slot (the other end slots are unused). One flag per
/// rank, raised by the last block of a call, lets the next call wait for every peer block at once.
constexpr int kDoneBlock = 0;

// The GPU signal pad (push model). A rank signals by a release store into the line reserved for it
// in every peer's pad, and waits with acquire loads on its own pad: every spin reads local memory,
// never a peer's across NVLink or PCIe. Layout of each rank's pad:
//   [flag lines: (source rank, block, slot)] [failed words: one per source rank] [probe words]
/// Bytes of the flag lines: kMaxRanks x kMaxBlocks x kBarrierSlots lines of kFlagStride bytes.
constexpr size_t kPadFlagBytes =
    static_cast<size_t>(kMaxRanks) * sched::kMaxBlocks * sched::kBarrierSlots * sched::kFlagStride;
/// The line, in the receiver's pad, where rank `from` publishes (block, slot).
SYMMAR_HD size_t padFlagOffset(int from, int block, int slot) {
  return ((static_cast<size_t>(from) * sched::kMaxBlocks + static_cast<size_t>(block)) * sched::kBarrierSlots +
          static_cast<size_t>(slot)) *
         sched::kFlagStride;
}
/// Word `from` of this line is non-zero once rank `from` failed (sticky; pushed to every peer).
SYMMAR_HD size_t padFailedOffset(int from) { return kPadFlagBytes + static_cast<size_t>(from) * sizeof(uint32_t); }
/// Word `from` of this line: the last co-scheduling probe round rank `from` reached.
SYMMAR_HD size_t padProbeOffset(int from) {
  return kPadFlagBytes + sched::kFlagStride + static_cast<size_t>(from) * sizeof(uint32_t);
}
/// Word `from` of this line: rank `from` finished writing its peer-access probe patterns here.
SYMMAR_HD size_t padP2pOffset(int from) {
  return kPadFlagBytes + 2 * sched::kFlagStride + static_cast<size_t>(from) * sizeof(uint32_t);
}
/// Bytes of a rank's GPU signal pad.
constexpr size_t kPadBytes = kPadFlagBytes + 3 * sched::kFlagStride;
/// In a start-slot flag line, after the epoch and the input offset (sched::kFlagInputWord): the
/// call's signature numbered by the rank's calls done (KernelArgs::signature, DeviceState::
/// end_epoch), so peers whose calls differ, or went out of step, never pass a barrier together.
constexpr size_t kFlagSignatureWord = 16;
static_assert(kFlagSignatureWord >= sched::kFlagInputWord + 8 && kFlagSignatureWord + 8 <= sched::kFlagStride,
              "the signature has a word of its own in the line");

/// Peer-access probe: bytes of each pattern region in the staging buffer (region 0: the rank's own
/// pattern, which peers load; region 1 + r: the pattern rank r stores here). 9 regions fit the
/// smallest GPU staging buffer (64 KiB).
constexpr size_t kP2pProbeBytes = 2048;
/// Per-peer outcomes of the peer-access probe besides a count of wrong words.
constexpr long long kP2pTimedOut = -1;  ///< the peer's "written" flag never arrived
constexpr long long kP2pTooSlow = -2;   ///< the checks passed but took longer than rest_ns
static_assert(kMaxRanks * sizeof(uint32_t) <= sched::kFlagStride, "one line holds every rank's word");

/// Bytes of message one block serves: a call launches one block per this many bytes of a chunk,
/// up to the comm's co-residency cap (the same count on every rank: it depends on the call only).
constexpr size_t kBytesPerBlock = size_t{32} << 10;
/// Small calls spread wider: a call launches at least one block per kSpreadBytesPerBlock of its
/// chunk, up to kSpreadBlocks, so a decode-size call (16 KiB) reads its peers' data through 4 SMs
/// instead of one, whose load throughput over NVLink would bound it; from 256 KiB kBytesPerBlock
/// gives as many blocks anyway.
constexpr size_t kSpreadBytesPerBlock = size_t{4} << 10;
constexpr size_t kSpreadBlocks = 8;
/// The same for lamport: one 16-byte vector per thread, so a decode-size message (a token of a
/// few thousand bf16) is spread over several multiprocessors instead of queued on one.
constexpr size_t kLamportBytesPerBlock = static_cast<size_t>(kLamportThreads) * sched::kVecBytes;

/// Rows whose statistics a fused kernel's block keeps at once: a block that finishes several rows
/// sums them all, then passes one block barrier for all their statistics, then normalises them all.
constexpr int kRowBatch = 8;
/// The most blocks one row of the fused call is spread over (KernelArgs::row_parts).
constexpr int kMaxRowParts = 8;

/// Per-comm device memory (never shared): epochs advanced by the kernels, so graph replays work.
struct DeviceState {
  uint32_t start_epoch[sched::kMaxBlocks];  ///< per block: last start-slot epoch published
  uint32_t end_epoch;                       ///< calls completed (rank-level done flag value)
  uint32_t done_count;                      ///< blocks of the running call that finished
  uint32_t reported;                        ///< non-zero once a block claimed the status words
  uint32_t lamport_calls;  ///< lamport calls completed, wrapping: the call number its header carries
  /// The lamport buffer the next call writes (0..kLamportBuffers-1), advanced mod kLamportBuffers.
  /// Kept apart from lamport_calls: 2^32 is no multiple of 3, so `calls % 3` would reuse a buffer
  /// at the wrap.
  uint32_t lamport_buf;
  uint32_t lamport_done;  ///< blocks of the running lamport call that finished
  uint32_t lamport_used[sched::kLamportBuffers];  ///< vectors per slot the last call of each buffer wrote
  /// The fused call with a row spread over several blocks (KernelArgs::row_parts): the arrival word
  /// of each group's barrier, at the group's first block. Each barrier adds 2^31 in all (the low 31
  /// bits are 0 between barriers, whatever blocks used the word before), so its top bit flips once
  /// every block of the group has arrived.
  uint32_t row_sync[sched::kMaxBlocks];
  /// Each block's sum of squares of its part of each row of a batch, in two sets that successive
  /// group barriers use in turn (a block that passed a barrier writes the other set while a sibling
  /// may still read this one; it can reach the set again only after that sibling's next arrival).
  float row_part[2][sched::kMaxBlocks][kRowBatch];
};

/// The status words in mapped host memory, by index. A non-zero code (symmarTimeout or
/// symmarPeerFailure) is sticky: every later kernel of the comm exits at entry, before it touches a
/// flag or the user's buffers. The code is written last, so the other words are valid once it is.
enum StatusWord : int {
  kStatusCode = 0,
  kStatusPeer = 1,    ///< the peer the failure names (the context's rank)
  kStatusBlock = 2,   ///< the block that gave up
  kStatusReason = 3,  ///< a FailureReason
  kStatusWords = 4,
};
enum FailureReason : int {
  kReasonTimeout = 1,         ///< a spin on the status peer passed the timeout
  kReasonBadInputOffset = 2,  ///< the status peer published an input offset outside its heap
  kReasonPeerFailed = 3,      ///< the status peer had already failed (its failed word was set)
  kReasonCallMismatch = 4,    ///< the status peer's call had another signature or place in the order
  kReasonRowGroupTimeout = 5,  ///< a block waited past the timeout for its row group's other blocks
                               ///< (this rank's own: the status peer is this rank)
};

struct KernelArgs {
  const void* send;  ///< user input (this rank's pointer)
  void* recv;        ///< user output
  size_t count;      ///< elements (reduce-scatter and all-gather: of one rank's block)
  size_t recv_count;  ///< elements of recv where it is not count (an all-gather's world x count), else 0
  int rank;
  int world;
  char* base[kMaxRanks];  ///< every rank's symmetric allocation, mapped in this process
  char* mc_base;          ///< multicast mapping of the staging buffer (multimem only)
  size_t pad_off;         ///< offset of the signal pad in an allocation
  size_t staging_off;     ///< offset of the staging buffer in an allocation
  size_t lamport_off;     ///< offset of the lamport buffers in an allocation
  size_t staging_bytes;
  size_t chunk_elems;    ///< sched::chunkElems for this dtype and world
  uint64_t send_offset;  ///< offset of send in own allocation when peers may read it in place; else kStagedInput
  uint64_t input_lo;     ///< a peer's input offset other than kStagedInput must lie in
  uint64_t input_span;   ///< [input_lo, input_lo + input_span) (its user heap less this call's bytes)
  int aligned;           ///< send and recv are 16-byte aligned (vector user accesses)
  DeviceState* state;
  volatile int* status;      ///< device view of the mapped host status words
  long long timeout_ns;      ///< bound of every spin, in %globaltimer nanoseconds
  /// The call as peers compare it (core/call.h's callSignature of the allreduce, reduce-scatter or
  /// all-gather, or fused call), published with every start barrier; never 0.
  uint64_t signature;
  // The fused allreduce + residual add + RMSNorm (send = input, recv = residual_out, count =
  // tokens x hidden); unused by the plain allreduce kernels.
  const void* residual_in;  ///< or nullptr
  void* norm_out;
  const void* gamma;
  unsigned char* fp8_out;   ///< or nullptr
  float fp8_scale;
  float eps;
  size_t hidden;
  /// Blocks each row is spread over (a group: row r of a chunk goes to group r % (grid / row_parts),
  /// its vectors split among the group's blocks in order); 0 or 1: a block a row. More than 1 only
  /// for rows of whole vectors, with grid = tokens x row_parts.
  int row_parts;
};

/// What the probe kernels (one block each) are given. Co-scheduling probe: `rounds` barrier rounds
/// with every peer through the probe words of the pads; the first round may wait up to first_ns
/// (launch skew), the rest together at most rest_ns; result[0]: 1 when every round met in time,
/// result[1]: nanoseconds the rounds after the first took. Peer-access probe: patterns derived from
/// seed stored into and loaded from every peer's staging; result[0]: 1 when every peer checked out,
/// result[1]: nanoseconds of the checks, result[2 + p]: peer p's outcome (0, wrong words,
/// kP2pTimedOut or kP2pTooSlow).
struct ProbeArgs {
  int rank;
  int world;
  char* base[kMaxRanks];
  size_t pad_off;  ///< where the signal pad starts in every rank's allocation
  int rounds;
  long long first_ns;
  long long rest_ns;
  uint32_t seed;
  size_t staging_off;
  long long* result;  ///< 2 + kMaxRanks words
};
constexpr int kProbeResultWords = 2 + kMaxRanks;
/// Kernel entry points (for cudaLaunchKernel / occupancy queries); nullptr for unsupported
/// combinations (other dtypes, f32 min/max on multimem).
const void* coScheduleProbeKernel();
const void* peerAccessProbeKernel();

const void* oneShotKernel(symmarDataType_t dtype, symmarRedOp_t op);
const void* twoShotKernel(symmarDataType_t dtype, symmarRedOp_t op);
const void* multimemKernel(symmarDataType_t dtype, symmarRedOp_t op);
const void* lamportKernel(symmarDataType_t dtype, symmarRedOp_t op);
/// Reduce-scatter (f32/f16/bf16, every op) and all-gather (by element size: 2 or 4 bytes; wider
/// elements move as several 4-byte ones) in the one-shot pattern.
const void* reduceScatterKernel(symmarDataType_t dtype, symmarRedOp_t op);
const void* allGatherKernel(size_t elem_bytes);
/// The same through the NVSwitch (multimem.ld_reduce, multimem.st): the reductions PTX has (no f32
/// max/min), the copies by element size as above.
const void* multimemReduceScatterKernel(symmarDataType_t dtype, symmarRedOp_t op);
const void* multimemAllGatherKernel(size_t elem_bytes);
/// The fused allreduce + residual add + RMSNorm kernels (sum only), one-shot or two-shot form.
const void* addRmsNormKernel(symmarDataType_t dtype, bool two_shot);
/// The same in the lamport pattern (no barrier; rows of whole vectors, at most kLamportMaxBytes),
/// kLamportThreads a block.
const void* lamportAddRmsNormKernel(symmarDataType_t dtype);
/// The add and norm alone on one rank, after an allreduce of the call into a.send (the unfused
/// call); no peer, no barrier.
const void* addRmsNormRowsKernel(symmarDataType_t dtype);

}  // namespace gpu
}  // namespace symmar
