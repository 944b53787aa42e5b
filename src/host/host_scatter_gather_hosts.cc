// Reduce-scatter and all-gather across hosts: the one-shot pattern within each host, the inter-host
// engine between the ranks that share a local index (one per host). Rank (h, l) is local index l of
// host h; the ranks of local index l on every host form its group.
//
// Reduce-scatter, chunk [b, e) of each block: every rank stages, for each host peer q, the chunks of
// the blocks of q's group (q's H blocks, host by host); after one barrier, local rank l reduces its
// group's blocks over its host's ranks, in local order, straight into the inter-host records, and
// the engine sends host h the partial of (h, l)'s block and reduces the partials of this rank's block
// in host order. A block's bits thus depend on the placement, never on the rank computing them (each
// block has one), and every host's sum enters once.
//
// All-gather, chunk [b, e): the engine first brings this rank the chunks of its group, which it
// stages host by host; after one barrier every rank copies every host peer's staged chunks to the
// places of their ranks.
//
// Both exchange receipts after the data (InterHost), and a failed inter-host stage breaks the comm
// so this host's ranks stop at once. Inputs are always staged: peers read no send buffer in place,
// so no end barrier is needed.
#include <cstring>

#include "core/error.h"
#include "host/host_backend.h"
#include "host/host_reduce.h"

namespace symmar {

int HostBackend::rankAt(int host, int local) const {
  return ctx_.ranks_by_host[static_cast<size_t>(host * world_ + local)];
}

symmarResult_t HostBackend::scatterGatherAcrossHosts(const ScatterGatherCall& c) {
  const size_t hosts = static_cast<size_t>(placement_.hosts);
  if (ctx_.ranks_by_host.size() != hosts * static_cast<size_t>(world_)) {
    return fail(symmarInternalError, "host backend: no rank layout for %zu hosts x %d ranks", hosts, world_);
  }
  if (c.count == 0) {  // no data, but the call is matched within the host and between hosts
    SYMMAR_CHECK(matchCall(callSignature(c)));
    return interHostStage(inter_host_->gather(nullptr, 0, c.dtype, callSignature(c)));
  }
  const size_t elem = c.elem();
  const size_t chunk = chunkElems(elem) / (c.coll == Collective::kReduceScatter ? hosts * world_ : hosts);
  if (chunk == 0) return fail(symmarInvalidArgument, "staging buffer of %zu bytes is too small", heap_->stagingBytes());
  for (size_t k = 0; k < sched::numChunks(c.count, chunk); ++k) {
    const sched::Range r = sched::chunkRange(c.count, chunk, k);
    const uint64_t sig = k == 0 ? callSignature(c) : 0;
    SYMMAR_CHECK(c.coll == Collective::kReduceScatter ? reduceScatterChunkAcrossHosts(c, r, sig)
                                                      : allGatherChunkAcrossHosts(c, r, sig));
  }
  return symmarSuccess;
}

symmarResult_t HostBackend::reduceScatterChunkAcrossHosts(const ScatterGatherCall& c, sched::Range r, uint64_t sig) {
  const int hosts = placement_.hosts;
  const size_t elem = c.elem(), bytes = r.size() * elem, block = c.count * elem;
  const char* send = static_cast<const char*>(c.send);
  auto chunkOf = [&](int host, int local) { return send + rankAt(host, local) * block + r.begin * elem; };
  const int half = takeWriteHalf();
  char* staged = heap_->staging(rank_, half);
  for (int q = 0; q < world_; ++q) {
    for (int h = 0; h < hosts && q != rank_; ++h) copyBytes(staged + (q * hosts + h) * bytes, chunkOf(h, q), bytes);
  }
  SYMMAR_CHECK(sync_->barrier(sched::kSlotStart, sched::kStagedInput, sig));
  const std::vector<InterHost::Piece>& partials = inter_host_->blocks(r.size(), c.dtype);
  for (int h = 0; h < hosts; ++h) {
    for (int p = 0; p < world_; ++p) {
      srcs_[p] = p == rank_ ? chunkOf(h, p) : heap_->staging(p, half) + (rank_ * hosts + h) * bytes;
    }
    reduceRanks(partials[static_cast<size_t>(h)].dst, nullptr, srcs_.data(), world_, r.size(), c.dtype, c.op);
  }
  last_read_half_ = half;
  // In place the output chunk is this rank's own input chunk, reduced above before it is written.
  char* out = static_cast<char*>(c.recv) + r.begin * elem;
  return interHostStage(inter_host_->scatter(out, r.size(), c.dtype, c.op, callSignature(c)));
}

symmarResult_t HostBackend::allGatherChunkAcrossHosts(const ScatterGatherCall& c, sched::Range r, uint64_t sig) {
  const int hosts = placement_.hosts;
  const size_t elem = c.elem(), bytes = r.size() * elem, block = c.count * elem;
  const char* send = static_cast<const char*>(c.send) + r.begin * elem;
  SYMMAR_CHECK(interHostStage(inter_host_->gather(send, r.size(), c.dtype, callSignature(c))));
  const int half = takeWriteHalf();
  char* staged = heap_->staging(rank_, half);
  for (int h = 0; h < hosts; ++h) copyBytes(staged + h * bytes, inter_host_->gathered(h), bytes);
  SYMMAR_CHECK(sync_->barrier(sched::kSlotStart, sched::kStagedInput, sig));
  char* recv = static_cast<char*>(c.recv) + r.begin * elem;
  for (int i = 0; i < world_; ++i) {
    const int p = (rank_ + i) % world_;  // the peers in turn from this rank on: reads spread over them
    for (int h = 0; h < hosts; ++h) {
      char* dst = recv + rankAt(h, p) * block;
      const char* src = heap_->staging(p, half) + h * bytes;
      if (dst != send) copyBytes(dst, src, bytes);  // in place this rank's own chunk is there already
    }
  }
  last_read_half_ = half;
  return symmarSuccess;
}

}  // namespace symmar
