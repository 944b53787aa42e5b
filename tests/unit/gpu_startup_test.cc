// The decisions the CUDA backend takes at comm creation, tested without a GPU: which start-up
// probes run and in which order, the co-residency cap, programmatic dependent launch and the NCCL
// communicator, and how a peer's link is classified from what CUDA and NVML say.
#include <gtest/gtest.h>

#include <climits>
#include <vector>

#include "core/schedule.h"
#include "gpu/nvml.h"
#include "gpu/peer_probe.h"
#include "gpu/startup_policy.h"

using namespace symmar;
using namespace symmar::gpu;

namespace {

using Probes = std::vector<StartupProbe>;
constexpr StartupProbe kP2p = StartupProbe::kPeerAccess;
constexpr StartupProbe kCoSched = StartupProbe::kCoScheduling;

ProbeFacts facts(symmarLink_t link, bool devices_repeat, P2pMode p2p = kP2pProbe) {
  ProbeFacts f;
  f.p2p = p2p;
  f.have_heap = true;
  f.devices_repeat = devices_repeat;
  f.link = link;
  f.peer_access = link != symmarLinkPcieNoP2P && link != symmarLinkUnknown;
  f.host_staged = link == symmarLinkPcieNoP2P;
  return f;
}

CudaPeerView visible(bool access, bool native_atomics) {
  CudaPeerView v;
  v.seen = true;
  v.access = access;
  v.native_atomics = native_atomics;
  return v;
}

}  // namespace

// Ranks sharing a GPU over PCIe: the link is checked before the co-scheduling probe sends its flags
// across it, so a broken link moves the staging to host memory instead of turning the kernels off.
TEST(GpuStartupProbes, PeerAccessIsCheckedBeforeCoScheduling) {
  EXPECT_EQ(planStartupProbes(facts(symmarLinkPcie, true)), (Probes{kP2p, kCoSched}));
  EXPECT_EQ(planStartupProbes(facts(symmarLinkPcie, false)), (Probes{kP2p}));
}

// Host-staged kernels (SYMMAR_P2P=off, or GPUs without peer access) spin on each other like the
// others: ranks sharing a GPU must still prove they run together.
TEST(GpuStartupProbes, HostStagedRanksSharingAGpuAreCheckedForCoScheduling) {
  EXPECT_EQ(planStartupProbes(facts(symmarLinkPcieNoP2P, true)), (Probes{kCoSched}));
  EXPECT_EQ(planStartupProbes(facts(symmarLinkPcieNoP2P, true, kP2pOff)), (Probes{kCoSched}));
  EXPECT_EQ(planStartupProbes(facts(symmarLinkPcieNoP2P, false)), Probes{}) << "one GPU per rank: nothing to meet";
}

TEST(GpuStartupProbes, OnlyWhatTheComingKernelsRelyOn) {
  EXPECT_EQ(planStartupProbes(facts(symmarLinkNvLink, true)), (Probes{kCoSched})) << "NVLink is not probed";
  EXPECT_EQ(planStartupProbes(facts(symmarLinkNvSwitch, false)), Probes{});
  EXPECT_EQ(planStartupProbes(facts(symmarLinkPcie, true, kP2pTrust)), (Probes{kCoSched})) << "SYMMAR_P2P=trust";
  EXPECT_EQ(planStartupProbes(facts(symmarLinkUnknown, true)), Probes{}) << "kernels off: the fallback serves";
  ProbeFacts several_hosts = facts(symmarLinkPcie, true);
  several_hosts.have_heap = false;
  EXPECT_EQ(planStartupProbes(several_hosts), Probes{}) << "no shared heap";
}

// Pairs on one GPU have no link to check; the co-scheduling probe judges whether their kernels meet.
TEST(GpuStartupProbes, PairsOnTheSameGpuAreNotLinkFailures) {
  P2pRow row{};
  row[1] = kP2pTimedOut;  // rank 1 shares this rank's GPU, and its kernel did not run alongside
  row[2] = 12;            // rank 2 is across PCIe and dropped 12 words
  const P2pRow out = crossGpuOutcomes(row, {true, true, false, false});
  EXPECT_EQ(out[1], 0);
  EXPECT_EQ(out[2], 12);
  const BrokenPair b = firstBrokenPair({out, P2pRow{}, P2pRow{}, P2pRow{}});
  EXPECT_EQ(b.rank, 0);
  EXPECT_EQ(b.peer, 2);
}

TEST(GpuStartupPdl, TwoGridsPerRankWhereRanksShareAGpu) {
  EXPECT_TRUE(usePdl(true, 9));
  EXPECT_TRUE(usePdl(true, 10));
  EXPECT_FALSE(usePdl(true, 8)) << "sm_90+ only";
  EXPECT_FALSE(usePdl(false, 9)) << "SYMMAR_PDL=0";
  EXPECT_EQ(residentGridsPerRank(true, true), 2) << "an early next grid could starve a slower rank's current one";
  EXPECT_EQ(residentGridsPerRank(true, false), 1) << "a GPU of its own";
  EXPECT_EQ(residentGridsPerRank(false, true), 1);
  EXPECT_EQ(coResidentBlocks(132, {1}, 8 * residentGridsPerRank(true, true), sched::kMaxBlocks), 8)
      << "8 ranks on an H100/H200 with PDL: 132 / 16";
}

