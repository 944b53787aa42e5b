// Planning reduce-scatter and all-gather: each collective has rows of its own, keyed like the
// allreduce's and reached through the same chain (exact -> family -> default), sized by the whole
// buffer; entries without a form of the collective are skipped; SYMMAR_ALGO and SYMMAR_DISABLE
// apply as to an allreduce; a table file's rows for one collective leave the others alone.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/names.h"
#include "plan/planner.h"
#include "plan/table.h"

using namespace symmar;

namespace {

const Collective kScatterGather[] = {Collective::kReduceScatter, Collective::kAllGather};
const symmarLink_t kGpuLinks[] = {symmarLinkNvSwitch, symmarLinkNvLink, symmarLinkPcie, symmarLinkPcieNoP2P};

symmarTopology_t topo(int major, int minor, symmarLink_t link, int world) {
  return symmarTopology_t{major, minor, link, world, 0};
}

TableRow row(Collective coll, std::initializer_list<TableEntry> entries) {
  TableRow r;
  r.coll = coll;
  r.arch = kArchHost;
  r.link = symmarLinkHostMemory;
  r.world = 4;
  for (const TableEntry& e : entries) r.entries[r.num_entries++] = e;
  r.source = "test";
  return r;
}

}  // namespace

TEST(ScatterGatherPlan, EveryKeyResolvesToARowOfItsOwnCollective) {
  const Tables& t = Tables::builtin();
  for (Collective coll : kScatterGather) {
    SCOPED_TRACE(collectiveName(coll));
    for (int world = 1; world <= 16; ++world) {
      const int w = world < 2 ? 2 : (world > 8 ? 8 : world);
      for (int cc : {75, 90, 100, 103, 120, 121, 130}) {
        for (symmarLink_t link : kGpuLinks) {
          const TableRow* r = t.resolve(cc / 10, cc % 10, link, world, 1, coll);
          EXPECT_EQ(r->coll, coll);
          EXPECT_EQ(r->link, link) << "a default row of the collective, not the empty row";
          EXPECT_EQ(r->world, w);
          EXPECT_FALSE(r->source.empty());
        }
      }
      const TableRow* host = t.resolve(0, 0, symmarLinkHostMemory, world, 1, coll);
      EXPECT_EQ(host->coll, coll);
      EXPECT_EQ(host->arch, kArchHost);
      EXPECT_EQ(host->world, w);
      EXPECT_GT(host->num_entries, 0);
    }
    // Comms spanning hosts have rows of their own, of this collective.
    const TableRow* hosts = t.resolve(0, 0, symmarLinkHostMemory, 2, 2, coll);
    EXPECT_EQ(hosts->coll, coll);
    EXPECT_EQ(hosts->hosts, 2);
    EXPECT_GT(hosts->num_entries, 0);
  }
}

TEST(ScatterGatherPlan, RowsAreSizedByTheWholeBuffer) {
  const uint32_t mpi = algoBit(symmarAlgoMpi);
  const symmarTopology_t host = topo(0, 0, symmarLinkHostMemory, 4);
  for (Collective coll : kScatterGather) {
    SCOPED_TRACE(collectiveName(coll));
    const TableRow r = row(coll, {{symmarAlgoOneShot, 64 * 1024}});
    // 16 KiB per rank is 64 KiB in all at 4 ranks: the row's one-shot (thresholds are inclusive).
    EXPECT_EQ(planScatterGather(r, host, mpi, {symmarFloat32, symmarSum, 16 * 1024, coll}), symmarAlgoOneShot);
    // 32 KiB per rank is 128 KiB: above the row, the fallback, though 32 KiB alone is within it.
    EXPECT_EQ(planScatterGather(r, host, mpi, {symmarFloat32, symmarSum, 32 * 1024, coll}), symmarAlgoMpi);
    // Without the fallback the row's symmetric algorithm serves any size.
    EXPECT_EQ(planScatterGather(r, host, 0, {symmarFloat32, symmarSum, 32 * 1024, coll}), symmarAlgoOneShot);
    // A count so large the whole buffer overflows size_t is above every threshold, not wrapped below.
    EXPECT_EQ(planScatterGather(r, host, mpi, {symmarFloat32, symmarSum, SIZE_MAX / 2, coll}), symmarAlgoMpi);
  }
}

