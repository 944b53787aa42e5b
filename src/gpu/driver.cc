#include "gpu/driver.h"

#include <cuda_runtime_api.h>

#include <mutex>
#include <string>

#include "core/log.h"
#include "gpu/cuda_check.h"

namespace symmar {
namespace gpu {
namespace {

struct Loaded {
  DriverApi api;
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded l;
  int count = 0;
  cudaError_t err = cudaQuiet(cudaGetDeviceCount(&count));
  if (err != cudaSuccess) {
    l.why = std::string("no usable CUDA driver: ") + cudaGetErrorString(err);
    return l;
  }
  int driver = 0;
  cudaDriverGetVersion(&driver);
  SYMMAR_INFO(kSubsysGpu, "CUDA driver %d.%d, toolkit %d.%d", driver / 1000, driver % 1000 / 10, CUDART_VERSION / 1000,
              CUDART_VERSION % 1000 / 10);
  bool required_ok = true;
#define SYMMAR_DRIVER_LOAD(name, required, version)                                                         \
  {                                                                                                          \
    void* fn = nullptr;                                                                                      \
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;                                  \
    cudaError_t e = cudaQuiet(cudaGetDriverEntryPointByVersion(#name, &fn, version, cudaEnableDefault, &q)); \
    if (e == cudaSuccess && q == cudaDriverEntryPointSuccess && fn) {                                        \
      l.api.name = reinterpret_cast<decltype(l.api.name)>(fn);                                               \
    } else if (required) {                                                                                   \
      if (required_ok) l.why = "the CUDA driver lacks " #name;                                               \
      required_ok = false;                                                                                   \
    }                                                                                                        \
  }
  SYMMAR_DRIVER_FUNCTIONS(SYMMAR_DRIVER_LOAD)
#undef SYMMAR_DRIVER_LOAD
  l.api.has_multicast = l.api.cuMulticastCreate && l.api.cuMulticastAddDevice && l.api.cuMulticastBindMem &&
                        l.api.cuMulticastUnbind && l.api.cuMulticastGetGranularity;
  l.ok = required_ok;
  return l;
}

}  // namespace

const DriverApi* driverApi(const char** why) {
  static std::once_flag once;
  static Loaded* loaded = nullptr;
  std::call_once(once, [] { loaded = new Loaded(load()); });
  if (!loaded->ok) {
    if (why) *why = loaded->why.c_str();
    return nullptr;
  }
  return &loaded->api;
}

cudaError_t loadKernelNow(const void* kernel) {
  cudaFunction_t fn = nullptr;
  const cudaError_t err = cudaQuiet(cudaGetFuncBySymbol(&fn, kernel));
  if (err != cudaSuccess) return err;
  const DriverApi* api = driverApi();
  if (api && api->cuFuncLoad) {
    const CUresult res = api->cuFuncLoad(reinterpret_cast<CUfunction>(fn));
    return res == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidDeviceFunction;
  }
  cudaFuncAttributes attr{};  // its maxThreadsPerBlock needs the loaded kernel (cuFuncGetAttribute)
  return cudaQuiet(cudaFuncGetAttributes(&attr, kernel));
}

int kernelLoaded(const void* kernel) {
  const DriverApi* api = driverApi();
  cudaFunction_t fn = nullptr;
  CUfunctionLoadingState state = CU_FUNCTION_LOADING_STATE_MAX;
  if (!api || !api->cuFuncIsLoaded || cudaQuiet(cudaGetFuncBySymbol(&fn, kernel)) != cudaSuccess ||
      api->cuFuncIsLoaded(&state, reinterpret_cast<CUfunction>(fn)) != CUDA_SUCCESS) {
    return -1;
  }
  return state == CU_FUNCTION_LOADING_STATE_LOADED ? 1 : 0;
}

const char* driverErrorText(CUresult res) {
  const DriverApi* api = driverApi();
  const char* text = nullptr;
  if (api && api->cuGetErrorString(res, &text) == CUDA_SUCCESS && text) return text;
  return "unknown CUDA driver error";
}

}  // namespace gpu
}  // namespace symmar
