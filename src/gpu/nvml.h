// How GPUs are linked, from NVML. With one visible GPU per process (the usual launch:
// CUDA_VISIBLE_DEVICES set per rank) CUDA numbers only its own GPU, so it cannot say how a peer's GPU
// is reached; NVML sees every GPU of the machine by PCI bus id whatever CUDA_VISIBLE_DEVICES says.
// NVML also knows which pairs NVLink joins, which CUDA does not say directly.
// libnvidia-ml.so.1 is loaded at run time (it ships with the driver).
#pragma once
#include "gpu/topology.h"

namespace symmar {
namespace gpu {

/// NVML's answer for the path between the GPUs at two PCI bus ids ("0000:1b:00.0"): kLinkNvLink
/// (peer reads and NVLink both reported OK), kLinkPcie (peer reads OK, no NVLink), kLinkNone (no
/// peer reads), or kLinkNotSeen when NVML is missing or knows neither bus id.
PeerLink nvmlLinkBetween(const char* bus_a, const char* bus_b);

/// What CUDA in this process says about a peer's GPU.
struct CudaPeerView {
  bool seen = false;            ///< the peer's GPU is visible here
  bool access = false;          ///< cudaDevP2PAttrAccessSupported
  bool native_atomics = false;  ///< cudaDevP2PAttrNativeAtomicSupported
};

/// How this rank reaches a peer's GPU (pure; unit-tested):
///  - its own GPU when the UUIDs match;
///  - NVML's answer when CUDA cannot see the peer's GPU;
///  - otherwise CUDA's peer access says whether there is a link at all (it is what this process
///    maps), and NVML's NVLink report says which kind. Only without NVML do native P2P atomics
///    stand in: NVLink has them, and most PCIe peer links do not, but some PCIe pairs report them.
PeerLink chooseLink(bool same_gpu, const CudaPeerView& cuda, PeerLink nvml_answer);

/// "not seen", "none", "pcie", "nvlink" or "same GPU" (logs).
const char* peerLinkName(PeerLink link);

}  // namespace gpu
}  // namespace symmar
