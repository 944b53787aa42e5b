#include "gpu/nvml.h"

#include <dlfcn.h>

#include <mutex>

#include "core/log.h"

namespace symmar {
namespace gpu {
namespace {

// The few NVML declarations needed (values from nvml.h, stable across NVML versions).
using NvmlDevice = void*;
constexpr int kNvmlSuccess = 0;
constexpr int kCapsRead = 0;    // NVML_P2P_CAPS_INDEX_READ
constexpr int kCapsNvLink = 2;  // NVML_P2P_CAPS_INDEX_NVLINK
constexpr int kP2pOk = 0;       // NVML_P2P_STATUS_OK

struct Nvml {
  int (*init)() = nullptr;
  int (*by_bus_id)(const char*, NvmlDevice*) = nullptr;
  int (*p2p_status)(NvmlDevice, NvmlDevice, int, int*) = nullptr;
  bool ok = false;
};

const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      SYMMAR_INFO(kSubsysGpu, "NVML not available (%s): peers' GPUs invisible to CUDA stay unknown, and NVLink is "
                  "told from PCIe by native P2P atomics", dlerror());
      return;
    }
    n.init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    n.by_bus_id = reinterpret_cast<int (*)(const char*, NvmlDevice*)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.p2p_status = reinterpret_cast<int (*)(NvmlDevice, NvmlDevice, int, int*)>(dlsym(lib, "nvmlDeviceGetP2PStatus"));
    n.ok = n.init && n.by_bus_id && n.p2p_status && n.init() == kNvmlSuccess;
    if (!n.ok) {
      SYMMAR_INFO(kSubsysGpu, "NVML could not be initialised: peers' GPUs invisible to CUDA stay unknown, and "
                  "NVLink is told from PCIe by native P2P atomics");
    }
    // The library stays loaded for the process's life, as the driver's own libraries do.
  });
  return n;
}

}  // namespace

PeerLink nvmlLinkBetween(const char* bus_a, const char* bus_b) {
  const Nvml& n = nvml();
  if (!n.ok) return kLinkNotSeen;
  NvmlDevice a = nullptr;
  NvmlDevice b = nullptr;
  if (n.by_bus_id(bus_a, &a) != kNvmlSuccess || n.by_bus_id(bus_b, &b) != kNvmlSuccess) return kLinkNotSeen;
  int read = -1;
  int nvlink = -1;
  if (n.p2p_status(a, b, kCapsRead, &read) != kNvmlSuccess || read != kP2pOk) return kLinkNone;
  if (n.p2p_status(a, b, kCapsNvLink, &nvlink) == kNvmlSuccess && nvlink == kP2pOk) return kLinkNvLink;
  return kLinkPcie;
}

PeerLink chooseLink(bool same_gpu, const CudaPeerView& cuda, PeerLink nvml_answer) {
  if (same_gpu) return kLinkSameGpu;
  if (!cuda.seen) return nvml_answer;
  if (!cuda.access) return kLinkNone;
  if (nvml_answer != kLinkNotSeen) return nvml_answer == kLinkNvLink ? kLinkNvLink : kLinkPcie;
  return cuda.native_atomics ? kLinkNvLink : kLinkPcie;
}

const char* peerLinkName(PeerLink link) {
  switch (link) {
    case kLinkNone:
      return "none";
    case kLinkPcie:
      return "pcie";
    case kLinkNvLink:
      return "nvlink";
    case kLinkSameGpu:
      return "same GPU";
    case kLinkNotSeen:
    default:
      return "not seen";
  }
}

}  // namespace gpu
}  // namespace symmar
