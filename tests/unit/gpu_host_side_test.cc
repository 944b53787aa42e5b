// The CPU-side parts of the CUDA backend, tested without a GPU: topology classification from the
// ranks' records, heap layout bookkeeping, and the error paths on a machine without a driver.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/schedule.h"
#include "gpu/gpu_entry.h"
#include "gpu/hier_backend.h"
#include "gpu/kernel_launch.h"
#include "gpu/nvml.h"
#include "gpu/peer_probe.h"
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

// GPUs on one host without peer access share the host's memory: the kernels stage there.
TEST(GpuTopology, NoPeerAccessOnOneHostStagesThroughHostMemory) {
  std::vector<RankInfo> none = {rankInfo(0, 7, 0, kLinkNone), rankInfo(1, 7, 0, kLinkNone)};
  Topology t = classify(none);
  EXPECT_EQ(t.topo.link, symmarLinkPcieNoP2P);
  EXPECT_FALSE(t.peer_access) << "no peer mappings";
  EXPECT_TRUE(t.host_staged);
  EXPECT_EQ(t.topo.multicast, 0);
  std::vector<RankInfo> mixed = {rankInfo(0, 7, 0, kLinkPcie), rankInfo(1, 7, 0, kLinkNone),
                                 rankInfo(2, 7, 0, kLinkPcie)};
  EXPECT_EQ(classify(mixed).topo.link, symmarLinkPcieNoP2P) << "one pair without P2P is enough";
  std::vector<RankInfo> unseen = {rankInfo(0, 7, 0, kLinkNotSeen), rankInfo(1, 7, 0, kLinkNotSeen)};
  EXPECT_EQ(classify(unseen).topo.link, symmarLinkUnknown) << "unknown links are not guessed";
  EXPECT_FALSE(classify(unseen).host_staged);
}

TEST(GpuTopology, SeveralHostsOrTooManyRanksLeaveOnlyTheFallback) {
  std::vector<RankInfo> hosts = {rankInfo(0, 7, 1, kLinkNvLink), rankInfo(0, 8, 1, kLinkNvLink)};
  Topology t = classify(hosts);
  EXPECT_FALSE(t.all_local);
  EXPECT_EQ(t.topo.link, symmarLinkUnknown);
  std::vector<RankInfo> many;
  for (int g = 0; g < 9; ++g) many.push_back(rankInfo(g, 7, 1, kLinkNvLink));
  EXPECT_EQ(classify(many).topo.link, symmarLinkUnknown);
  EXPECT_FALSE(classify(many).peer_access);
  std::vector<RankInfo> many_none;
  for (int g = 0; g < 9; ++g) many_none.push_back(rankInfo(g, 7, 0, kLinkNone));
  EXPECT_FALSE(classify(many_none).host_staged) << "the kernels serve at most 8 ranks";
}

