// How the benchmarks time one call on a CUDA stream (built with SYMMAR_PERF_WITH_CUDA only).
#pragma once
#ifdef SYMMAR_PERF_WITH_CUDA
#include <cuda_runtime.h>

#include "symmar/symmar.h"

namespace perf {

/// Records start, runs issue() (which enqueues the call on the stream and returns its result),
/// records stop and waits for it. *res: the call's result, else a CUDA error, else the comm's
/// asynchronous error. Returns the microseconds between the two events.
template <typename Issue>
double timeOnStream(cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop, symmarComm_t comm, symmarResult_t* res,
                    Issue issue) {
  cudaEventRecord(start, stream);
  *res = issue();
  cudaEventRecord(stop, stream);
  if (cudaEventSynchronize(stop) != cudaSuccess && *res == symmarSuccess) *res = symmarCudaError;
  symmarResult_t async = symmarSuccess;
  if (*res == symmarSuccess && symmarCommGetAsyncError(comm, &async) == symmarSuccess) *res = async;
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  return ms * 1000.0;
}

}  // namespace perf
#endif