TEST(ScatterGatherPlan, EntriesWithoutAFormOfTheCollectiveAreSkipped) {
  const uint32_t mpi = algoBit(symmarAlgoMpi);
  const symmarTopology_t host = topo(0, 0, symmarLinkHostMemory, 2);
  for (Collective coll : kScatterGather) {
    SCOPED_TRACE(collectiveName(coll));
    const TableRow r = row(coll, {{symmarAlgoLamport, 1024}, {symmarAlgoTwoShot, 4096}, {symmarAlgoOneShot, 65536}});
    // Sizes per rank; the row's are the whole buffer's (2 ranks). Lamport has host forms on one host.
    EXPECT_EQ(planScatterGather(r, host, mpi, {symmarFloat32, symmarSum, 256, coll}), symmarAlgoLamport);
    EXPECT_EQ(planScatterGather(r, host, mpi, {symmarFloat32, symmarSum, 256, coll, 2}), symmarAlgoOneShot);
    EXPECT_EQ(planScatterGather(r, host, mpi, {symmarFloat32, symmarSum, 1024, coll}), symmarAlgoOneShot);
    EXPECT_EQ(planScatterGather(r, host, mpi, {symmarFloat32, symmarSum, 1 << 20, coll}), symmarAlgoMpi);
    for (symmarAlgo_t algo : {symmarAlgoTwoShot, symmarAlgoLamport}) {
      EXPECT_EQ(refusalOf(algo, topo(9, 0, symmarLinkNvSwitch, 8), {symmarFloat32, symmarSum, 256, coll},
                          algoBit(symmarAlgoNccl)),
                Refusal::kCollective)
          << algoName(algo);
    }
  }
}

TEST(ScatterGatherPlan, MultimemServesWhereTheSwitchHasTheForm) {
  symmarTopology_t sw = topo(9, 0, symmarLinkNvSwitch, 8);
  sw.multicast = 1;
  const uint32_t nccl = algoBit(symmarAlgoNccl);
  const Collective rs = Collective::kReduceScatter, ag = Collective::kAllGather;
  EXPECT_EQ(refusalOf(symmarAlgoMultimem, sw, {symmarBfloat16, symmarMax, 256, rs}, nccl), Refusal::kNone);
  EXPECT_EQ(refusalOf(symmarAlgoMultimem, sw, {symmarFloat32, symmarSum, 256, rs}, nccl), Refusal::kNone);
  // No f32 max/min in the switch, no integer or f64 reduction in the kernels; a gather copies anything.
  EXPECT_EQ(refusalOf(symmarAlgoMultimem, sw, {symmarFloat32, symmarMax, 256, rs}, nccl), Refusal::kOp);
  EXPECT_EQ(refusalOf(symmarAlgoMultimem, sw, {symmarInt32, symmarSum, 256, rs}, nccl), Refusal::kDtype);
  EXPECT_EQ(refusalOf(symmarAlgoMultimem, sw, {symmarFloat64, symmarSum, 256, ag}, nccl), Refusal::kNone);
  EXPECT_EQ(refusalOf(symmarAlgoMultimem, sw, {symmarInt32, symmarSum, 256, ag}, nccl), Refusal::kNone);
  // Without multicast, a switch without multimem (sm80) or no switch: refused with the reason.
  EXPECT_EQ(refusalOf(symmarAlgoMultimem, topo(9, 0, symmarLinkNvSwitch, 8), {symmarFloat32, symmarSum, 256, ag},
                      nccl),
            Refusal::kNoMulticast);
  symmarTopology_t ampere = topo(8, 0, symmarLinkNvSwitch, 8);
  ampere.multicast = 1;
  EXPECT_EQ(refusalOf(symmarAlgoMultimem, ampere, {symmarFloat32, symmarSum, 256, rs}, nccl), Refusal::kArch);
  EXPECT_EQ(refusalOf(symmarAlgoMultimem, topo(9, 0, symmarLinkNvLink, 8), {symmarFloat32, symmarSum, 256, rs},
                      nccl),
            Refusal::kNoSwitch);
}