// Across hosts the CUDA backend runs hierarchically only over two hosts of equal size: beyond two,
// NCCL's sums on the local indices' communicators could differ in their order.
TEST(GpuHierarchy, OnlyTwoHostsOfEqualSize) {
  std::string why;
  HostPlacement p;
  p.hosts = 2;
  p.local_size = 8;
  EXPECT_TRUE(gpuHierarchyApplies(p, &why));
  p.hosts = 3;
  EXPECT_FALSE(gpuHierarchyApplies(p, &why));
  EXPECT_NE(why.find("more than two hosts"), std::string::npos) << why;
  p.hosts = 2;
  p.uniform = false;
  EXPECT_FALSE(gpuHierarchyApplies(p, &why));
  p.hosts = 1;
  p.uniform = true;
  EXPECT_FALSE(gpuHierarchyApplies(p, &why));
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
      HeapLayout l = makeLayout(staging, heap, 4);
      EXPECT_EQ(l.staging_off, 0u) << "the multicast object binds the staging buffers from offset 0";
      EXPECT_GE(l.pad_off, staging);
      EXPECT_EQ(l.pad_off % 256, 0u);
      EXPECT_EQ(l.heap_off % 256, 0u);
      EXPECT_GE(l.lamport_off, l.pad_off + kPadBytes);
      EXPECT_EQ(l.lamport_off % 256, 0u);
      EXPECT_EQ(l.lamport_bytes, sched::lamportAreaBytes(4));
      EXPECT_GE(l.heap_off, l.lamport_off + l.lamport_bytes);
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

// The GPU pad is shared by every rank and the kernels: pinned by hand-worked offsets, then checked
// as a property (every flag on a line of its own, failed and probe words after the flags).
TEST(GpuPad, EveryRanksFlagsOnLinesOfTheirOwn) {
  EXPECT_EQ(padFlagOffset(0, 0, sched::kSlotStart), 0u);
  EXPECT_EQ(padFlagOffset(0, 0, sched::kSlotEnd), 128u);
  EXPECT_EQ(padFlagOffset(0, 1, sched::kSlotStart), 256u);
  EXPECT_EQ(padFlagOffset(1, 0, sched::kSlotStart), 16384u) << "rank 1's lines follow rank 0's 64 x 2 lines";
  EXPECT_EQ(padFlagOffset(7, 63, sched::kSlotEnd), 131072u - 128u);
  EXPECT_EQ(padFailedOffset(0), 131072u);
  EXPECT_EQ(padFailedOffset(7), 131072u + 28u);
  EXPECT_EQ(padProbeOffset(0), 131200u);
  EXPECT_EQ(padP2pOffset(0), 131328u);
  EXPECT_EQ(kPadBytes, 131456u);
  std::set<size_t> lines;
  for (int from = 0; from < kMaxRanks; ++from) {
    for (int b = 0; b < sched::kMaxBlocks; ++b) {
      for (int s = 0; s < sched::kBarrierSlots; ++s) {
        const size_t off = padFlagOffset(from, b, s);
        EXPECT_EQ(off % 128, 0u);
        EXPECT_TRUE(lines.insert(off / 128).second) << from << "," << b << "," << s;
        EXPECT_LT(off, padFailedOffset(0));
      }
    }
  }
  EXPECT_LE(padP2pOffset(kMaxRanks - 1) + 4, kPadBytes);
  EXPECT_LE((1 + kMaxRanks) * kP2pProbeBytes, size_t(64) << 10) << "the probe regions fit the smallest staging";
}

TEST(GpuPad, InitialPadHasEveryFlagAtTheStartEpochAndNoFailure) {
  const std::vector<char> pad = initialPad(0xfffffff0u);
  ASSERT_EQ(pad.size(), kPadBytes);
  uint32_t v = 0;
  std::memcpy(&v, pad.data() + padFlagOffset(5, 17, sched::kSlotEnd), 4);
  EXPECT_EQ(v, 0xfffffff0u);
  std::memcpy(&v, pad.data() + padFlagOffset(7, 63, sched::kSlotStart), 4);
  EXPECT_EQ(v, 0xfffffff0u);
  for (int r = 0; r < kMaxRanks; ++r) {
    std::memcpy(&v, pad.data() + padFailedOffset(r), 4);
    EXPECT_EQ(v, 0u);
    std::memcpy(&v, pad.data() + padProbeOffset(r), 4);
    EXPECT_EQ(v, 0u);
  }
}

// One block per 32 KiB of a chunk, at least one per 4 KiB up to 8 blocks, at most the co-residency
// cap: a decode-sized call launches a few blocks instead of the whole cap, and more than one.
TEST(GpuGrid, BlocksFollowTheMessageUpToTheCap) {
  LaunchContext ctx;
  ctx.world = 4;
  ctx.layout = makeLayout(size_t(8) << 20, 0, 4);  // halves of 4 MiB: one chunk up to ~4 MiB
  ctx.max_blocks = 24;
  EXPECT_EQ(gridFor(ctx, 1, symmarFloat32), 1);
  EXPECT_EQ(gridFor(ctx, 1024, symmarFloat32), 1) << "4 KiB";
  EXPECT_EQ(gridFor(ctx, 1025, symmarFloat32), 2);
  EXPECT_EQ(gridFor(ctx, 3584, symmarBfloat16), 2) << "7 KiB: one token of a 3584-wide bf16 model";
  EXPECT_EQ(gridFor(ctx, 7168, symmarBfloat16), 4) << "14 KiB: one token of a 7168-wide bf16 model";
  EXPECT_EQ(gridFor(ctx, 8192, symmarFloat32), 8) << "32 KiB";
  EXPECT_EQ(gridFor(ctx, 65536, symmarFloat16), 8) << "128 KiB";
  EXPECT_EQ(gridFor(ctx, 65536, symmarFloat32), 8) << "256 KiB: 32 KiB a block from here";
  EXPECT_EQ(gridFor(ctx, 65537, symmarFloat32), 9);
  EXPECT_EQ(gridFor(ctx, 7168, symmarBfloat16, symmarAlgoLamport), 4) << "lamport: 4 KiB a block already";
  EXPECT_EQ(gridFor(ctx, size_t(1) << 20, symmarFloat32), 24) << "4 MiB: capped";
  EXPECT_EQ(gridFor(ctx, size_t(1) << 30, symmarFloat32), 24) << "chunked: the chunk sets the grid";
  ctx.max_blocks = 0;
  EXPECT_EQ(gridFor(ctx, size_t(1) << 20, symmarFloat32), 1) << "never an empty grid";
}

// The unfused call's add + norm kernel: a block a row, up to the cap it is given (the co-residency
// cap where ranks share a GPU), never more than kAddRmsNormRowsBlocks, never an empty grid.
TEST(GpuGrid, AddAndNormRowsFollowTheTokensUpToTheCapGiven) {
  AddRmsNormCall call{};
  call.hidden = 8;
  call.dtype = symmarFloat32;
  const auto gridOf = [&](size_t tokens, int cap) {
    call.tokens = tokens;
    int grid = 0;
    makeAddRmsNormRowsArgs(call, nullptr, cap, &grid);
    return grid;
  };
  EXPECT_EQ(gridOf(5, kAddRmsNormRowsBlocks), 5);
  EXPECT_EQ(gridOf(5000, kAddRmsNormRowsBlocks), kAddRmsNormRowsBlocks);
  EXPECT_EQ(gridOf(5000, 16), 16) << "ranks sharing a GPU: the co-residency cap";
  EXPECT_EQ(gridOf(5000, 1 << 20), kAddRmsNormRowsBlocks);
  EXPECT_EQ(gridOf(5, 0), 1) << "never an empty grid";
}

// One visible GPU per process (CUDA_VISIBLE_DEVICES per rank): CUDA cannot see the peer's GPU, and
// the link must come from NVML by PCI bus id instead of dropping the symmetric kernels.
TEST(GpuTopology, PeersInvisibleToCudaAreFoundThroughNvml) {
  const CudaPeerView unseen;
  EXPECT_EQ(chooseLink(false, unseen, kLinkNvLink), kLinkNvLink);
  EXPECT_EQ(chooseLink(false, unseen, kLinkPcie), kLinkPcie);
  EXPECT_EQ(chooseLink(false, unseen, kLinkNone), kLinkNone);
  EXPECT_EQ(chooseLink(false, unseen, kLinkNotSeen), kLinkNotSeen) << "neither knows: unknown stays unknown";
  EXPECT_EQ(chooseLink(true, unseen, kLinkNotSeen), kLinkSameGpu) << "same UUID: the same GPU";
  // And the comm-wide classification then enables the kernels on NVLink.
  Topology t = classify({rankInfo(0, 7, 0, kLinkNvLink), rankInfo(1, 7, 0, kLinkNvLink)});
  EXPECT_TRUE(t.peer_access);
  EXPECT_EQ(t.topo.link, symmarLinkNvLink);
}

// Without NVML (this machine has no driver) the lookup answers "not seen" instead of failing.
TEST(GpuTopology, NvmlMissingAnswersNotSeen) {
  EXPECT_EQ(nvmlLinkBetween("0000:1b:00.0", "0000:1c:00.0"), kLinkNotSeen);
}

// The peer-access verdict from every rank's per-peer outcomes (injected): the first broken pair in
// rank order, described with the usual causes and the NCCL setting.
TEST(GpuPeerProbe, FirstBrokenPairAndItsDescription) {
  std::vector<P2pRow> rows(3, P2pRow{});
  EXPECT_EQ(firstBrokenPair(rows).rank, -1) << "all zero: every pair checked out";
  rows[2][0] = kP2pTimedOut;
  rows[1][2] = 512;
  const BrokenPair b = firstBrokenPair(rows);
  EXPECT_EQ(b.rank, 1);
  EXPECT_EQ(b.peer, 2);
  EXPECT_EQ(b.outcome, 512);
  const std::string text = describeBrokenPair(b);
  EXPECT_NE(text.find("ranks 1 and 2"), std::string::npos) << text;
  EXPECT_NE(text.find("512 wrong"), std::string::npos) << text;
  EXPECT_NE(text.find("IOMMU"), std::string::npos) << text;
  EXPECT_NE(text.find("NCCL_P2P_DISABLE=1"), std::string::npos) << text;
  rows[1][2] = 0;
  EXPECT_NE(describeBrokenPair(firstBrokenPair(rows)).find("never arrived"), std::string::npos);
  rows[2][0] = kP2pTooSlow;
  EXPECT_NE(describeBrokenPair(firstBrokenPair(rows)).find("took more than 2 ms"), std::string::npos);
  rows[0][0] = 99;  // a rank's own column is never a pair
  rows[2][0] = 0;
  EXPECT_EQ(firstBrokenPair(rows).rank, -1);
}

// Every rank applies the most careful mode any rank asks for; a published value that is no mode
// (bytes from a corrupt or hostile peer) must not turn into "trust".
TEST(GpuPeerProbe, AgreedModeIsTheMostCarefulAndBoundsPeersValues) {
  EXPECT_EQ(agreedP2pMode({kP2pTrust, kP2pTrust}), kP2pTrust);
  EXPECT_EQ(agreedP2pMode({kP2pTrust, kP2pProbe, kP2pTrust}), kP2pProbe);
  EXPECT_EQ(agreedP2pMode({kP2pProbe, kP2pOff}), kP2pOff);
  EXPECT_EQ(agreedP2pMode({kP2pTrust, 99}), kP2pOff);
  EXPECT_EQ(agreedP2pMode({kP2pTrust, -5}), kP2pOff);
}

TEST(GpuPeerProbe, ModeFromTheEnvironment) {
  unsetenv("SYMMAR_P2P");
  EXPECT_EQ(p2pModeFromEnv(), kP2pProbe) << "the default";
  setenv("SYMMAR_P2P", "trust", 1);
  EXPECT_EQ(p2pModeFromEnv(), kP2pTrust);
  setenv("SYMMAR_P2P", "off", 1);
  EXPECT_EQ(p2pModeFromEnv(), kP2pOff);
  setenv("SYMMAR_P2P", "sometimes", 1);
  EXPECT_EQ(p2pModeFromEnv(), kP2pProbe) << "unknown text probes";
  unsetenv("SYMMAR_P2P");
}

// The agreement: four ranks (threads over the real TCP bootstrap); only rank 2's probe saw its link
// to rank 1 drop words. Every rank must reach the same verdict, naming that pair.
TEST(GpuPeerProbe, OneRankSeesABrokenPairAndEveryRankAgrees) {
  constexpr int kWorld = 4;
  symmarUniqueId id;
  ASSERT_EQ(makeUniqueId(&id), symmarSuccess);
  std::vector<BrokenPair> verdicts(kWorld);
  std::vector<symmarResult_t> results(kWorld, symmarInternalError);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      std::unique_ptr<Bootstrap> bs;
      results[r] = createTcpBootstrap(id, r, kWorld, 20000, &bs);
      if (results[r] != symmarSuccess) return;
      P2pRow mine{};
      if (r == 2) mine[1] = 37;  // 37 wrong words in what rank 2 exchanged with rank 1
      results[r] = agreePeerProbe(*bs, mine, &verdicts[r]);
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_EQ(results[r], symmarSuccess) << "rank " << r;
    EXPECT_EQ(verdicts[r].rank, 2) << "rank " << r;
    EXPECT_EQ(verdicts[r].peer, 1) << "rank " << r;
    EXPECT_EQ(verdicts[r].outcome, 37) << "rank " << r;
  }
}
