// The schedule every executor follows, written once for the CUDA kernels (nvcc) and the host
// executors (the host compiler): which rank owns which slice, per-block ranges, the vector body and
// scalar tail, chunking through the staging buffer, and barrier slot and epoch arithmetic.
// Unit-tested on the CPU (tests/unit/schedule_test.cc).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/hash.h"
#include "core/host_device.h"
#include "symmar/symmar.h"

namespace symmar {
namespace sched {

/// Most ranks one symmetric kernel serves (the tables cover world sizes 2..8); larger comms use
/// the fallback.
constexpr int kMaxRanks = 8;
/// Bytes moved by one vector access (uint4 on the GPU).
constexpr size_t kVecBytes = 16;
/// Distance between two signal flags: a flag never shares a cache line (or GPU sector group) with another.
constexpr size_t kFlagStride = 128;
/// Barrier slots per block: a start slot (inputs published) and an end slot (peers done reading).
constexpr int kBarrierSlots = 2;
constexpr int kSlotStart = 0;
constexpr int kSlotEnd = 1;
/// Most blocks a kernel launches per rank; sizes the signal pad.
constexpr int kMaxBlocks = 64;
/// Inside a flag's stride, after the 32-bit epoch: a 64-bit input offset (where the rank's
/// input for this step lives: an offset in its symmetric allocation, or kStagedInput for its staging
/// buffer). The host backend also publishes, per epoch parity, an input offset and a call signature
/// (count, dtype, op, algorithm): a peer can run at most one barrier ahead, so the words of epoch e
/// stay readable until every rank has arrived at e + 1.
constexpr size_t kFlagInputWord = 8;
constexpr uint64_t kStagedInput = ~0ull;
SYMMAR_HD size_t paritySlotOffset(uint32_t epoch, int word) {  // word 0: input offset, 1: signature
  return 16 + (static_cast<size_t>(word) * 2 + (epoch & 1u)) * 8;
}
/// Bytes of every (block, slot) flag.
constexpr size_t kFlagBytes = static_cast<size_t>(kMaxBlocks) * kBarrierSlots * kFlagStride;
/// Signal pad bytes per rank of the host backend (the GPU pad, which holds one flag per peer, is
/// laid out in cuda/kernel_args.h).
constexpr size_t kSignalPadBytes = kFlagBytes;

// ---- lamport: the barrier-free one-shot ----
// Each rank pushes its input into its slot of every peer's current buffer; a reader waits on the
// data itself. A slot holds the message (at most kLamportMaxBytes), room for a trailer vector after
// it (the host twin's completion mark), and in its last vector a header with the call's signature,
// at a place that does not depend on the count, so ranks whose calls differ see it. Three buffers
// rotate, so a rank can clear the buffer of its previous call while peers already write the next
// one (a peer runs at most one call ahead: it cannot finish a call without this rank's data for it).
constexpr size_t kLamportMaxBytes = SYMMAR_LAMPORT_MAX_BYTES;
constexpr int kLamportBuffers = 3;
/// "Not written yet": every 16-bit half -0.0 in half precision. For f16/bf16 inputs -0.0 is sent as
/// +0.0; for f32 the one word with this bit pattern (a negative denormal, -4.6e-41) is sent as -0.0.
constexpr uint32_t kLamportEmpty = 0x80008000u;
constexpr size_t kLamportSlotBytes = (kLamportMaxBytes + 2 * kVecBytes + 127) / 128 * 128;
/// Index of the header vector (the slot's last) in a slot.
constexpr size_t kLamportHeaderVec = kLamportSlotBytes / kVecBytes - 1;
/// The host twin's trailer in a slot holding a message of `bytes`: the 32-bit word where the vector
/// after the data begins. The message and its trailer fill the slot's first trailer + 4 words.
SYMMAR_HD size_t lamportTrailerWord(size_t bytes) { return (bytes + kVecBytes - 1) / kVecBytes * (kVecBytes / 4); }
SYMMAR_HD size_t lamportSlotOffset(int buffer, int from, int world) {
  return (static_cast<size_t>(buffer) * static_cast<size_t>(world) + static_cast<size_t>(from)) * kLamportSlotBytes;
}
/// Bytes of a rank's lamport area for a comm of world ranks.
SYMMAR_HD size_t lamportAreaBytes(int world) { return lamportSlotOffset(kLamportBuffers, 0, world); }
/// Word `word` (0..3) of a header or trailer carrying a numbered call signature (call.h:
/// numberedSignature): 15 bits of it in the low half of each word and 1 in the high half, so no
/// 16-bit half is ever the empty pattern. The call number is the same on every rank: on the host
/// backend the call's place in the comm's whole call sequence (barrier calls advance it too, so a
/// lamport call cannot pair with a peer's lamport call after the ranks' calls went apart); the GPU
/// kernels count their lamport calls.
SYMMAR_HD uint32_t lamportHeaderWord(uint64_t numbered_signature, int word) {
  return static_cast<uint32_t>((numbered_signature >> (15 * word)) & 0x7fffu) | 0x10000u;
}

/// Half-open element range [begin, end).
struct Range {
  size_t begin;
  size_t end;
  SYMMAR_HD size_t size() const { return end - begin; }
};

SYMMAR_HD size_t minSize(size_t a, size_t b) { return a < b ? a : b; }

/// Elements in one vector (elem_size is 2, 4 or 8).
SYMMAR_HD size_t vecElems(size_t elem_size) { return kVecBytes / elem_size; }

/// Splits [base, base+count) into parts of whole vectors (the last part keeps the partial vector),
/// balanced to within one vector. Every part begins at base + a multiple of vec elements.
SYMMAR_HD Range splitRange(size_t base, size_t count, int parts, int part, size_t vec) {
  size_t vecs = (count + vec - 1) / vec;
  size_t per = vecs / static_cast<size_t>(parts);
  size_t extra = vecs % static_cast<size_t>(parts);
  size_t p = static_cast<size_t>(part);
  size_t first = p * per + minSize(p, extra);
  size_t n = per + (p < extra ? 1 : 0);
  return Range{base + minSize(first * vec, count), base + minSize((first + n) * vec, count)};
}

/// The slice rank `rank` owns (reduces in two-shot, gathers from in the all-gather).
SYMMAR_HD Range rankSlice(size_t count, int world, int rank, size_t vec) {
  return splitRange(0, count, world, rank, vec);
}

/// The part of r that block `block` of `nblocks` handles; r.begin must be vector-aligned.
SYMMAR_HD Range blockRange(Range r, int block, int nblocks, size_t vec) {
  return splitRange(r.begin, r.size(), nblocks, block, vec);
}

/// End of the whole-vector body of r; [vecBodyEnd, r.end) is the scalar tail (< vec elements).
SYMMAR_HD size_t vecBodyEnd(Range r, size_t vec) { return r.begin + (r.size() / vec) * vec; }

/// The staging buffer is used as two halves (double buffering: one-shot alternates them, two-shot
/// keeps inputs in half 0 and reduced slices in half 1). Bytes of one half, vector-aligned.
SYMMAR_HD size_t stagingHalfBytes(size_t staging_bytes) { return staging_bytes / 2 / kVecBytes * kVecBytes; }
SYMMAR_HD size_t stagingHalfOffset(size_t staging_bytes, int half) {
  return static_cast<size_t>(half) * stagingHalfBytes(staging_bytes);
}

/// The staging ring of the host backend's allreduce (one-shot and two-shot), fused call,
/// reduce-scatter and staged all-gather. A call that writes at most `bytes` into each staging half,
/// from kStagingRingMinBytes to a quarter of the ring, writes slot `call` % slots of a ring over
/// the half's first kStagingRingBytes, not the half's start: a staging line then comes back to its
/// writer only after its readers have read the ring's other slots. A line a peer read a call ago is
/// still in that core's cache, and every store into it waits until the peer gives it up
/// (docs/performance.md). Slots are twice the call's bytes (slots as large as the call lost at 1-2
/// MiB). Returns the byte shift of the call's staging in each half (0 outside that range, or where
/// the half holds fewer than two slots); shift + bytes never passes the half. Peers agree on it
/// where they agree on the call's number and size, which their first barrier checks before anything
/// staged is read.
constexpr size_t kStagingRingMinBytes = 8 << 10;
constexpr size_t kStagingRingBytes = 4 << 20;
/// Bytes of one slot of the ring for a call that writes `bytes` into each half.
SYMMAR_HD size_t stagingRingSlot(size_t bytes) { return (2 * bytes + 4095) / 4096 * 4096; }
/// Slots of the ring for such a call: 0 where it stages at the half's start. `from`: the fewest
/// bytes that take the ring, kStagingRingMinBytes unless a collective measured its own.
SYMMAR_HD size_t stagingRingSlots(size_t bytes, size_t staging_bytes, size_t from = kStagingRingMinBytes) {
  const size_t span = minSize(stagingHalfBytes(staging_bytes), kStagingRingBytes);
  if (bytes < from || bytes > span / 4) return 0;
  const size_t slots = span / stagingRingSlot(bytes);
  return slots < 2 ? 0 : slots;
}
SYMMAR_HD size_t stagingRingShift(size_t bytes, size_t staging_bytes, uint32_t call,
                                  size_t from = kStagingRingMinBytes) {
  const size_t slots = stagingRingSlots(bytes, staging_bytes, from);
  return slots == 0 ? 0 : (call % slots) * stagingRingSlot(bytes);
}

/// Elements per chunk: as many as fit in one staging half, a multiple of world * vec so every
/// rank's slice of a full chunk is whole vectors. 0 means the staging buffer is too small.
SYMMAR_HD size_t chunkElems(size_t staging_bytes, size_t elem_size, int world) {
  size_t unit = vecElems(elem_size) * static_cast<size_t>(world);
  return stagingHalfBytes(staging_bytes) / elem_size / unit * unit;
}
SYMMAR_HD size_t numChunks(size_t count, size_t chunk_elems) {
  return count == 0 ? 0 : (count + chunk_elems - 1) / chunk_elems;
}
SYMMAR_HD Range chunkRange(size_t count, size_t chunk_elems, size_t chunk) {
  size_t begin = chunk * chunk_elems;
  return Range{minSize(begin, count), minSize(begin + chunk_elems, count)};
}

// ---- the fused allreduce + residual add + RMSNorm: chunks of whole rows ----
// A chunk is as many rows as fit in one staging half (a row is normalised as a whole). The one-shot
// form stages input rows back to back. The two-shot form stages input rows and publishes their sums
// in the other half, every row starting at a kVecBytes boundary, so that a row's sums are reduced
// with vector accesses whatever the hidden size.
/// Bytes of `bytes` data bytes rounded up to a kVecBytes boundary.
SYMMAR_HD size_t fusedPartBytes(size_t bytes) { return (bytes + kVecBytes - 1) / kVecBytes * kVecBytes; }
/// Staging bytes one row of hidden elements of elem bytes takes in a half.
SYMMAR_HD size_t fusedRowBytes(size_t hidden, size_t elem, bool two_shot) {
  const size_t row = hidden * elem;
  return two_shot ? fusedPartBytes(row) : row;
}
/// Staging bytes one row takes in a half of the host backend's fused two-shot, which publishes the
/// rows it finishes as [residual | norm | fp8], each part 16-byte aligned (the host's row kernels
/// store vectors into the parts, and an odd hidden size must not misalign the parts after the
/// first). On CPUs finishing a row costs more than copying it, so the owner finishes it once.
SYMMAR_HD size_t hostFusedPublishedRowBytes(size_t hidden, size_t elem, bool fp8) {
  return 2 * fusedPartBytes(hidden * elem) + (fp8 ? fusedPartBytes(hidden) : 0);
}
/// Rows per chunk of the fused form: whole rows in one staging half; 0 when a row does not fit or
/// is empty.
SYMMAR_HD size_t fusedRowsPerChunk(size_t staging_bytes, size_t hidden, size_t elem, bool two_shot) {
  const size_t row = fusedRowBytes(hidden, elem, two_shot);
  return row == 0 ? 0 : stagingHalfBytes(staging_bytes) / row;
}

/// Whether the fused call's lamport form can serve tokens rows of hidden elements of elem bytes:
/// rows of whole vectors (a block pushes and finishes whole rows) and the call in one slot.
SYMMAR_HD bool lamportFusedFits(size_t tokens, size_t hidden, size_t elem) {
  const size_t row = hidden * elem;
  return row != 0 && row % kVecBytes == 0 && tokens <= kLamportMaxBytes / row;
}

/// Byte offset of the flag of (block, slot) inside a rank's signal pad.
SYMMAR_HD size_t flagOffset(int block, int slot) {
  return (static_cast<size_t>(block) * kBarrierSlots + static_cast<size_t>(slot)) * kFlagStride;
}

/// Barrier epochs are 32-bit and wrap; each barrier advances the epoch by one.
SYMMAR_HD uint32_t nextEpoch(uint32_t epoch) { return epoch + 1u; }
/// True when a flag holding `seen` has reached `target`, across wrap (ranks are never 2^31 apart).
SYMMAR_HD bool epochReached(uint32_t seen, uint32_t target) { return static_cast<int32_t>(seen - target) >= 0; }

}  // namespace sched
}  // namespace symmar
