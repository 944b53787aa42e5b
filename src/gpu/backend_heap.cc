// The CUDA backend's shared heap: device memory mapped by every peer, or, when the GPUs have no
// working peer access, pinned host memory shared by the ranks (HostStagedHeap).
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/random.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_check.h"

namespace symmar {
namespace gpu {

symmarResult_t CudaBackend::buildHeap() {
  bases_.clear();
  if (path_ == DataPath::kHostStaged) {
    SYMMAR_CHECK(host_heap_.create(ctx_, layout_, nonceFor(ctx_.host_nonce, NonceUse::kGpuHostStaging), timeout_ms_));
    for (int r = 0; r < ctx_.nranks; ++r) bases_.push_back(host_heap_.base(r));
  } else {
    SYMMAR_CHECK(heap_.create(ctx_, device_, layout_, peersShareHeap(), topo_.topo.multicast != 0, timeout_ms_));
    for (int r = 0; r < ctx_.nranks; ++r) bases_.push_back(heap_.base(r));
  }
  arena_ = SymmetricArena(layout_.heap_bytes);
  topo_.topo.multicast = heap_.multicast() ? 1 : 0;
  return symmarSuccess;
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
