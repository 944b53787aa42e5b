// The CPU-side parts of the CUDA backend, tested without a GPU: topology classification from the
// ranks' records, heap layout bookkeeping, and the error paths on a machine without a driver.
#include <gtest/gtest.h>

#include <cstring>

#include "core/schedule.h"
#include "gpu/cuda_backend.h"
#include "gpu/sym_heap.h"
#include "gpu/topology.h"
#include "symmar/symmar.h"

using namespace symmar;
using namespace symmar::gpu;

namespace {

RankInfo rankInfo(int gpu, uint64_t host, int multicast, PeerLink worst, int major = 9, int minor = 0) {
  RankInfo r{};
  snprintf(r.bus_id, sizeof(r.bus_id), "0000:%02x:00.0", gpu);
  r.uuid[0] = static_cast<unsigned char>(gpu + 1);
  r.host_hash = host;
  r.cc_major = major;
  r.cc_minor = minor;
  r.multicast = multicast;
  r.worst_link = worst;
  return r;
}

Topology classify(std::vector<RankInfo> ranks, int rank = 0) {
  Topology t;
  t.ranks = std::move(ranks);
  classifyTopology(rank, &t);
  return t;
}

}  // namespace

TEST(GpuTopology, NvSwitchWithMulticastOnEveryRank) {
  std::vector<RankInfo> r;
  for (int g = 0; g < 8; ++g) r.push_back(rankInfo(g, 7, 1, kLinkNvLink));
  Topology t = classify(r, 3);
  EXPECT_EQ(t.topo.link, symmarLinkNvSwitch);
  EXPECT_EQ(t.topo.multicast, 1);
  EXPECT_EQ(t.topo.world_size, 8);
  EXPECT_EQ(t.topo.cc_major, 9);
  EXPECT_TRUE(t.peer_access);
  EXPECT_FALSE(t.devices_repeat);
  EXPECT_EQ(t.ranks_on_my_device, 1);
}

TEST(GpuTopology, OneRankWithoutMulticastRemovesOnlyMulticast) {
  std::vector<RankInfo> r;
  for (int g = 0; g < 4; ++g) r.push_back(rankInfo(g, 7, g != 2, kLinkNvLink));
  Topology t = classify(r);
  EXPECT_EQ(t.topo.link, symmarLinkNvLink);
  EXPECT_EQ(t.topo.multicast, 0);
  EXPECT_TRUE(t.peer_access) << "the symmetric kernels stay";
}

TEST(GpuTopology, PcieAnywhereMakesThePcieLink) {
  std::vector<RankInfo> r;
  for (int g = 0; g < 4; ++g) r.push_back(rankInfo(g, 7, 0, g == 1 ? kLinkPcie : kLinkNvLink, 12, 0));
  Topology t = classify(r);
  EXPECT_EQ(t.topo.link, symmarLinkPcie);
  EXPECT_EQ(t.topo.cc_major, 12);
  EXPECT_TRUE(t.peer_access);
}

TEST(GpuTopology, NoPeerAccessSeveralHostsOrTooManyRanksLeaveOnlyTheFallback) {
  std::vector<RankInfo> none = {rankInfo(0, 7, 0, kLinkNone), rankInfo(1, 7, 0, kLinkNone)};
  EXPECT_EQ(classify(none).topo.link, symmarLinkUnknown);
  EXPECT_FALSE(classify(none).peer_access);
  std::vector<RankInfo> hosts = {rankInfo(0, 7, 1, kLinkNvLink), rankInfo(0, 8, 1, kLinkNvLink)};
  Topology t = classify(hosts);
  EXPECT_FALSE(t.all_local);
  EXPECT_EQ(t.topo.link, symmarLinkUnknown);
  std::vector<RankInfo> many;
  for (int g = 0; g < 9; ++g) many.push_back(rankInfo(g, 7, 1, kLinkNvLink));
  EXPECT_EQ(classify(many).topo.link, symmarLinkUnknown);
  EXPECT_FALSE(classify(many).peer_access);
}

TEST(GpuTopology, RanksSharingOneGpu) {
  std::vector<RankInfo> r;
  for (int i = 0; i < 4; ++i) r.push_back(rankInfo(0, 7, 1, kLinkSameGpu));
  Topology t = classify(r, 2);
  EXPECT_TRUE(t.devices_repeat);
  EXPECT_EQ(t.ranks_on_my_device, 4);
  EXPECT_EQ(t.topo.link, symmarLinkNvLink) << "local memory, no multicast object across one GPU";
  EXPECT_EQ(t.topo.multicast, 0);
  Topology one = classify({rankInfo(0, 7, 1, kLinkNotSeen)});
  EXPECT_EQ(one.topo.world_size, 1);
  EXPECT_TRUE(one.peer_access);
}

TEST(GpuHeap, LayoutRegionsAreAlignedAndDisjoint) {
  for (size_t staging : {size_t(64) << 10, size_t(8) << 20, (size_t(8) << 20) + 100}) {
    for (size_t heap : {size_t(0), size_t(1) << 20, size_t(256) << 20}) {
      HeapLayout l = makeLayout(staging, heap);
      EXPECT_EQ(l.pad_off, 0u);
      EXPECT_GE(l.staging_off, sched::kSignalPadBytes);
      EXPECT_EQ(l.staging_off % 256, 0u);
      EXPECT_EQ(l.heap_off % 256, 0u);
      EXPECT_GE(l.heap_off, l.staging_off + staging);
      EXPECT_EQ(l.total, l.heap_off + heap);
    }
  }
}

TEST(GpuNoDriver, GpuCommFailsWithCudaErrorAndAutoFallsBackToHost) {
  int device = 123;
  if (cudaUsable(&device)) GTEST_SKIP() << "a CUDA driver and device are present: the no-driver path cannot be tested";
  EXPECT_EQ(device, -1);
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = 0;
  symmarComm_t comm = nullptr;
  EXPECT_EQ(symmarCommInitAll(&comm, 1, nullptr, &cfg), symmarCudaError);
  std::string err = symmarGetLastError(nullptr);
  EXPECT_TRUE(err.find("driver") != std::string::npos || err.find("CUDA") != std::string::npos) << err;
  EXPECT_EQ(comm, nullptr);
  cfg.device = SYMMAR_DEVICE_AUTO;
  ASSERT_EQ(symmarCommInitAll(&comm, 1, nullptr, &cfg), symmarSuccess) << symmarGetLastError(nullptr);
  symmarTopology_t topo;
  ASSERT_EQ(symmarCommTopology(comm, &topo), symmarSuccess);
  EXPECT_EQ(topo.link, symmarLinkHostMemory) << "AUTO picks the host backend without a driver";
  symmarCommDestroy(comm);
}
