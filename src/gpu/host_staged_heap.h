// The heap of a GPU comm whose GPUs have no working peer access (link pcie-nop2p): every rank's
// [staging | signal pad] lives in a shared host-memory segment (bootstrap/shared_segments.h),
// registered with CUDA as pinned, mapped memory in every process. The same kernels then run with
// these device views as every rank's base: inputs travel as posted PCIe writes into host memory,
// flags are pushed there too, and each rank reads its peers' staging from host memory.
#pragma once
#include <cstdint>
#include <vector>

#include "bootstrap/shared_segments.h"
#include "core/backend.h"
#include "gpu/kernel_launch.h"

namespace symmar {
namespace gpu {

class HostStagedHeap {
 public:
  HostStagedHeap() = default;
  HostStagedHeap(const HostStagedHeap&) = delete;
  HostStagedHeap& operator=(const HostStagedHeap&) = delete;
  ~HostStagedHeap() { release(); }

  /// Collective: creates and maps every rank's segment of layout.total bytes, registers each with
  /// CUDA; every rank learns whether all did.
  symmarResult_t create(const BackendContext& ctx, const HeapLayout& layout, uint64_t nonce, int timeout_ms);
  /// Rank r's segment as the device sees it (nullptr before create).
  char* base(int r) const { return dev_.empty() ? nullptr : dev_[static_cast<size_t>(r)]; }
  void release();

 private:
  SharedSegments segments_;
  std::vector<char*> registered_;  ///< host addresses registered with CUDA
  std::vector<char*> dev_;
};

}  // namespace gpu
}  // namespace symmar