TEST(ScatterGatherPlan, AnUnavailableMultimemGivesWayToOneShot) {
  // A tuned NVSwitch row names multimem; on a comm whose multicast failed, one-shot (same peer
  // access) serves its range, not the fallback, as two-shot does for an allreduce.
  const uint32_t nccl = algoBit(symmarAlgoNccl);
  symmarTopology_t sw = topo(9, 0, symmarLinkNvSwitch, 8);
  for (Collective coll : kScatterGather) {
    TableRow r = row(coll, {{symmarAlgoMultimem, 4 << 20}});
    r.arch = 90;
    r.link = symmarLinkNvSwitch;
    r.world = 8;
    const Request request{symmarBfloat16, symmarSum, 64 << 10, coll};  // 512 KiB in all
    sw.multicast = 1;
    EXPECT_EQ(planScatterGather(r, sw, nccl, request), symmarAlgoMultimem);
    sw.multicast = 0;
    EXPECT_EQ(planScatterGather(r, sw, nccl, request), symmarAlgoOneShot);
    EXPECT_EQ(planScatterGather(r, sw, nccl, {symmarBfloat16, symmarSum, 1 << 20, coll}), symmarAlgoNccl);
  }
}

TEST(ScatterGatherPlan, BuiltinRowsGiveTheMeasuredChoices) {
  // Hand-worked from tables_builtin.cc (docs/tables.md): host rows measured against Open MPI; GPU
  // rows empty until a GPU has measured the kernels, so NCCL serves, one-shot without NCCL.
  const Tables& t = Tables::builtin();
  const uint32_t mpi = algoBit(symmarAlgoMpi), nccl = algoBit(symmarAlgoNccl);
  auto plan = [&](const symmarTopology_t& tp, Collective coll, size_t per_rank, uint32_t fallbacks) {
    const TableRow* r = t.resolve(tp.cc_major, tp.cc_minor, tp.link, tp.world_size, 1, coll);
    return planScatterGather(*r, tp, fallbacks, {symmarFloat32, symmarSum, per_rank, coll});
  };
  const symmarTopology_t host2 = topo(0, 0, symmarLinkHostMemory, 2), host4 = topo(0, 0, symmarLinkHostMemory, 4);
  // Sizes per rank, the rows' the whole buffer. 2 ranks: lamport's all-gather to 512 B and from
  // above 4 KiB to 32 KiB, one-shot between and above and for every reduce-scatter; 3-8 ranks:
  // lamport's reduce-scatter to 256 KiB and all-gather to 64 KiB, one-shot above. No row names MPI (one-shot and lamport were ahead of it at
  // every size measured): the same choices with and without the fallback.
  const Collective rs = Collective::kReduceScatter, ag = Collective::kAllGather;
  const struct {
    symmarTopology_t topo;
    Collective coll;
    size_t per_rank;
    symmarAlgo_t want;
  } choices[] = {
      {host2, ag, 2, symmarAlgoLamport},           {host2, ag, 256, symmarAlgoLamport},
      {host2, ag, 260, symmarAlgoOneShot},         {host2, ag, 2048, symmarAlgoOneShot},
      {host2, ag, 2052, symmarAlgoLamport},        {host2, ag, size_t(16) << 10, symmarAlgoLamport},
      {host2, ag, (size_t(16) << 10) + 4, symmarAlgoOneShot}, {host2, ag, size_t(32) << 20, symmarAlgoOneShot},
      {host2, rs, 2, symmarAlgoOneShot},           {host2, rs, size_t(16) << 10, symmarAlgoOneShot},
      {host4, rs, 2, symmarAlgoLamport},           {host4, rs, size_t(64) << 10, symmarAlgoLamport},
      {host4, rs, (size_t(64) << 10) + 4, symmarAlgoOneShot}, {host4, ag, size_t(16) << 10, symmarAlgoLamport},
      {host4, ag, (size_t(16) << 10) + 4, symmarAlgoOneShot}, {host4, ag, size_t(32) << 20, symmarAlgoOneShot},
  };
  for (const auto& c : choices) {
    for (uint32_t fallbacks : {mpi, 0u}) {
      EXPECT_EQ(plan(c.topo, c.coll, c.per_rank, fallbacks), c.want)
          << collectiveName(c.coll) << " world " << c.topo.world_size << " " << c.per_rank << " B per rank";
    }
  }
  // Two hosts of 2 ranks (the row of 2 ranks per host; sizes the whole buffer of 4 ranks): MPI's
  // reduce-scatter to 128 KiB, one-shot above; MPI's all-gather at every size; one-shot for both
  // without the mpi fallback.
  const symmarTopology_t hosts = topo(0, 0, symmarLinkHostMemory, 4);
  auto planHosts = [&](Collective coll, size_t per_rank, uint32_t fallbacks) {
    const TableRow* r = t.resolve(0, 0, symmarLinkHostMemory, 2, 2, coll);
    return planScatterGather(*r, hosts, fallbacks, {symmarFloat32, symmarSum, per_rank, coll});
  };
  EXPECT_EQ(planHosts(Collective::kReduceScatter, 32 << 10, mpi), symmarAlgoMpi);
  EXPECT_EQ(planHosts(Collective::kReduceScatter, 64 << 10, mpi), symmarAlgoOneShot);
  EXPECT_EQ(planHosts(Collective::kAllGather, 8 << 20, mpi), symmarAlgoMpi);
  for (Collective coll : kScatterGather) EXPECT_EQ(planHosts(coll, 4, 0), symmarAlgoOneShot);
  for (Collective coll : kScatterGather) {
    for (symmarLink_t link : kGpuLinks) {
      EXPECT_EQ(plan(topo(9, 0, link, 8), coll, 4096, nccl), symmarAlgoNccl);
      EXPECT_EQ(plan(topo(12, 0, link, 2), coll, 4096, 0), symmarAlgoOneShot);
    }
  }
}

