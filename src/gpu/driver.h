// CUDA driver functions reached without linking libcuda: each is looked up once through
// cudaGetDriverEntryPointByVersion (static cudart), so the library loads on machines without a
// driver and simply reports the GPU backend as unusable there. <cuda.h> supplies types only.
#pragma once
#include <cuda.h>

namespace symmar {
namespace gpu {

// X(name, required): required functions gate the whole backend; optional ones (multicast) only
// gate the feature that needs them.
#define SYMMAR_DRIVER_FUNCTIONS(X)         \
  X(cuGetErrorString, true)                \
  X(cuDeviceGet, true)                     \
  X(cuDeviceGetAttribute, true)            \
  X(cuMemCreate, true)                     \
  X(cuMemRelease, true)                    \
  X(cuMemMap, true)                        \
  X(cuMemUnmap, true)                      \
  X(cuMemAddressReserve, true)             \
  X(cuMemAddressFree, true)                \
  X(cuMemSetAccess, true)                  \
  X(cuMemGetAllocationGranularity, true)   \
  X(cuMemExportToShareableHandle, true)    \
  X(cuMemImportFromShareableHandle, true)  \
  X(cuMulticastCreate, false)              \
  X(cuMulticastAddDevice, false)           \
  X(cuMulticastBindMem, false)             \
  X(cuMulticastUnbind, false)              \
  X(cuMulticastGetGranularity, false)

struct DriverApi {
#define SYMMAR_DRIVER_MEMBER(name, required) decltype(&::name) name = nullptr;
  SYMMAR_DRIVER_FUNCTIONS(SYMMAR_DRIVER_MEMBER)
#undef SYMMAR_DRIVER_MEMBER
  /// Every multicast entry point resolved (the driver may still refuse multicast at run time).
  bool has_multicast = false;
};

/// The resolved driver API, or nullptr when the runtime cannot reach a driver or a required
/// function is missing; then *why (if non-null) says which. Resolved once per process.
const DriverApi* driverApi(const char** why = nullptr);

/// Text of a driver result ("CUDA_ERROR_OUT_OF_MEMORY: out of memory"); never null.
const char* driverErrorText(CUresult res);

}  // namespace gpu
}  // namespace symmar
