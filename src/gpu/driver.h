// CUDA driver functions reached without linking libcuda: each is looked up once through
// cudaGetDriverEntryPointByVersion (static cudart), so the library loads on machines without a
// driver and simply reports the GPU backend as unusable there. <cuda.h> supplies types only.
#pragma once
#include <cuda.h>
#include <cuda_runtime_api.h>

namespace symmar {
namespace gpu {

// X(name, required): required functions gate the whole backend; optional ones (multicast) only
// gate the feature that needs them.
// (name, required, ABI version): each entry point is asked for at the CUDA version where its
// current ABI appeared, not at the toolkit's own version, so a build still resolves every entry point
// on an older driver of the same major version (a 12.x build on a 12.0 driver, a 13.x build on a
// 13.0 one). It cannot reach across major versions: the static runtime of a CUDA 13 build itself
// needs an R580 or newer driver. The VMM calls have had this ABI since 10.2; multicast arrived in
// 12.1 (on a 12.0 driver the comm runs without it); explicit kernel loading in 12.4 (before it, a
// kernel attribute query that needs the loaded kernel loads it).
#define SYMMAR_DRIVER_FUNCTIONS(X)                 \
  X(cuGetErrorString, true, 12000)                 \
  X(cuDeviceGet, true, 12000)                      \
  X(cuDeviceGetAttribute, true, 12000)             \
  X(cuMemCreate, true, 12000)                      \
  X(cuMemRelease, true, 12000)                     \
  X(cuMemMap, true, 12000)                         \
  X(cuMemUnmap, true, 12000)                       \
  X(cuMemAddressReserve, true, 12000)              \
  X(cuMemAddressFree, true, 12000)                 \
  X(cuMemSetAccess, true, 12000)                   \
  X(cuMemGetAllocationGranularity, true, 12000)    \
  X(cuMemExportToShareableHandle, true, 12000)     \
  X(cuMemImportFromShareableHandle, true, 12000)   \
  X(cuMulticastCreate, false, 12010)               \
  X(cuMulticastAddDevice, false, 12010)            \
  X(cuMulticastBindMem, false, 12010)              \
  X(cuMulticastUnbind, false, 12010)               \
  X(cuMulticastGetGranularity, false, 12010)       \
  X(cuFuncIsLoaded, false, 12040)                  \
  X(cuFuncLoad, false, 12040)

struct DriverApi {
#define SYMMAR_DRIVER_MEMBER(name, required, version) decltype(&::name) name = nullptr;
  SYMMAR_DRIVER_FUNCTIONS(SYMMAR_DRIVER_MEMBER)
#undef SYMMAR_DRIVER_MEMBER
  /// Every multicast entry point resolved (the driver may still refuse multicast at run time).
  bool has_multicast = false;
};

/// The resolved driver API, or nullptr when the runtime cannot reach a driver or a required
/// function is missing; then *why (if non-null) says which. Resolved once per process.
const DriverApi* driverApi(const char** why = nullptr);

/// Loads kernel (a __global__ function's host-side address) into the current context now. Under
/// lazy loading (the default since CUDA 12.2) a kernel is otherwise loaded at its first launch, and
/// that load may wait for the context's running kernels: where those spin until this rank's kernel
/// arrives (ranks sharing a GPU as threads), nothing progresses until their timeout. Uses cuFuncLoad
/// (12.4 drivers and newer), else an attribute query that needs the loaded kernel.
cudaError_t loadKernelNow(const void* kernel);

/// Whether kernel is loaded in the current context: 1 loaded, 0 not, -1 unknown (a driver before
/// 12.4, or a failed query).
int kernelLoaded(const void* kernel);

/// Text of a driver result ("CUDA_ERROR_OUT_OF_MEMORY: out of memory"); never null.
const char* driverErrorText(CUresult res);

}  // namespace gpu
}  // namespace symmar