TEST(ScatterGatherPlan, EnvironmentForcesAndDisables) {
  const uint32_t mpi = algoBit(symmarAlgoMpi);
  const symmarTopology_t host = topo(0, 0, symmarLinkHostMemory, 2);
  for (Collective coll : kScatterGather) {
    const TableRow r = row(coll, {{symmarAlgoOneShot, kUnbounded}});
    const Request request{symmarBfloat16, symmarSum, 4096, coll};
    setenv("SYMMAR_ALGO", "mpi", 1);
    reloadPlanEnv();
    EXPECT_EQ(planScatterGather(r, host, mpi, request), symmarAlgoMpi);
    EXPECT_EQ(planScatterGather(r, host, 0, request), symmarAlgoOneShot);  // forced but cannot serve: the row
    unsetenv("SYMMAR_ALGO");
    setenv("SYMMAR_DISABLE", "oneshot", 1);
    reloadPlanEnv();
    EXPECT_EQ(planScatterGather(r, host, mpi, request), symmarAlgoMpi);
    EXPECT_EQ(planScatterGather(r, host, 0, request), symmarAlgoAuto);
    unsetenv("SYMMAR_DISABLE");
    reloadPlanEnv();
  }
}

TEST(ScatterGatherPlan, ATableFileRowForOneCollectiveLeavesTheOthersAlone) {
  Tables t = Tables::builtin();
  const TableRow allreduce = *t.resolve(9, 0, symmarLinkNvSwitch, 4);
  ASSERT_EQ(t.loadJson(R"({"rows": [{"arch": "sm90", "link": "nvswitch", "world": 4, "collective": "allgather",
                          "algos": [{"algo": "oneshot", "max_bytes": "1M"}], "source": "tuned"}]})",
                       "test"),
            symmarSuccess)
      << threadLastError();
  const TableRow* gather = t.resolve(9, 0, symmarLinkNvSwitch, 4, 1, Collective::kAllGather);
  EXPECT_EQ(gather->arch, 90);
  EXPECT_EQ(gather->source, "tuned");
  EXPECT_EQ(t.resolve(9, 0, symmarLinkNvSwitch, 4, 1, Collective::kReduceScatter)->arch, kArchDefault);
  const TableRow* still = t.resolve(9, 0, symmarLinkNvSwitch, 4);
  EXPECT_EQ(still->coll, Collective::kAllReduce);
  EXPECT_EQ(still->source, allreduce.source);
  EXPECT_EQ(still->num_entries, allreduce.num_entries);
  // The family serves a capability without a row of its own, for this collective too.
  EXPECT_EQ(t.resolve(9, 1, symmarLinkNvSwitch, 4, 1, Collective::kAllGather)->arch, 90);
}
