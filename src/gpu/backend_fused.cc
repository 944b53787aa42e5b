// The CUDA backend's fused allreduce + residual add + RMSNorm: the kernels of cuda/add_rms_norm.cu
// on the comm's heap (device memory, or host memory without peer access), and the lamport form of
// cuda/lamport_add_rms_norm.cu (peer access only: the API refuses it elsewhere).
#include "core/error.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_check.h"
#include "plan/planner.h"

namespace symmar {
namespace gpu {

symmarResult_t CudaBackend::allReduceAddRmsNorm(const AddRmsNormCall& call) {
  SYMMAR_CHECK(asyncError());
  symmarAlgo_t algo = call.algo;
  // Calls are matched by order only on the GPU: an empty call launches nothing, on every rank alike.
  if (call.tokens == 0 || call.hidden == 0) return symmarSuccess;
  if (!kernelsRun()) {
    return fail(symmarUnsupported, "the fused norm needs the symmetric kernels, which this comm has not");
  }
  const LaunchContext lc = launchContext();
  if (algo == symmarAlgoLamport) return lamportAddRmsNorm(lc, call);
  // The kernels' own row layouts (the two-shot publishes 16-byte aligned parts) decide the form.
  const size_t form_row_bytes[2] = {addRmsNormRowBytes(call, false), addRmsNormRowBytes(call, true)};
  SYMMAR_CHECK(fitAddRmsNormForm(call, form_row_bytes, sched::stagingHalfBytes(lc.layout.staging_bytes), &algo));
  const bool two_shot = algo == symmarAlgoTwoShot;
  const void* kernel = addRmsNormKernel(call.dtype, two_shot);
  if (!kernel) return fail(symmarUnsupported, "no fused kernel for this dtype");
  DeviceGuard guard(device_);
  int grid = 1;
  KernelArgs a = makeAddRmsNormArgs(lc, call, algo, &grid);
  return launch(kernel, grid, kThreads, &a, static_cast<cudaStream_t>(call.stream));
}

symmarResult_t CudaBackend::lamportAddRmsNorm(const LaunchContext& lc, const AddRmsNormCall& call) {
  if (!sched::lamportFusedFits(call.tokens, call.hidden, symmarTypeSize(call.dtype))) {
    return fail(symmarUnsupported,
                "the fused lamport form needs rows of whole 16-byte vectors and at most %zu bytes a call (%zu x %zu %s "
                "elements): use oneshot or twoshot, or let the call choose",
                sched::kLamportMaxBytes, call.tokens, call.hidden, dtypeName(call.dtype));
  }
  const void* kernel = lamportAddRmsNormKernel(call.dtype);
  if (!kernel) return fail(symmarUnsupported, "no fused lamport kernel for this dtype");
  DeviceGuard guard(device_);
  int grid = 1;
  KernelArgs a = makeAddRmsNormArgs(lc, call, symmarAlgoLamport, &grid);
  return launch(kernel, grid, kLamportThreads, &a, static_cast<cudaStream_t>(call.stream));
}

symmarResult_t CudaBackend::addRmsNormRows(const AddRmsNormCall& call, const void* sums) {
  SYMMAR_CHECK(asyncError());
  if (call.tokens == 0 || call.hidden == 0) return symmarSuccess;
  const void* kernel = addRmsNormRowsKernel(call.dtype);
  if (!kernel) return fail(symmarUnsupported, "no add + norm kernel for this dtype");
  DeviceGuard guard(device_);
  int grid = 1;
  KernelArgs a = makeAddRmsNormRowsArgs(call, sums, topo_.devices_repeat ? nblocks_ : kAddRmsNormRowsBlocks, &grid);
  return launch(kernel, grid, kThreads, &a, static_cast<cudaStream_t>(call.stream));
}

}  // namespace gpu
}  // namespace symmar
