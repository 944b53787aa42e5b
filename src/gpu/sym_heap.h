// The symmetric heap of a CUDA comm: one cuMemCreate allocation per rank (POSIX fd handle),
// exchanged over the bootstrap and mapped by every rank at one contiguous reservation
// (rank r at base + r * size), optionally bound to a multicast object for multimem.
//
// Layout of every rank's allocation: [staging | signal pad | user heap], equal on every rank; the
// multicast object binds the staging buffers only.
#pragma once
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "gpu/driver.h"
#include "gpu/kernel_launch.h"

namespace symmar {
namespace gpu {

class SymmetricHeap {
 public:
  SymmetricHeap() = default;
  SymmetricHeap(const SymmetricHeap&) = delete;
  SymmetricHeap& operator=(const SymmetricHeap&) = delete;
  ~SymmetricHeap() { release(); }

  /// Collective. map_peers: import and map every peer's allocation (needs peer access); otherwise
  /// only this rank's allocation is mapped. want_multicast: try to bind a multicast object; any
  /// failure on any rank leaves multicast() false on every rank (and logs why).
  symmarResult_t create(const BackendContext& ctx, int device, const HeapLayout& layout, bool map_peers, bool want_multicast,
                        int timeout_ms);
  /// Rank r's allocation as mapped in this process (nullptr for peers when not mapped).
  char* base(int r) const { return bases_.empty() ? nullptr : bases_[static_cast<size_t>(r)]; }
  char* multicastBase() const { return mc_ptr_; }
  bool multicast() const { return mc_ptr_ != nullptr; }
  size_t size() const { return size_; }
  /// Unmaps and releases everything. comm_failed: peers may still run kernels that reach this
  /// rank's staging through multicast, so its memory stays bound (see releaseMulticast).
  void release(bool comm_failed = false);

 private:
  symmarResult_t setupMulticast(const BackendContext& ctx, uint64_t nonce, int timeout_ms);
  void releaseMulticast(bool unbind = true);

  const DriverApi* drv_ = nullptr;
  int device_ = -1;
  int rank_ = 0;
  size_t size_ = 0;
  CUdeviceptr va_ = 0;    ///< reservation of world * size_
  size_t va_bytes_ = 0;
  std::vector<CUmemGenericAllocationHandle> handles_;  ///< 0 where not imported
  std::vector<bool> mapped_;
  std::vector<char*> bases_;
  CUmemGenericAllocationHandle mc_handle_ = 0;
  bool mc_bound_ = false;
  bool mc_mapped_ = false;
  CUdevice cu_dev_ = 0;
  size_t mc_gran_ = 0;
  size_t mc_size_ = 0;  ///< bytes of the multicast object: the staging buffers, rounded to its granularity
  CUdeviceptr mc_va_ = 0;
  char* mc_ptr_ = nullptr;
};

}  // namespace gpu
}  // namespace symmar
