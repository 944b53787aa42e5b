#include "gpu/topology.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "core/error.h"
#include "core/log.h"
#include "core/schedule.h"
#include "gpu/cuda_check.h"
#include "gpu/driver.h"
#include "gpu/nvml.h"

namespace symmar {
namespace gpu {
namespace {

/// What CUDA in this process says about a peer's GPU (seen false when that GPU is not visible
/// here, CUDA_VISIBLE_DEVICES).
CudaPeerView cudaPeerView(int device, const RankInfo& peer) {
  CudaPeerView view;
  int peer_dev = -1;
  if (cudaQuiet(cudaDeviceGetByPCIBusId(&peer_dev, peer.bus_id)) != cudaSuccess) return view;
  view.seen = true;
  int access = 0;
  int atomics = 0;
  if (cudaQuiet(cudaDeviceGetP2PAttribute(&access, cudaDevP2PAttrAccessSupported, device, peer_dev)) != cudaSuccess) {
    return view;  // no answer: no peer access
  }
  if (cudaQuiet(cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, device, peer_dev)) !=
      cudaSuccess) {
    atomics = 0;
  }
  view.access = access != 0;
  view.native_atomics = atomics != 0;
  return view;
}

/// How this rank reaches the GPU of the comm's rank `r`, by UUID and PCI bus id (never by ordinal):
/// chooseLink over what CUDA and NVML each say, both logged per pair.
PeerLink linkTo(int device, const RankInfo& self, int r, const RankInfo& peer) {
  if (std::memcmp(self.uuid, peer.uuid, sizeof(self.uuid)) == 0) return kLinkSameGpu;
  const CudaPeerView cuda = cudaPeerView(device, peer);
  const PeerLink nvml = nvmlLinkBetween(self.bus_id, peer.bus_id);
  const PeerLink link = chooseLink(false, cuda, nvml);
  SYMMAR_INFO(kSubsysGpu, "link to rank %d (GPU %s): CUDA %s, native P2P atomics %s; NVML %s; taken as %s", r,
              peer.bus_id, !cuda.seen ? "does not see it" : cuda.access ? "peer access" : "no peer access",
              !cuda.seen ? "-" : cuda.native_atomics ? "yes" : "no",
              nvml == kLinkNotSeen ? "no answer" : peerLinkName(nvml), peerLinkName(link));
  return link;
}

symmarResult_t describeSelf(int device, RankInfo* info) {
  std::memset(info, 0, sizeof(*info));
  SYMMAR_CUDA_TRY(cudaDeviceGetPCIBusId(info->bus_id, sizeof(info->bus_id), device));
  cudaDeviceProp prop;
  SYMMAR_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  std::memcpy(info->uuid, prop.uuid.bytes, sizeof(info->uuid));
  info->cc_major = prop.major;
  info->cc_minor = prop.minor;
  info->host_hash = selfIdentity().host_hash;
  const DriverApi* drv = driverApi();
  CUdevice cu_dev = 0;
  int mc = 0;
  if (drv && drv->has_multicast && drv->cuDeviceGet(&cu_dev, device) == CUDA_SUCCESS &&
      drv->cuDeviceGetAttribute(&mc, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, cu_dev) == CUDA_SUCCESS) {
    info->multicast = mc ? 1 : 0;
  }
  return symmarSuccess;
}

}  // namespace

void classifyTopology(int rank, Topology* out) {
  const int world = static_cast<int>(out->ranks.size());
  const RankInfo& self = out->ranks[static_cast<size_t>(rank)];
  int32_t link = kLinkNotSeen;
  bool multicast_all = true;
  out->all_local = true;
  out->devices_repeat = false;
  out->ranks_on_my_device = 0;
  for (int r = 0; r < world; ++r) {
    const RankInfo& info = out->ranks[static_cast<size_t>(r)];
    out->all_local = out->all_local && info.host_hash == self.host_hash;
    if (std::memcmp(info.uuid, self.uuid, sizeof(self.uuid)) == 0) ++out->ranks_on_my_device;
    if (info.worst_link != kLinkNotSeen) link = link == kLinkNotSeen ? info.worst_link : std::min(link, info.worst_link);
    multicast_all = multicast_all && info.multicast;
    for (int q = 0; q < r; ++q) {
      if (std::memcmp(out->ranks[static_cast<size_t>(q)].uuid, info.uuid, sizeof(info.uuid)) == 0) {
        out->devices_repeat = true;
      }
    }
  }
  if (world == 1) link = kLinkSameGpu;

  symmarTopology_t& t = out->topo;
  t.cc_major = self.cc_major;
  t.cc_minor = self.cc_minor;
  t.world_size = world;
  t.multicast = 0;
  out->peer_access = out->all_local && link >= kLinkPcie && world <= sched::kMaxRanks;
  // GPUs on one host that cannot reach each other still share the host's memory: the kernels run
  // with their staging there (link pcie-nop2p).
  out->host_staged = out->all_local && link == kLinkNone && world <= sched::kMaxRanks;
  if (!out->all_local) {
    SYMMAR_WARN(kSubsysGpu, "ranks span several hosts: symmetric kernels disabled, only the NCCL fallback remains");
  } else if (world > sched::kMaxRanks) {
    SYMMAR_WARN(kSubsysGpu, "world size %d exceeds the %d ranks the symmetric kernels serve: NCCL only", world,
                sched::kMaxRanks);
  } else if (link == kLinkNone) {
    SYMMAR_INFO(kSubsysGpu, "no peer access between some GPUs: the kernels stage through pinned host memory");
  } else if (link == kLinkNotSeen) {
    SYMMAR_WARN(kSubsysGpu, "no rank sees its peers' GPUs (not visible to CUDA, CUDA_VISIBLE_DEVICES, and NVML "
                "(libnvidia-ml.so.1) unavailable): symmetric kernels disabled");
  }
  if (out->host_staged) {
    t.link = symmarLinkPcieNoP2P;
  } else if (!out->peer_access) {
    t.link = symmarLinkUnknown;
  } else if (link == kLinkPcie) {
    t.link = symmarLinkPcie;
  } else if (multicast_all && !out->devices_repeat && world > 1) {
    t.link = symmarLinkNvSwitch;  // multicast exists only behind an NVSwitch
    t.multicast = 1;
  } else {
    // Direct NVLink, or several ranks on one GPU (local memory: the fastest "link" there is).
    t.link = symmarLinkNvLink;
  }
}

symmarResult_t probeTopology(const BackendContext& ctx, int device, Topology* out) {
  Bootstrap& bs = *ctx.bootstrap;
  const int world = ctx.nranks;
  const int rank = ctx.rank;
  RankInfo self;
  SYMMAR_CHECK(describeSelf(device, &self));
  // First round: identities, so every rank can classify its links to the others.
  SYMMAR_CHECK(gatherAll(bs, self, &out->ranks));
  // A peer's bus id is text from the wire: terminate it before any C string call reads it.
  for (RankInfo& peer : out->ranks) peer.bus_id[sizeof(peer.bus_id) - 1] = '\0';
  int32_t worst = kLinkNotSeen;
  for (int r = 0; r < world; ++r) {
    const RankInfo& peer = out->ranks[static_cast<size_t>(r)];
    if (r == rank || peer.host_hash != self.host_hash) continue;
    const PeerLink l = linkTo(device, self, ctx.commRank(r), peer);  // r only names the peer in the log
    if (l != kLinkNotSeen) worst = worst == kLinkNotSeen ? l : std::min<int32_t>(worst, l);
  }
  // Second round: every rank's worst link, so all ranks derive the same comm-wide answer.
  std::vector<int32_t> worst_all;
  SYMMAR_CHECK(gatherAll(bs, worst, &worst_all));
  for (int r = 0; r < world; ++r) out->ranks[static_cast<size_t>(r)].worst_link = worst_all[static_cast<size_t>(r)];
  classifyTopology(rank, out);
  const symmarTopology_t& t = out->topo;
  SYMMAR_INFO(kSubsysGpu, "topology: sm%d%d link %d world %d multicast-capable %d ranks on my GPU %d", t.cc_major,
              t.cc_minor, static_cast<int>(t.link), world, t.multicast, out->ranks_on_my_device);
  return symmarSuccess;
}

}  // namespace gpu
}  // namespace symmar
