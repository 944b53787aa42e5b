// The CUDA backend's fused allreduce + residual add + RMSNorm: the kernels of cuda/add_rms_norm.cu
// on the comm's heap (device memory, or host memory without peer access).
#include "core/error.h"
#include "gpu/cuda_backend_impl.h"
#include "gpu/cuda_check.h"

namespace symmar {
namespace gpu {

symmarResult_t CudaBackend::allReduceAddRmsNorm(const AddRmsNormCall& call, symmarAlgo_t algo, void* stream) {
  SYMMAR_CHECK(asyncError());
  if (call.tokens == 0) return symmarSuccess;
  if (!have_heap_ || !(topo_.peer_access || topo_.host_staged)) {
    return fail(symmarUnsupported, "the fused norm needs the symmetric kernels, which this comm has not");
  }
  const bool two_shot = algo == symmarAlgoTwoShot;
  const LaunchContext lc = launchContext();
  if (addRmsNormRowsPerChunk(lc, call, two_shot) == 0) {
    return fail(symmarUnsupported, "a row of %zu elements does not fit the %zu-byte staging buffer's half", call.hidden,
                layout_.staging_bytes);
  }
  const void* kernel = addRmsNormKernel(call.dtype, two_shot);
  if (!kernel) return fail(symmarUnsupported, "no fused kernel for this dtype");
  DeviceGuard guard(device_);
  int grid = 1;
  KernelArgs a = makeAddRmsNormArgs(lc, call, &grid);
  return launch(kernel, grid, kThreads, &a, static_cast<cudaStream_t>(stream));
}

}  // namespace gpu
}  // namespace symmar
