#include "gpu/sym_heap.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "bootstrap/bootstrap.h"
#include "core/error.h"
#include "core/log.h"
#include "core/random.h"
#include "core/schedule.h"
#include "gpu/cuda_check.h"

namespace symmar {
namespace gpu {
namespace {

constexpr CUmemAllocationHandleType kFdHandle = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;

size_t roundUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

CUmemAccessDesc accessFor(int device) {
  CUmemAccessDesc acc{};
  acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  acc.location.id = device;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return acc;
}

void closeAll(std::vector<int>& fds, int keep_rank) {
  for (size_t r = 0; r < fds.size(); ++r) {
    if (static_cast<int>(r) != keep_rank && fds[r] >= 0) close(fds[r]);
    fds[r] = -1;
  }
}

/// Turns an agreement into this rank's return value: its own failure, or a peer's (named by its
/// rank in the comm).
symmarResult_t peerOutcome(const BackendContext& ctx, symmarResult_t local, int bad, const char* what) {
  if (bad < 0) return symmarSuccess;
  if (local != symmarSuccess) return local;
  return fail(symmarCudaError, "rank %d failed to %s", ctx.commRank(bad), what);
}

}  // namespace

symmarResult_t SymmetricHeap::create(const BackendContext& ctx, int device, const HeapLayout& layout, bool map_peers,
                                     bool want_multicast, int timeout_ms) {
  const char* why = "";
  drv_ = driverApi(&why);
  if (!drv_) return fail(symmarCudaError, "%s", why);
  Bootstrap& bs = *ctx.bootstrap;
  const int world = ctx.nranks;
  device_ = device;
  rank_ = ctx.rank;
  SYMMAR_CU_TRY(drv_->cuDeviceGet(&cu_dev_, device));

  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = kFdHandle;
  size_t gran = 0;
  SYMMAR_CU_TRY(drv_->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  if (want_multicast && drv_->has_multicast) {
    CUmulticastObjectProp mp{};
    mp.numDevices = static_cast<unsigned>(world);
    mp.size = layout.total;
    mp.handleTypes = kFdHandle;
    // The minimum (not the recommended, up to 512 MiB) keeps the heap from ballooning.
    if (drv_->cuMulticastGetGranularity(&mc_gran_, &mp, CU_MULTICAST_GRANULARITY_MINIMUM) == CUDA_SUCCESS &&
        mc_gran_ > 0) {
      gran = std::lcm(gran, mc_gran_);
    }
  }
  // Every rank must map the same size (granularities could differ across GPU models).
  std::vector<uint64_t> sizes;
  SYMMAR_CHECK(gatherAll<uint64_t>(bs, roundUp(layout.total, gran), &sizes));
  size_ = static_cast<size_t>(*std::max_element(sizes.begin(), sizes.end()));

  handles_.assign(static_cast<size_t>(world), 0);
  mapped_.assign(static_cast<size_t>(world), false);
  bases_.assign(static_cast<size_t>(world), nullptr);
  int own_fd = -1;
  symmarResult_t local = symmarSuccess;
  CUresult res = drv_->cuMemCreate(&handles_[static_cast<size_t>(rank_)], size_, &prop, 0);
  if (res != CUDA_SUCCESS) {
    local = driverFailure(res, "cuMemCreate of the symmetric heap");
  } else if (map_peers) {
    res = drv_->cuMemExportToShareableHandle(&own_fd, handles_[static_cast<size_t>(rank_)], kFdHandle, 0);
    if (res != CUDA_SUCCESS) local = driverFailure(res, "cuMemExportToShareableHandle (POSIX fd)");
  }
  int bad = -1;
  SYMMAR_CHECK(agreeAll(bs, local == symmarSuccess, &bad));
  if (bad >= 0) {
    if (own_fd >= 0) close(own_fd);
    return peerOutcome(ctx, local, bad, "create its symmetric heap");
  }

  // Scopes the fd-passing sockets to this comm and host.
  const uint64_t nonce = nonceFor(ctx.host_nonce, NonceUse::kGpuHeap);

  if (map_peers) {
    std::vector<int> fds;
    symmarResult_t ex = exchangeFds(bs, nonce, own_fd, timeout_ms, &fds);
    close(own_fd);
    if (ex != symmarSuccess) return ex;
    for (int r = 0; r < world && local == symmarSuccess; ++r) {
      if (r == rank_) continue;
      void* h = reinterpret_cast<void*>(static_cast<intptr_t>(fds[static_cast<size_t>(r)]));
      res = drv_->cuMemImportFromShareableHandle(&handles_[static_cast<size_t>(r)], h, kFdHandle);
      if (res != CUDA_SUCCESS) local = driverFailure(res, "cuMemImportFromShareableHandle of a peer's heap");
    }
    closeAll(fds, rank_);
  }
  va_bytes_ = size_ * static_cast<size_t>(world);
  if (local == symmarSuccess) {
    res = drv_->cuMemAddressReserve(&va_, va_bytes_, gran, 0, 0);
    if (res != CUDA_SUCCESS) local = driverFailure(res, "cuMemAddressReserve");
  }
  const CUmemAccessDesc acc = accessFor(device);
  for (int r = 0; r < world && local == symmarSuccess; ++r) {
    if (!handles_[static_cast<size_t>(r)]) continue;
    CUdeviceptr at = va_ + static_cast<CUdeviceptr>(r) * size_;
    res = drv_->cuMemMap(at, size_, 0, handles_[static_cast<size_t>(r)], 0);
    if (res != CUDA_SUCCESS) {
      local = driverFailure(res, "cuMemMap");
      break;
    }
    mapped_[static_cast<size_t>(r)] = true;
    res = drv_->cuMemSetAccess(at, size_, &acc, 1);  // fails without peer access to r's GPU
    if (res != CUDA_SUCCESS) {
      local = driverFailure(res, "cuMemSetAccess on a peer's heap");
      break;
    }
    bases_[static_cast<size_t>(r)] = reinterpret_cast<char*>(at);
  }
  SYMMAR_CHECK(agreeAll(bs, local == symmarSuccess, &bad));
  if (bad >= 0) return peerOutcome(ctx, local, bad, "map the symmetric heaps");
  SYMMAR_INFO(kSubsysHeap, "symmetric heap: %zu bytes per rank, %s", size_,
              map_peers ? "all peers mapped" : "own allocation only");
  // Only the staging buffers (offset 0 of the layout) are ever reached through multicast: the object
  // spans them alone, which keeps it small whatever the user heap's size.
  // (The bind needs an offset aligned to the multicast granularity: the layout puts staging at 0.)
  const bool bindable = mc_gran_ > 0 && layout.staging_off == 0;
  mc_size_ = bindable ? std::min(size_, roundUp(layout.staging_bytes, mc_gran_)) : 0;
  if (want_multicast) SYMMAR_CHECK(setupMulticast(ctx, nonceFor(ctx.host_nonce, NonceUse::kGpuMulticast), timeout_ms));
  return symmarSuccess;
}

symmarResult_t SymmetricHeap::setupMulticast(const BackendContext& ctx, uint64_t nonce, int timeout_ms) {
  Bootstrap& bs = *ctx.bootstrap;
  const int world = ctx.nranks;
  const char* step = "create the multicast object";
  bool ok = drv_->has_multicast && mc_size_ > 0;  // agreed below: any rank's "no" is every rank's
  int mc_fd = -1;
  if (ok && rank_ == 0) {
    CUmulticastObjectProp mp{};
    mp.numDevices = static_cast<unsigned>(world);
    mp.size = mc_size_;
    mp.handleTypes = kFdHandle;
    CUresult res = drv_->cuMulticastCreate(&mc_handle_, &mp);
    if (res == CUDA_SUCCESS) res = drv_->cuMemExportToShareableHandle(&mc_fd, mc_handle_, kFdHandle, 0);
    if (res != CUDA_SUCCESS) {
      SYMMAR_INFO(kSubsysHeap, "multicast object: %s", driverErrorText(res));
      ok = false;
    }
  }
  int bad = -1;
  SYMMAR_CHECK(agreeAll(bs, ok, &bad));
  if (bad < 0) {
    // Only rank 0's descriptor matters; the others pass /dev/null to keep the exchange uniform.
    int send_fd = rank_ == 0 ? mc_fd : open("/dev/null", O_RDONLY | O_CLOEXEC);
    std::vector<int> fds;
    symmarResult_t ex = exchangeFds(bs, nonce, send_fd, timeout_ms, &fds);
    if (send_fd >= 0) close(send_fd);
    if (ex != symmarSuccess) {
      releaseMulticast();
      return ex;
    }
    step = "join the multicast object";
    CUresult res = CUDA_SUCCESS;
    if (rank_ != 0) {
      void* h = reinterpret_cast<void*>(static_cast<intptr_t>(fds[0]));
      res = drv_->cuMemImportFromShareableHandle(&mc_handle_, h, kFdHandle);
    }
    closeAll(fds, rank_);
    if (res == CUDA_SUCCESS) res = drv_->cuMulticastAddDevice(mc_handle_, cu_dev_);
    ok = res == CUDA_SUCCESS;
    if (!ok) SYMMAR_INFO(kSubsysHeap, "multicast join: %s", driverErrorText(res));
    // Every device must be added before any rank binds memory: the agreement is that barrier.
    SYMMAR_CHECK(agreeAll(bs, ok, &bad));
  }
  if (bad < 0) {
    step = "bind and map the multicast object";
    CUresult res = drv_->cuMulticastBindMem(mc_handle_, 0, handles_[static_cast<size_t>(rank_)], 0, mc_size_, 0);
    mc_bound_ = res == CUDA_SUCCESS;
    if (res == CUDA_SUCCESS) res = drv_->cuMemAddressReserve(&mc_va_, mc_size_, mc_gran_, 0, 0);
    if (res == CUDA_SUCCESS) {
      res = drv_->cuMemMap(mc_va_, mc_size_, 0, mc_handle_, 0);
      mc_mapped_ = res == CUDA_SUCCESS;
    }
    const CUmemAccessDesc acc = accessFor(device_);
    if (res == CUDA_SUCCESS) res = drv_->cuMemSetAccess(mc_va_, mc_size_, &acc, 1);
    ok = res == CUDA_SUCCESS;
    if (!ok) SYMMAR_INFO(kSubsysHeap, "multicast bind/map: %s", driverErrorText(res));
    SYMMAR_CHECK(agreeAll(bs, ok, &bad));
  }
  if (bad >= 0) {
    releaseMulticast();
    SYMMAR_WARN(kSubsysHeap, "multimem disabled on every rank: rank %d could not %s", ctx.commRank(bad), step);
    return symmarSuccess;
  }
  mc_ptr_ = reinterpret_cast<char*>(mc_va_);
  SYMMAR_INFO(kSubsysHeap, "multicast object bound to the staging buffers: %zu bytes", mc_size_);
  return symmarSuccess;
}

void SymmetricHeap::releaseMulticast(bool unbind) {
  if (!drv_) return;
  if (mc_mapped_) drv_->cuMemUnmap(mc_va_, mc_size_);
  if (mc_va_) drv_->cuMemAddressFree(mc_va_, mc_size_);
  // Unbinding takes this rank's memory out of the object under every peer's multimem accesses. After
  // a failure a peer's kernel may still be issuing them (its waits are bounded, not yet over), and it
  // would fault instead of timing out. Then the handles are only released, and the binding ends
  // with the object itself, when its last holder (the last peer) releases it. A barrier with the
  // peers before the unbind would do too, but would cost a dead peer's whole timeout at destroy.
  if (mc_bound_ && unbind) drv_->cuMulticastUnbind(mc_handle_, cu_dev_, 0, mc_size_);
  if (mc_handle_) drv_->cuMemRelease(mc_handle_);
  mc_mapped_ = mc_bound_ = false;
  mc_va_ = 0;
  mc_handle_ = 0;
  mc_ptr_ = nullptr;
}

void SymmetricHeap::release(bool comm_failed) {
  if (!drv_) return;
  releaseMulticast(!comm_failed);
  for (size_t r = 0; r < handles_.size(); ++r) {
    if (mapped_[r]) drv_->cuMemUnmap(va_ + static_cast<CUdeviceptr>(r) * size_, size_);
    if (handles_[r]) drv_->cuMemRelease(handles_[r]);
  }
  if (va_) drv_->cuMemAddressFree(va_, va_bytes_);
  va_ = 0;
  handles_.clear();
  mapped_.clear();
  bases_.clear();
  drv_ = nullptr;
}

}  // namespace gpu
}  // namespace symmar
