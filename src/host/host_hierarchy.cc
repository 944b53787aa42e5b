// The host backend across hosts: each host's ranks run the usual shared-memory schedules among
// themselves, and the part of the result a rank holds after its host's stage (its reduced slice in
// two-shot, the whole chunk in one-shot and lamport) goes through the inter-host engine and is
// reduced in host order before the host's final stage publishes it. Every rank of the comm thus
// computes the same bits: within a host the usual schedules guarantee it, across hosts every rank
// with a given local index reduces the same gathered partials in the same order.
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "host/host_backend.h"
#include "host/host_reduce.h"

namespace symmar {

symmarResult_t HostBackend::setInterHost(const InterHostCarrier& carrier) {
  if (placement_.hosts == 1) return fail(symmarUnsupported, "symmarCommSetInterHost: every rank is on one host");
  if (!heap_) {
    return fail(symmarUnsupported,
                "symmarCommSetInterHost: the hosts have different numbers of ranks; the "
                "hierarchical path needs as many on each (the fallback serves)");
  }
  if (inter_host_) return fail(symmarInvalidUsage, "symmarCommSetInterHost: an inter-host engine is already set");
  inter_host_ =
      std::make_unique<InterHost>(carrier, placement_.hosts, placement_.host, ctx_.rank, ctx_.settings.timeout_ms);
  SYMMAR_INFO(kSubsysInit, "hierarchical: %d hosts x %d ranks, host %d, local rank %d, inter-host stage over %s",
              placement_.hosts, placement_.local_size, placement_.host, placement_.local_rank, carrier.name.c_str());
  return symmarSuccess;
}

void HostBackend::reduceToPieces(const Call& c, size_t n) {
  piece_srcs_.resize(srcs_.size());
  for (const InterHost::Piece& p : inter_host_->pieces(n, c.dtype)) {
    if (!p.count) continue;
    for (int q = 0; q < world_; ++q) piece_srcs_[q] = static_cast<const char*>(srcs_[q]) + p.begin * c.elem;
    reduceRanks(p.dst, nullptr, piece_srcs_.data(), world_, p.count, c.dtype, c.op);
  }
}

void HostBackend::copyToPieces(const Call& c, const char* src, size_t n) {
  for (const InterHost::Piece& p : inter_host_->pieces(n, c.dtype)) {
    if (p.count) copyBytes(p.dst, src + p.begin * c.elem, p.count * c.elem);
  }
}

symmarResult_t HostBackend::combineFromOutput(const Call& c, size_t begin, size_t n, char* publish) {
  if (!inter_host_) return symmarSuccess;
  copyToPieces(c, c.recv + begin * c.elem, n);
  return combineStaged(c, begin, n, publish);
}

symmarResult_t HostBackend::combineStaged(const Call& c, size_t begin, size_t n, char* publish) {
  if (!inter_host_) return symmarSuccess;
  return interHostStage(inter_host_->combine(c.recv + begin * c.elem, publish, n, c.dtype, c.op, c.signature));
}

symmarResult_t HostBackend::interHostStage(symmarResult_t res) {
  if (res == symmarSuccess) return res;
  // This host's peers may be waiting for this rank at a barrier: they stop now instead of at their
  // timeout. The engine may hold requests of the abandoned exchange, so the comm is done.
  return sync_->breakComm(res, sync_->epoch());
}

}  // namespace symmar
