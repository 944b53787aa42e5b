// Turning CUDA runtime and driver failures into symmar result codes with a detail text.
#pragma once
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "core/error.h"
#include "gpu/driver.h"

namespace symmar {
namespace gpu {

/// err, with the runtime's last error cleared when it is a failure: a failed call symmar handles
/// itself (a query, a cleanup) must not surface in the caller's next cudaGetLastError, which would
/// blame an unrelated launch of theirs. Errors that poison the context stay, as they must.
inline cudaError_t cudaQuiet(cudaError_t err) {
  if (err != cudaSuccess) cudaGetLastError();
  return err;
}

inline symmarResult_t cudaFailure(cudaError_t err, const char* what) {
  symmarResult_t code = err == cudaErrorMemoryAllocation ? symmarOutOfMemory : symmarCudaError;
  return fail(code, "%s failed: %s (%s)", what, cudaGetErrorName(err), cudaGetErrorString(err));
}
inline symmarResult_t driverFailure(CUresult res, const char* what) {
  symmarResult_t code = res == CUDA_ERROR_OUT_OF_MEMORY ? symmarOutOfMemory : symmarCudaError;
  return fail(code, "%s failed: %s", what, driverErrorText(res));
}

}  // namespace gpu
}  // namespace symmar

/// Returns the mapped result code when a runtime call fails (the runtime's last error cleared: the
/// failure is reported here, in symmar's result, and nowhere else).
#define SYMMAR_CUDA_TRY(call)                                                   \
  do {                                                                          \
    cudaError_t symmar_err_ = ::symmar::gpu::cudaQuiet(call);                   \
    if (symmar_err_ != cudaSuccess) return ::symmar::gpu::cudaFailure(symmar_err_, #call); \
  } while (0)

/// Returns the mapped result code when a driver call (through DriverApi) fails.
#define SYMMAR_CU_TRY(call)                                                     \
  do {                                                                          \
    CUresult symmar_res_ = (call);                                              \
    if (symmar_res_ != CUDA_SUCCESS) return ::symmar::gpu::driverFailure(symmar_res_, #call); \
  } while (0)
