// The CUDA backend across hosts: the comm's ranks on each host form a CUDA backend of their own
// (symmetric heap and kernels over NVLink or PCIe), and NCCL carries the inter-host stage: after a
// kernel leaves this host's sum on every local rank, the ranks that share a local index, one per
// host, allreduce it over an NCCL communicator split from the comm's own. That is the latency form
// (each rank sends the whole message between hosts); larger messages go to NCCL over the whole comm
// (the nccl algorithm), whose own hierarchy pipelines NVLink and the network.
//
// Only two hosts: NCCL's sum of two partials is one addition, the same bits on every local index's
// communicator, while with more hosts each communicator may add in its own order and local ranks
// could disagree. Comms over more hosts, or hosts of unequal size, are served by NCCL whole.
#pragma once
#include <memory>
#include <string>

#include "core/backend.h"

namespace symmar {
namespace gpu {

/// Whether a CUDA comm with this placement runs hierarchically (else *why says why not).
bool gpuHierarchyApplies(const HostPlacement& p, std::string* why);

/// Collective: builds the per-host CUDA backend over a bootstrap of the host's ranks, the comm's
/// NCCL communicator and the inter-host one split from it. facts gets the host backend's topology
/// (world size: the whole comm), the placement and "nccl" as the inter-host engine.
symmarResult_t createHierarchicalCudaBackend(const BackendContext& ctx, BackendFacts* facts,
                                             std::unique_ptr<Backend>* out);

}  // namespace gpu
}  // namespace symmar
