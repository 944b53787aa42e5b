// One-shot on the host: every rank publishes its chunk in its staging buffer, then reads its
// peers' chunks from theirs and its own from its input, and reduces them itself (rank order
// 0..N-1, so every rank computes the same bits).
// Staging halves alternate, so one barrier per chunk suffices: a rank that passed barrier k knows
// every peer finished reading the half that chunk k+1 overwrites (it was read before barrier k).
// From 8 KiB to 1 MiB a call stages at its slot of the staging ring (sched::stagingRingShift)
// where the comm agreed to use it, so that it does not write lines a peer read the call before.
#include <algorithm>

#include "core/error.h"
#include "host/host_backend.h"
#include "host/host_reduce.h"

namespace symmar {

symmarResult_t HostBackend::runOneShot(const Call& c) {
  const size_t chunk = chunkElems(c.elem);
  if (chunk == 0) return fail(symmarInvalidArgument, "staging buffer of %zu bytes is too small", heap_->stagingBytes());
  const size_t shift = stagingShift(std::min(c.count, chunk) * c.elem);  // its slot of the staging ring, or 0
  const auto staging = [&](int p, int half) { return heap_->staging(p, half) + shift; };
  for (size_t k = 0; k < sched::numChunks(c.count, chunk); ++k) {
    const sched::Range r = sched::chunkRange(c.count, chunk, k);
    const int half = takeWriteHalf();
    const size_t bytes = r.size() * c.elem;
    // Streamed where plain writes were slow lately (staging_writes.h).
    stageChunk(bytes, [&](auto copy) { copy(staging(rank_, half), c.send + r.begin * c.elem, bytes); });
    SYMMAR_CHECK(sync_->barrier(sched::kSlotStart, sched::kStagedInput, k == 0 ? c.signature : 0));
    for (int p = 0; p < world_; ++p) srcs_[p] = staging(p, half);
    // Its own chunk from its input, still in its cache: the staged copy may have been streamed
    // past the cache (2 ranks, 128 KiB-2 MiB, docs/performance/host-allreduce.md: 1.4-2.8x as
    // fast with plain staging writes, 1.03-1.6x when streamed).
    srcs_[rank_] = c.send + r.begin * c.elem;
    last_read_half_ = half;
    if (inter_host_) {  // this host's sum is a partial for the inter-host stage, which writes the output
      reduceToPieces(c, r.size());
      SYMMAR_CHECK(combineStaged(c, r.begin, r.size(), nullptr));
    } else {
      reduceRanks(c.recv + r.begin * c.elem, nullptr, srcs_.data(), world_, r.size(), c.dtype, c.op);
    }
  }
  return symmarSuccess;
}

}  // namespace symmar
