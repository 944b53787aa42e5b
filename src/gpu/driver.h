// CUDA driver functions reached without linking libcuda: each is looked up once through
// cudaGetDriverEntryPointByVersion (static cudart), so the library loads on machines without a
// driver and simply reports the GPU backend as unusable there. <cuda.h> supplies types only.
#pragma once
#include <cuda.h>

namespace symmar {
namespace gpu {

// X(name, required): required functions gate the whole backend; optional ones (multicast) only
// gate the feature that needs them.
// (name, required, ABI version): each entry point is asked for at the CUDA version where its
// current ABI appeared, not at the toolkit's own version, so a build still resolves every entry point
// on an older driver of the same major version (a 12.x build on a 12.0 driver, a 13.x build on a
// 13.0 one). It cannot reach across major versions: the static runtime of a CUDA 13 build itself
// needs an R580 or newer driver. The VMM calls have had this ABI since 10.2; multicast arrived in
// 12.1 (on a 12.0 driver the comm runs without it).
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
  X(cuMulticastGetGranularity, false, 12010)

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

/// Text of a driver result ("CUDA_ERROR_OUT_OF_MEMORY: out of memory"); never null.
const char* driverErrorText(CUresult res);

}  // namespace gpu
}  // namespace symmar
