// Topology probe of a CUDA comm: compute capability, how the ranks' GPUs are linked, whether every
// rank can join a multicast object, and how many ranks share each GPU (co-residency).
#pragma once
#include <cstdint>
#include <vector>

#include "core/backend.h"

namespace symmar {
namespace gpu {

/// What each rank publishes about itself.
struct RankInfo {
  char bus_id[32];        ///< PCI bus id of the rank's GPU ("0000:1b:00.0")
  unsigned char uuid[16];  ///< identifies a GPU across processes and CUDA_VISIBLE_DEVICES
  uint64_t host_hash;     ///< ranks share memory only within one host
  int32_t cc_major;
  int32_t cc_minor;
  int32_t multicast;      ///< CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED
  int32_t worst_link;     ///< worst PeerLink this rank measured to a peer it can see (kLinkNotSeen if none)
};

/// Link classes from a rank's point of view, ordered worst to best.
enum PeerLink : int32_t { kLinkNotSeen = 0, kLinkNone = 1, kLinkPcie = 2, kLinkNvLink = 3, kLinkSameGpu = 4 };

struct Topology {
  symmarTopology_t topo{};
  std::vector<RankInfo> ranks;
  bool all_local = false;      ///< every rank on this host: memory can be shared
  bool peer_access = false;    ///< symmetric kernels can run (every pair can load from the other)
  bool host_staged = false;    ///< ...through pinned host memory: the GPUs have no peer access
  bool devices_repeat = false;  ///< some GPU hosts more than one rank
  int ranks_on_my_device = 1;
};

/// Pure: derives the comm-wide topology from every rank's record in out->ranks (worst_link filled
/// in), as seen by `rank`. Every rank derives the same link, multicast and peer-access answer.
void classifyTopology(int rank, Topology* out);

/// Collective. Fills *out (and the symmarTopology_t the comm reports). Multicast here means every
/// rank's device supports it and no GPU repeats; whether the object can really be built is decided
/// later, when the heap binds it.
symmarResult_t probeTopology(const BackendContext& ctx, int device, Topology* out);

}  // namespace gpu
}  // namespace symmar