// Ranks that ask for different caps or row spreads (one SYMMAR_FUSED_ROW_PARTS=1, others the
// default) all launch with the smallest of each; out-of-range asks are clamped before they travel.
TEST(GpuStartupBlocks, EveryRankAgreesOnTheSmallestCapAndRowSpread) {
  const GridLimits g = agreedGridLimits({gridLimitsWord({33, 8}), gridLimitsWord({64, 1}), gridLimitsWord({40, 4})});
  EXPECT_EQ(g.blocks, 33);
  EXPECT_EQ(g.row_parts, 1);
  const GridLimits same = agreedGridLimits({gridLimitsWord({64, 8}), gridLimitsWord({64, 8})});
  EXPECT_EQ(same.blocks, 64);
  EXPECT_EQ(same.row_parts, 8);
  const GridLimits clamped = agreedGridLimits({gridLimitsWord({1000, 99}), gridLimitsWord({0, 0})});
  EXPECT_EQ(clamped.blocks, 1);
  EXPECT_EQ(clamped.row_parts, 1);
  EXPECT_EQ(agreedGridLimits({gridLimitsWord({1000, 99})}).blocks, sched::kMaxBlocks);
  EXPECT_EQ(agreedGridLimits({gridLimitsWord({1000, 99})}).row_parts, 8);
  // Words as a broken peer might send them (not from gridLimitsWord): decoded into range.
  for (const int32_t word : {0, -1, -16 * 40 - 3, 16 * 40, INT32_MIN}) {
    const GridLimits peer = agreedGridLimits({gridLimitsWord({64, 8}), word});
    EXPECT_GE(peer.blocks, 1) << word;
    EXPECT_GE(peer.row_parts, 1) << word;
    EXPECT_LE(peer.row_parts, 8) << word;
  }
}

TEST(GpuStartupBlocks, EveryRanksGridResidentAtOnce) {
  EXPECT_EQ(coResidentBlocks(132, {1, 1, 2}, 1, sched::kMaxBlocks), sched::kMaxBlocks) << "capped";
  EXPECT_EQ(coResidentBlocks(132, {1, 2}, 4, sched::kMaxBlocks), 33) << "the fewest per multiprocessor, shared";
  EXPECT_EQ(coResidentBlocks(132, {2, 1}, 8, sched::kMaxBlocks), 16);
  EXPECT_EQ(coResidentBlocks(4, {1}, 8, sched::kMaxBlocks), 1) << "never an empty grid";
  EXPECT_EQ(coResidentBlocks(132, {0, 3}, 4, sched::kMaxBlocks), 33) << "a kernel answering 0 counts as 1";
}

// No kernel image for this GPU: no occupancy answered. The cap must still be a sane number (the
// kernels are off then anyway), computed without overflow.
TEST(GpuStartupBlocks, NoOccupancyAnswerAndHugeAnswersStayInRange) {
  EXPECT_EQ(coResidentBlocks(132, {}, 1, sched::kMaxBlocks), sched::kMaxBlocks);
  EXPECT_EQ(coResidentBlocks(132, {}, 8, sched::kMaxBlocks), 16) << "one block per multiprocessor assumed";
  EXPECT_EQ(coResidentBlocks(INT_MAX, {INT_MAX}, 1, sched::kMaxBlocks), sched::kMaxBlocks);
  EXPECT_EQ(coResidentBlocks(0, {}, 0, sched::kMaxBlocks), 1);
}

TEST(GpuStartupNccl, OwnCommunicatorOnlyWhereItServes) {
  EXPECT_TRUE(wantOwnNccl(false, false));
  EXPECT_FALSE(wantOwnNccl(false, true)) << "NCCL refuses ranks sharing a GPU";
  EXPECT_FALSE(wantOwnNccl(true, false)) << "a hierarchy's host stage: the whole comm's communicator serves";
}

// A visible peer: CUDA's peer access says whether there is a link, NVML says whether it is NVLink.
// A PCIe pair that reports native P2P atomics (some workstation boards do) stays PCIe.
TEST(GpuStartupLink, NvLinkComesFromNvml) {
  EXPECT_EQ(chooseLink(false, visible(true, true), kLinkPcie), kLinkPcie);
  EXPECT_EQ(chooseLink(false, visible(true, false), kLinkNvLink), kLinkNvLink);
  EXPECT_EQ(chooseLink(false, visible(true, false), kLinkPcie), kLinkPcie);
  EXPECT_EQ(chooseLink(false, visible(true, true), kLinkNone), kLinkPcie) << "CUDA maps it, NVML reports no NVLink";
  EXPECT_EQ(chooseLink(false, visible(false, true), kLinkNvLink), kLinkNone) << "this process cannot map the peer";
}

TEST(GpuStartupLink, NativeAtomicsOnlyWithoutNvml) {
  EXPECT_EQ(chooseLink(false, visible(true, true), kLinkNotSeen), kLinkNvLink);
  EXPECT_EQ(chooseLink(false, visible(true, false), kLinkNotSeen), kLinkPcie);
  EXPECT_EQ(chooseLink(false, visible(false, false), kLinkNotSeen), kLinkNone);
  EXPECT_STREQ(peerLinkName(kLinkNvLink), "nvlink");
  EXPECT_STREQ(peerLinkName(kLinkPcie), "pcie");
  EXPECT_STREQ(peerLinkName(kLinkNotSeen), "not seen");
}
