#include "gpu/host_staged_heap.h"

#include <cstdint>
#include <cuda_runtime_api.h>

#include "core/error.h"
#include "core/log.h"
#include "gpu/cuda_check.h"

namespace symmar {
namespace gpu {

symmarResult_t HostStagedHeap::create(const BackendContext& ctx, const HeapLayout& layout, uint64_t nonce,
                                      int timeout_ms) {
  Bootstrap& bs = *ctx.bootstrap;
  const size_t bytes = (layout.total + 4095) / 4096 * 4096;
  SYMMAR_CHECK(segments_.create(bs, nonce, bytes, timeout_ms, "gpu-staging"));
  symmarResult_t local = symmarSuccess;
  for (int r = 0; r < ctx.nranks && local == symmarSuccess; ++r) {
    char* host = segments_.base(r);
    // Portable: every CUDA context of the process may use it; mapped: kernels reach it directly.
    cudaError_t e = cudaQuiet(cudaHostRegister(host, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
    void* dev = nullptr;
    if (e == cudaSuccess) {
      registered_.push_back(host);
      e = cudaQuiet(cudaHostGetDevicePointer(&dev, host, 0));
    }
    if (e != cudaSuccess) {
      local = fail(symmarCudaError, "registering rank %d's host staging (%zu bytes) with CUDA failed: %s",
                   ctx.commRank(r), bytes, cudaGetErrorString(e));
    }
    dev_.push_back(static_cast<char*>(dev));
  }
  int bad = -1;
  SYMMAR_CHECK(agreeAll(bs, local == symmarSuccess, &bad));
  if (bad >= 0) {
    release();
    return local != symmarSuccess
               ? local
               : fail(symmarCudaError, "rank %d could not register the host staging", ctx.commRank(bad));
  }
  SYMMAR_INFO(kSubsysHeap, "host-staged heap: %d segments of %zu bytes in pinned host memory", ctx.nranks, bytes);
  return symmarSuccess;
}

void HostStagedHeap::release() {
  for (char* p : registered_) cudaHostUnregister(p);
  registered_.clear();
  dev_.clear();
  segments_.unmapAll();
}

}  // namespace gpu
}  // namespace symmar
