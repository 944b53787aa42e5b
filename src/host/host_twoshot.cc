// Two-shot on the host: reduce-scatter (each rank reduces the slice it owns, reading that slice
// from every rank's staging, and publishes the result), then all-gather (each rank copies every
// owner's reduced slice). Each element is reduced once, by its owner, so all ranks get the same bits.
// Inputs go to the half peers are not reading (or stay in place when they are symmetric); reduced
// slices go to the other half, written only after the start barrier, when every peer has finished
// the previous step. From 8 KiB to 1 MiB a call stages at its slot of the staging ring
// (sched::stagingRingShift) where the comm agreed to use it, so that it does not write lines a
// peer read the call before. A rank with worker threads (SYMMAR_HOST_THREADS) splits each step's
// copies and its reduction among them; the barriers stay on the calling thread.
#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "host/host_backend.h"
#include "host/host_reduce.h"
#include "host/simd_reduce.h"

namespace symmar {

symmarResult_t HostBackend::runTwoShot(const Call& c) {
  const size_t chunk = chunkElems(c.elem);
  if (chunk == 0) return fail(symmarInvalidArgument, "staging buffer of %zu bytes is too small", heap_->stagingBytes());
  const size_t vec = sched::vecElems(c.elem);
  // A send buffer from symmarMemAlloc is read by peers in place (no copy into staging): they read
  // only their own slices of it, all before the end barrier, so neither in-place output nor the
  // caller's next write can race with them.
  const uint64_t input_offset = symmetricOffset(c.send, c.count * c.elem);
  const size_t staged_bytes = std::min(c.count, chunk) * c.elem;
  const size_t shift = stagingShift(staged_bytes);
  const auto staging = [&](int p, int half) { return heap_->staging(p, half) + shift; };
  // Outside the ring the slice is published into lines the peers read the call before.
  const auto reduce = stagesInRing(staged_bytes) ? reduceRanks : reduceRanksPublishingToReadLines;
  for (size_t k = 0; k < sched::numChunks(c.count, chunk); ++k) {
    const sched::Range r = sched::chunkRange(c.count, chunk, k);
    const int in_half = takeWriteHalf();
    const int out_half = in_half ^ 1;
    // Peers need every slice of this rank's input but the one it owns itself, which it reads
    // straight from its own buffer: publish the rest.
    const sched::Range mine = sched::rankSlice(r.size(), world_, rank_, vec);
    const size_t off = mine.begin * c.elem;
    const char* src = c.send + r.begin * c.elem;
    // Staging writes stream where plain ones were slow lately (staging_writes.h).
    const size_t staged_write = (r.size() - mine.size()) * c.elem;
    const bool stream = staging_writes_.streams(staged_write);
    if (input_offset == sched::kStagedInput) {
      char* staged = staging(rank_, in_half);
      const size_t tail = mine.end * c.elem;
      writeStaging(staged_write, stream, [&](auto copy) {
        inParts(off, 1, [&](int, size_t b, size_t n) { copy(staged + b, src + b, n); });
        inParts(r.size() * c.elem - tail, 1, [&](int, size_t b, size_t n) { copy(staged + tail + b, src + tail + b, n); });
      });
    }
    SYMMAR_CHECK(sync_->barrier(sched::kSlotStart, input_offset, k == 0 ? c.signature : 0));
    const uint32_t start_epoch = sync_->epoch();

    for (int p = 0; p < world_; ++p) {
      const uint64_t d = p == rank_ ? input_offset : sync_->peerInputOffset(p, sched::kSlotStart, start_epoch);
      if (p != rank_) SYMMAR_CHECK(checkPeerInputOffset(p, d, c));
      if (p == rank_) {
        srcs_[p] = src + off;
      } else if (d != sched::kStagedInput) {
        srcs_[p] = heap_->userBase(p) + d + (r.begin + mine.begin) * c.elem;
      } else {
        srcs_[p] = staging(p, in_half) + off;
      }
    }
    // The owner writes its slice to its output and publishes it in the same pass. In place, the
    // output slice is the input slice being read: each block is read before it is written.
    char* publish = staging(rank_, out_half) + off;
    if (inter_host_) {
      // Across hosts the owned slice is this host's partial: reduced straight into the inter-host
      // stage, which writes the finished slice to the output and publishes it.
      reduceToPieces(c, mine.size());
      SYMMAR_CHECK(combineStaged(c, r.begin + mine.begin, mine.size(), publish));
    } else {
      char* out = c.recv + (r.begin + mine.begin) * c.elem;
      inParts(mine.size(), c.elem, [&](int part, size_t b, size_t n) {
        const void** part_srcs = partSources(part, b, c.elem);
        char* part_out = out + b * c.elem;
        if (stream) {
          // Reduced into the output, then streamed from there (in cache) to staging.
          reduce(part_out, nullptr, part_srcs, world_, n, c.dtype, c.op);
          simdStreamCopy(publish + b * c.elem, part_out, n * c.elem);
        } else {
          reduce(part_out, publish + b * c.elem, part_srcs, world_, n, c.dtype, c.op);
        }
      });
    }
    SYMMAR_CHECK(sync_->barrier(sched::kSlotEnd));

    for (int i = 1; i < world_; ++i) {
      const int p = (rank_ + i) % world_;  // spread the reads over the peers
      const sched::Range s = sched::rankSlice(r.size(), world_, p, vec);
      char* dst = c.recv + (r.begin + s.begin) * c.elem;
      const char* from = staging(p, out_half) + s.begin * c.elem;
      copyInParts(dst, from, s.size() * c.elem);
    }
    last_read_half_ = out_half;
    if (stream) staging_writes_.afterStreamed();
  }
  return symmarSuccess;
}

}  // namespace symmar
