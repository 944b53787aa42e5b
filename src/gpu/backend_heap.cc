// The CUDA backend's shared heap: device memory mapped by every peer, or, when the GPUs have no
// working peer access, pinned host memory shared by the ranks (HostStagedHeap).
#include <cstdint>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_check.h"

namespace symmar {
namespace gpu {

symmarResult_t CudaBackend::buildHeap() {
  bases_.clear();
  if (topo_.host_staged) {
    std::vector<uint64_t> nonces;
    SYMMAR_CHECK(gatherAll<uint64_t>(*ctx_.bootstrap, (uint64_t{std::random_device{}()} << 32) | std::random_device{}(),
                                     &nonces));
    SYMMAR_CHECK(host_heap_.create(ctx_, layout_, nonces[0], timeout_ms_));
    for (int r = 0; r < ctx_.nranks; ++r) bases_.push_back(host_heap_.base(r));
  } else {
    SYMMAR_CHECK(heap_.create(ctx_, device_, layout_, topo_.peer_access, topo_.topo.multicast != 0, timeout_ms_));
    for (int r = 0; r < ctx_.nranks; ++r) bases_.push_back(heap_.base(r));
  }
  arena_ = SymmetricArena(layout_.heap_bytes);
  topo_.topo.multicast = heap_.multicast() ? 1 : 0;
  return symmarSuccess;
}

void CudaBackend::useHostStaging() {
  topo_.host_staged = true;
  topo_.peer_access = false;
  topo_.topo.link = symmarLinkPcieNoP2P;
  topo_.topo.multicast = 0;
  // No user heap in host memory: symmarMemAlloc hands out device memory, and inputs are staged.
  layout_ = makeLayout(layout_.staging_bytes, 0, ctx_.nranks);
}

symmarResult_t CudaBackend::initPad() {
  if (have_heap_) {
    char* own = bases_[static_cast<size_t>(ctx_.rank)];
    const std::vector<char> pad = initialPad(epoch_start_);
    SYMMAR_CUDA_TRY(cudaMemcpy(own + layout_.pad_off, pad.data(), pad.size(), cudaMemcpyHostToDevice));
    const std::vector<uint32_t> lamport = initialLamport(ctx_.nranks);
    SYMMAR_CUDA_TRY(cudaMemcpy(own + layout_.lamport_off, lamport.data(), lamport.size() * sizeof(uint32_t),
                               cudaMemcpyHostToDevice));
  }
  SYMMAR_CUDA_TRY(cudaDeviceSynchronize());
  return symmarSuccess;
}

}  // namespace gpu
}  // namespace symmar
