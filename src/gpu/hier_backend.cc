#include "gpu/hier_backend.h"

#include <utility>
#include <vector>

#include "bootstrap/host_layout.h"
#include "core/error.h"
#include "core/log.h"
#include "core/names.h"
#include "gpu/cuda_backend.h"

namespace symmar {
namespace gpu {
namespace {

class HierarchicalCudaBackend : public Backend {
 public:
  explicit HierarchicalCudaBackend(const BackendContext& ctx) : ctx_(ctx), placement_(ctx.placement) {}

  symmarResult_t init(BackendFacts* facts) {
    SYMMAR_CHECK(connectHost(*ctx_.bootstrap, placement_, ctx_.host_ranks, ctx_.settings.timeout_ms, &host_bootstrap_));
    host_ctx_ = ctx_;
    host_ctx_.rank = placement_.local_rank;
    host_ctx_.nranks = placement_.local_size;
    host_ctx_.bootstrap = host_bootstrap_.get();
    host_ctx_.comm_ranks = ctx_.host_ranks;  // messages of the host's backend name the comm's ranks
    // Within its host the host's backend sees one host of local_size ranks (host_nonce carries over).
    host_ctx_.placement = HostPlacement{1, 0, placement_.local_rank, placement_.local_size, true};
    host_ctx_.host_ranks.clear();
    host_ctx_.ranks_by_host.clear();
    for (int r = 0; r < placement_.local_size; ++r) host_ctx_.host_ranks.push_back(r);
    host_ = std::make_unique<CudaBackend>(host_ctx_, /*host_stage=*/true);  // comm_nccl_ serves nccl
    inter_ctx_ = ctx_;
    inter_ctx_.rank = placement_.host;
    inter_ctx_.nranks = placement_.hosts;
    SYMMAR_CHECK(host_->init(facts));
    // The comm's own NCCL communicator (the nccl algorithm), then the inter-host one split from it:
    // color = local index, ranked by host, so rank h of it is this local index's rank on host h.
    if (!comm_nccl_.load()) return fail(symmarNcclError, "across hosts the CUDA backend needs NCCL (libnccl.so.2)");
    SYMMAR_CHECK(comm_nccl_.create(ctx_));
    SYMMAR_CHECK(comm_nccl_.split(placement_.local_rank, placement_.host, &inter_nccl_));
    facts->topo.world_size = ctx_.nranks;
    facts->placement = placement_;
    facts->inter_host = "nccl";
    SYMMAR_INFO(kSubsysInit, "hierarchical: %d hosts x %d GPUs, host %d, local rank %d, inter-host stage over NCCL",
                placement_.hosts, placement_.local_size, placement_.host, placement_.local_rank);
    return symmarSuccess;
  }

  symmarResult_t allReduce(const AllReduceCall& c) override {
    cudaStream_t s = static_cast<cudaStream_t>(c.stream);
    if (c.algo == symmarAlgoNccl) return comm_nccl_.allReduce(ctx_, c.send, c.recv, c.count, c.dtype, c.op, s);
    SYMMAR_CHECK(host_->allReduce(c));
    if (c.count == 0) return symmarSuccess;
    // Stream order puts the host's sum in recv before NCCL reads it; every local rank holds the
    // same bits, and the two hosts' partials add the same way on every local index.
    return inter_nccl_.allReduce(inter_ctx_, c.recv, c.recv, c.count, c.dtype, c.op, s);
  }
  symmarResult_t allReduceAddRmsNorm(const AddRmsNormCall&) override {
    return fail(symmarUnsupported, "no fused form across hosts: the norm needs every host's sum");
  }
  /// The unfused call's add and norm, after the allreduce across hosts: this GPU's own kernel.
  symmarResult_t addRmsNormRows(const AddRmsNormCall& c, const void* sums) override {
    return host_->addRmsNormRows(c, sums);
  }
  /// True even where this host's GPUs lack the kernel image: the image is agreed among this host's
  /// ranks only, and refusing here while other hosts' ranks run the allreduce would leave their
  /// NCCL stage waiting for this host. Such a host fails at the kernel's launch, after the allreduce.
  bool hasAddRmsNormRows() const override { return true; }
  /// Across hosts reduce-scatter and all-gather are NCCL's, over the comm-wide communicator.
  symmarResult_t scatterGather(const ScatterGatherCall& c) override {
    if (c.count == 0) return symmarSuccess;
    if (c.algo != symmarAlgoNccl) return fail(symmarUnsupported, "across hosts only NCCL serves this collective");
    return comm_nccl_.scatterGather(ctx_, c);
  }
  symmarResult_t memAlloc(size_t bytes, void** ptr) override { return host_->memAlloc(bytes, ptr); }
  symmarResult_t memFree(void* ptr) override { return host_->memFree(ptr); }
  symmarResult_t asyncError() override { return host_->asyncError(); }
  void noteCommFailed() override {
    host_->noteCommFailed();
    comm_nccl_.markFailed();
    inter_nccl_.markFailed();
  }
  uint32_t fallbacks() const override { return algoBit(symmarAlgoNccl); }
  /// The engine's communicator spans the whole comm: it serves the nccl algorithm. The inter-host
  /// communicator split at creation stays.
  symmarResult_t adoptNccl(void* nccl_comm) override { return comm_nccl_.adopt(nccl_comm); }

 private:
  BackendContext ctx_;
  const HostPlacement placement_;
  std::unique_ptr<Bootstrap> host_bootstrap_;
  BackendContext host_ctx_;
  BackendContext inter_ctx_;  // this rank's place among the hosts (the split communicator's)
  std::unique_ptr<CudaBackend> host_;
  NcclFallback comm_nccl_;
  NcclFallback inter_nccl_;
};

}  // namespace

bool gpuHierarchyApplies(const HostPlacement& p, std::string* why) {
  if (p.hosts == 1) {
    *why = "one host";
  } else if (!p.uniform) {
    *why = "hosts with different numbers of ranks";
  } else if (p.hosts > 2) {
    *why = "more than two hosts (NCCL's sum of several partials may differ between local indices)";
  } else {
    return true;
  }
  return false;
}

symmarResult_t createHierarchicalCudaBackend(const BackendContext& ctx, BackendFacts* facts,
                                             std::unique_ptr<Backend>* out) {
  auto backend = std::make_unique<HierarchicalCudaBackend>(ctx);
  SYMMAR_CHECK(backend->init(facts));
  *out = std::move(backend);
  return symmarSuccess;
}

}  // namespace gpu
}  // namespace symmar
