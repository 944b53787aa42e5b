// The CUDA backend: symmetric heap + kernels for oneshot/twoshot/multimem, NCCL for the rest.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <set>

#include "core/backend.h"
#include "core/comm.h"
#include "core/symmetric_arena.h"
#include "cuda/kernel_args.h"
#include "gpu/nccl_fallback.h"
#include "gpu/sym_heap.h"
#include "gpu/topology.h"

namespace symmar {
namespace gpu {

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(symmarComm& comm) : comm_(comm), arena_(0) {}
  ~CudaBackend() override;

  /// Collective: probes, builds the heap and the device state. Fills comm.topo on success.
  symmarResult_t init();

  symmarResult_t allReduce(const void* send, void* recv, size_t count, symmarDataType_t dtype, symmarRedOp_t op,
                           symmarAlgo_t algo, void* stream) override;
  symmarResult_t memAlloc(size_t bytes, void** ptr) override;
  symmarResult_t memFree(void* ptr) override;
  symmarResult_t asyncError() override;
  uint32_t fallbacks() const override { return nccl_ok_ ? (1u << symmarAlgoNccl) : 0u; }
  symmarResult_t adoptNccl(void* nccl_comm) override { return nccl_.adopt(nccl_comm); }

 private:
  symmarResult_t resolveSettings();
  symmarResult_t initBlocks();
  symmarResult_t initDeviceState();
  /// Offset in this rank's allocation that peers may read send from in place, or kNoDesc.
  uint64_t inPlaceDescriptor(const void* send, const void* recv, size_t bytes, symmarAlgo_t algo) const;
  /// The descriptors a peer may publish for a call of bytes bytes: [lo, lo + span), span 0 when none fits.
  void descriptorBounds(size_t bytes, uint64_t* lo, uint64_t* span) const;

  symmarComm& comm_;
  int device_ = -1;
  int timeout_ms_ = 0;
  uint32_t epoch_start_ = 0;
  int nblocks_ = 1;
  long long timeout_cycles_ = 0;
  Topology topo_;
  HeapLayout layout_;
  SymmetricHeap heap_;
  bool have_heap_ = false;
  SymmetricArena arena_;
  std::set<void*> plain_allocs_;  ///< symmarMemAlloc without a heap (ranks on several hosts)
  DeviceState* state_ = nullptr;
  int* status_host_ = nullptr;    ///< mapped pinned memory the kernels report timeouts into
  int* status_dev_ = nullptr;
  NcclFallback nccl_;
  bool nccl_ok_ = false;
};

}  // namespace gpu
}  // namespace symmar
