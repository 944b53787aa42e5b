// Links between GPUs that CUDA in this process cannot see. With one visible GPU per process (the
// usual launch: CUDA_VISIBLE_DEVICES set per rank) CUDA numbers only its own GPU, so it cannot say
// how a peer's GPU is reached; NVML sees every GPU of the machine by PCI bus id whatever
// CUDA_VISIBLE_DEVICES says. libnvidia-ml.so.1 is loaded at run time (it ships with the driver).
#pragma once
#include "gpu/topology.h"

namespace symmar {
namespace gpu {

/// NVML's answer for the path between the GPUs at two PCI bus ids ("0000:1b:00.0"): kLinkNvLink
/// (peer reads and NVLink both reported OK), kLinkPcie (peer reads OK, no NVLink), kLinkNone (no
/// peer reads), or kLinkNotSeen when NVML is missing or knows neither bus id.
PeerLink nvmlLinkBetween(const char* bus_a, const char* bus_b);

/// How this rank reaches a peer's GPU: its own GPU when the UUIDs match, else what CUDA says
/// when the peer's GPU is visible here, else what NVML says (pure; unit-tested).
PeerLink chooseLink(bool same_gpu, PeerLink cuda_answer, PeerLink nvml_answer);

}  // namespace gpu
}  // namespace symmar
