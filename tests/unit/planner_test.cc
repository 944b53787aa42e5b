// The planner and the built-in tables: every key answers, the lookup chain never fails, and the
// availability rules hold. Arches come from the tables themselves (knownArchs), so a new row needs
// no edit here; rows may be sparse, and the chain must serve every key anyway. The fused call's
// form: fused_form_test.cc.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/names.h"
#include "plan/arch.h"
#include "plan/planner.h"
#include "plan/table.h"
#include "planner_test_util.h"

using namespace symmar;

namespace {

using plantest::kGpuLinks;
using plantest::plan;
using plantest::topo;

// Capabilities no table or traits line names: each must still be served (by family or default).
const int kUnknownArchs[] = {75, 80, 89, 99, 130};

// (major, minor) of every GPU arch the built-in tables know, then of the unknown ones above.
std::vector<std::pair<int, int>> gpuCaps() {
  std::vector<std::pair<int, int>> caps;
  for (int arch : knownArchs(Tables::builtin())) {
    if (arch > 0) caps.push_back({arch / 10, arch % 10});
  }
  for (int arch : kUnknownArchs) caps.push_back({arch / 10, arch % 10});
  return caps;
}

}  // namespace

TEST(Planner, EveryKeyAndSizeGetsAnAlgorithm) {
  const auto caps = gpuCaps();
  ASSERT_GE(caps.size(), 5u + 5u) << "the five built-in GPU arches and the unknown ones";
  for (const auto& [major, minor] : caps) {
    const int cc[2] = {major, minor};
    for (symmarLink_t link : kGpuLinks) {
      for (int world = 2; world <= 8; ++world) {
        for (int mc = 0; mc <= 1; ++mc) {
          for (size_t bytes = 2; bytes <= (size_t(256) << 20); bytes *= 2) {
            for (size_t b : {bytes, bytes + 2}) {
              symmarAlgo_t a = plan(topo(cc[0], cc[1], link, world, mc), b);
              ASSERT_TRUE(a == symmarAlgoOneShot || a == symmarAlgoTwoShot || a == symmarAlgoMultimem ||
                          a == symmarAlgoNccl || a == symmarAlgoLamport)
                  << cc[0] << "." << cc[1] << " " << linkName(link) << " ws" << world << " " << b << " -> " << a;
              if (a == symmarAlgoLamport) {
                ASSERT_LE(b, size_t(256) << 10) << "lamport's buffers hold 256 KiB";
                ASSERT_NE(link, symmarLinkPcieNoP2P) << "lamport pushes into peers' memory";
              }
              if (!mc || link != symmarLinkNvSwitch) {
                ASSERT_NE(a, symmarAlgoMultimem) << "no multicast, no multimem";
              }
              if (!archSupportsMultimem(cc[0], cc[1])) {
                ASSERT_NE(a, symmarAlgoMultimem) << cc[0] << "." << cc[1] << " has no multimem";
              }
            }
          }
        }
      }
    }
  }
}

TEST(Planner, BuiltinRowsAreWellFormed) {
  // Rows may be sparse, but each row present names its source, has increasing thresholds and
  // offers multimem only on an NVSwitch.
  for (const TableRow& row : Tables::builtin().rows()) {
    SCOPED_TRACE(archKeyName(row.arch) + " " + linkName(row.link) + " " + std::to_string(row.world));
    EXPECT_FALSE(row.source.empty()) << "every row names its source";
    EXPECT_GE(row.world, kMinTableWorld);
    EXPECT_LE(row.world, kMaxTableWorld);
    for (int i = 1; i < row.num_entries; ++i) EXPECT_GT(row.entries[i].max_bytes, row.entries[i - 1].max_bytes);
    if (row.link != symmarLinkNvSwitch) {
      for (int i = 0; i < row.num_entries; ++i) EXPECT_NE(row.entries[i].algo, symmarAlgoMultimem);
    }
  }
  // The chain's last step is complete: default rows for every GPU link, host rows for every world.
  // (Without them an unknown GPU would get the empty row: fallback only.)
  const Tables& t = Tables::builtin();
  for (int w = kMinTableWorld; w <= kMaxTableWorld; ++w) {
    for (symmarLink_t link : kGpuLinks) EXPECT_NE(t.find(kArchDefault, link, w), nullptr) << linkName(link) << w;
    EXPECT_NE(t.find(kArchHost, symmarLinkHostMemory, w), nullptr) << w;
  }
}

TEST(Planner, ResolveIsTotal) {
  // Every (arch, link, world) gets a non-empty row of that link at the nearest world, and the row is
  // one the chain may pick: the arch's own, its family's (major, minor 0) or the default, never a
  // less specific row when a more specific one exists.
  const Tables& t = Tables::builtin();
  for (const auto& [major, minor] : gpuCaps()) {
    const int exact = major * 10 + minor, family = major * 10;
    for (symmarLink_t link : kGpuLinks) {
      for (int world = 1; world <= 16; ++world) {
        SCOPED_TRACE(std::to_string(major) + "." + std::to_string(minor) + " " + linkName(link) + " ws" +
                     std::to_string(world));
        const TableRow* row = t.resolve(major, minor, link, world);
        ASSERT_NE(row, nullptr);
        EXPECT_EQ(row->link, link);
        EXPECT_GT(row->num_entries, 0);
        const int w = world < 2 ? 2 : (world > 8 ? 8 : world);
        EXPECT_EQ(row->world, w);
        EXPECT_TRUE(row->arch == exact || row->arch == family || row->arch == kArchDefault) << row->arch;
        if (t.find(exact, link, w)) {
          EXPECT_EQ(row->arch, exact);
        }
        if (row->arch == kArchDefault) {
          EXPECT_EQ(t.find(family, link, w), nullptr);
        }
      }
    }
  }
  for (int world = 1; world <= 16; ++world) {
    const TableRow* host = t.resolve(0, 0, symmarLinkHostMemory, world);
    ASSERT_NE(host, nullptr);
    EXPECT_EQ(host->arch, kArchHost);
    EXPECT_EQ(host->world, world < 2 ? 2 : (world > 8 ? 8 : world));
  }
  // An unknown link still answers: the empty row, which leaves everything to the fallback.
  const TableRow* unknown = t.resolve(9, 0, symmarLinkUnknown, 4);
  ASSERT_NE(unknown, nullptr);
  EXPECT_EQ(unknown->num_entries, 0);
}

TEST(Planner, ResolveServesTheExpectedRow) {
  // Hand-worked from tables_builtin.cc / docs/tables.md.
  const Tables& t = Tables::builtin();
  constexpr uint64_t KiB = 1024, MiB = 1024 * 1024;
  struct Case {
    int major, minor;
    symmarLink_t link;
    int world;
    int arch, row_world;  // the row expected
    symmarAlgo_t first;   // its first entry
    uint64_t first_max, last_max;
  } cases[] = {
      // sm121 has no rows: the sm120 family rows serve, halved one-shot at ws >= 5 included.
      {12, 1, symmarLinkPcie, 4, 120, 4, symmarAlgoLamport, 1 * KiB, 16 * MiB},
      {12, 1, symmarLinkPcie, 6, 120, 6, symmarAlgoLamport, 1 * KiB, 16 * MiB},
      {12, 1, symmarLinkNvSwitch, 2, 120, 2, symmarAlgoOneShot, 256 * KiB, 16 * MiB},
      // sm103: its own NVSwitch rows; nvlink and pcie from sm100.
      {10, 3, symmarLinkNvSwitch, 8, 103, 8, symmarAlgoLamport, 16 * KiB, 32 * MiB},
      {10, 3, symmarLinkNvLink, 3, 100, 3, symmarAlgoOneShot, 256 * KiB, 8 * MiB},
      {10, 3, symmarLinkPcie, 16, 100, 8, symmarAlgoOneShot, 64 * KiB, 2 * MiB},
      // Unknown minor of a known family.
      {9, 9, symmarLinkNvLink, 5, 90, 5, symmarAlgoOneShot, 256 * KiB, 16 * MiB},
      {12, 7, symmarLinkPcie, 8, 120, 8, symmarAlgoLamport, 1 * KiB, 16 * MiB},
      // Unknown family: default.
      {8, 9, symmarLinkPcie, 2, kArchDefault, 2, symmarAlgoOneShot, 64 * KiB, 4 * MiB},
      {7, 5, symmarLinkNvSwitch, 16, kArchDefault, 8, symmarAlgoOneShot, 256 * KiB, 16 * MiB},
      {13, 0, symmarLinkNvLink, 1, kArchDefault, 2, symmarAlgoOneShot, 1 * MiB, 16 * MiB},
      // Host ranks.
      {0, 0, symmarLinkHostMemory, 16, kArchHost, 8, symmarAlgoOneShot, 64 * KiB, kUnbounded},
  };
  for (const Case& c : cases) {
    const TableRow* row = t.resolve(c.major, c.minor, c.link, c.world);
    SCOPED_TRACE(std::to_string(c.major) + "." + std::to_string(c.minor) + " " + linkName(c.link) + " ws" +
                 std::to_string(c.world));
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(row->arch, c.arch);
    EXPECT_EQ(row->world, c.row_world);
    ASSERT_GT(row->num_entries, 0);
    EXPECT_EQ(row->entries[0].algo, c.first);
    EXPECT_EQ(row->entries[0].max_bytes, c.first_max);
    EXPECT_EQ(row->entries[row->num_entries - 1].max_bytes, c.last_max);
  }
}

TEST(Planner, LookupChainForUnknownCapabilities) {
  const Tables& t = Tables::builtin();
  struct Case {
    int major, minor, expect_arch;
  } cases[] = {{8, 9, kArchDefault}, {11, 0, kArchDefault}, {12, 1, 120}, {13, 0, kArchDefault},
               {99, 9, kArchDefault}, {9, 9, 90},           {10, 1, 100}, {12, 0, 120}, {12, 7, 120}};
  for (const Case& c : cases) {
    const TableRow* row = t.resolve(c.major, c.minor, symmarLinkPcie, 4);
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(row->arch, c.expect_arch) << c.major << "." << c.minor;
    EXPECT_NE(plan(topo(c.major, c.minor, symmarLinkPcie, 4, 0), 1 << 20), symmarAlgoAuto);
  }
  // World sizes outside the tables use the nearest row instead of failing.
  EXPECT_EQ(t.resolve(9, 0, symmarLinkNvSwitch, 16)->world, 8);
  EXPECT_EQ(t.resolve(9, 0, symmarLinkNvSwitch, 1)->world, 2);
}

TEST(Planner, ThresholdsAreInclusive) {
  const uint32_t all = algoBit(symmarAlgoOneShot) | algoBit(symmarAlgoTwoShot) | algoBit(symmarAlgoMultimem) |
                       algoBit(symmarAlgoNccl) | algoBit(symmarAlgoLamport);
  for (const TableRow& row : Tables::builtin().rows()) {
    if (row.link == symmarLinkHostMemory) continue;
    for (int i = 0; i < row.num_entries; ++i) {
      const uint64_t max = row.entries[i].max_bytes;
      EXPECT_EQ(chooseAlgo(row, all, max, 2), row.entries[i].algo) << row.source;
      symmarAlgo_t next = i + 1 < row.num_entries ? row.entries[i + 1].algo : symmarAlgoNccl;
      if (max != kUnbounded) {
        EXPECT_EQ(chooseAlgo(row, all, max + 1, 2), next) << row.source;
      }
    }
  }
}

TEST(Planner, MissingMulticastRemovesOnlyMultimem) {
  // sm90 NVSwitch ws=8 serves 1 MiB with multimem; without multicast two-shot takes the range.
  EXPECT_EQ(plan(topo(9, 0, symmarLinkNvSwitch, 8, 1), 1 << 20), symmarAlgoMultimem);
  EXPECT_EQ(plan(topo(9, 0, symmarLinkNvSwitch, 8, 0), 1 << 20), symmarAlgoTwoShot);
  EXPECT_EQ(plan(topo(9, 0, symmarLinkNvSwitch, 8, 0), 8 << 10), symmarAlgoLamport);
  EXPECT_EQ(plan(topo(9, 0, symmarLinkNvSwitch, 8, 0), 32 << 10), symmarAlgoOneShot);
  // multimem has no f32 min/max.
  EXPECT_NE(plan(topo(9, 0, symmarLinkNvSwitch, 8, 1), 1 << 20, symmarFloat32, symmarMax), symmarAlgoMultimem);
  EXPECT_EQ(plan(topo(9, 0, symmarLinkNvSwitch, 8, 1), 1 << 20, symmarFloat32, symmarSum), symmarAlgoMultimem);
}

TEST(Planner, UnknownLinkAndKernelDtypesGoToTheFallback) {
  for (size_t bytes : {size_t(64), size_t(1) << 20}) {
    EXPECT_EQ(plan(topo(9, 0, symmarLinkUnknown, 4, 1), bytes), symmarAlgoNccl);
    EXPECT_EQ(plan(topo(9, 0, symmarLinkNvSwitch, 4, 1), bytes, symmarInt32), symmarAlgoNccl);
    EXPECT_EQ(plan(topo(9, 0, symmarLinkNvSwitch, 4, 1), bytes, symmarFloat64), symmarAlgoNccl);
  }
}

TEST(Planner, Sm120PcieDecodeSizesTakeASymmetricPath) {
  // 1..256 tokens of a 7168-wide bf16 model: 14 KiB .. 3.5 MiB.
  for (int world = 2; world <= 8; ++world) {
    for (size_t tokens = 1; tokens <= 256; tokens *= 2) {
      symmarAlgo_t a = plan(topo(12, 0, symmarLinkPcie, world, 0), tokens * 7168 * 2);
      EXPECT_TRUE(a == symmarAlgoOneShot || a == symmarAlgoTwoShot) << "ws" << world << " tokens " << tokens;
    }
  }
}

// GPUs without peer access (staging in pinned host memory): one-shot for decode sizes while the
// (1 + W) N bytes over PCIe stay cheap, two-shot above, NCCL past 64 MiB; never multimem.
TEST(Planner, PcieWithoutP2pStagesThroughHostMemory) {
  for (int major : {12, 8}) {  // sm120 rows, and an unknown arch on the default rows
    EXPECT_EQ(plan(topo(major, 0, symmarLinkPcieNoP2P, 2, 0), 512 << 10), symmarAlgoOneShot);
    EXPECT_EQ(plan(topo(major, 0, symmarLinkPcieNoP2P, 4, 0), 14 << 10), symmarAlgoOneShot) << "one token";
    EXPECT_EQ(plan(topo(major, 0, symmarLinkPcieNoP2P, 4, 0), 1 << 20), symmarAlgoTwoShot);
    EXPECT_EQ(plan(topo(major, 0, symmarLinkPcieNoP2P, 8, 0), 64 << 10), symmarAlgoTwoShot) << "W=8: one-shot to 16 KiB";
    EXPECT_EQ(plan(topo(major, 0, symmarLinkPcieNoP2P, 8, 1), size_t(128) << 20), symmarAlgoNccl);
  }
  EXPECT_STREQ(linkName(symmarLinkPcieNoP2P), "pcie-nop2p");
  symmarLink_t parsed = symmarLinkUnknown;
  EXPECT_TRUE(parseLinkName("pcie-nop2p", &parsed));
  EXPECT_EQ(parsed, symmarLinkPcieNoP2P);
}

TEST(Planner, HostRowsServeEverySizeWithoutMpi) {
  symmarTopology_t t = topo(0, 0, symmarLinkHostMemory, 2, 0);
  const TableRow* row = Tables::builtin().resolve(0, 0, symmarLinkHostMemory, 2);
  uint32_t no_fallback = availableAlgos(t, symmarFloat32, symmarSum, 0);
  for (size_t bytes = 4; bytes <= (size_t(1) << 30); bytes *= 4) {
    symmarAlgo_t a = chooseAlgo(*row, no_fallback, bytes, 4);
    EXPECT_TRUE(a == symmarAlgoOneShot || a == symmarAlgoTwoShot || (a == symmarAlgoLamport && bytes <= 64)) << bytes;
  }
  // Host memory on several hosts (unknown link) has only the mpi fallback, or nothing.
  symmarTopology_t remote = topo(0, 0, symmarLinkUnknown, 2, 0);
  EXPECT_EQ(availableAlgos(remote, symmarFloat32, symmarSum, algoBit(symmarAlgoMpi)), algoBit(symmarAlgoMpi))
      << "a CPU comm spanning hosts is served by its mpi fallback";
  EXPECT_EQ(availableAlgos(remote, symmarFloat32, symmarSum, 0), 0u) << "and by nothing without one";
  symmarAlgo_t a = symmarAlgoAuto;
  EXPECT_EQ(symmarPlan(&remote, 16, symmarFloat32, symmarSum, &a), symmarSuccess);
  EXPECT_EQ(a, symmarAlgoMpi);
}

// The 2-rank host row (measured in place inside vLLM's workers and on torch tensors): lamport to 64
// B, the one-shot to 32 KiB for every dtype, the two-shot past it.
TEST(Planner, TheTwoRankHostRowTakesTheOneShotTo32KiB) {
  const symmarTopology_t t = topo(0, 0, symmarLinkHostMemory, 2, 0);
  for (symmarDataType_t d : {symmarFloat32, symmarBfloat16, symmarFloat16, symmarInt32, symmarFloat64}) {
    const size_t elem = symmarTypeSize(d);
    const auto planned = [&](size_t bytes) {
      symmarAlgo_t a = symmarAlgoAuto;
      EXPECT_EQ(symmarPlan(&t, bytes / elem, d, symmarSum, &a), symmarSuccess) << symmarGetLastError(nullptr);
      return a;
    };
    // (lamport allreduces f32, f16 and bf16 only: its empty pattern is a valid int32 and half a float64)
    const bool lamport = d != symmarInt32 && d != symmarFloat64;
    EXPECT_EQ(planned(64), lamport ? symmarAlgoLamport : symmarAlgoOneShot) << d;
    EXPECT_EQ(planned(128), symmarAlgoOneShot) << d;
    EXPECT_EQ(planned(8192), symmarAlgoOneShot) << d;
    EXPECT_EQ(planned(32768), symmarAlgoOneShot) << d;
    EXPECT_EQ(planned(32768 + 8), symmarAlgoTwoShot) << d;
    EXPECT_EQ(planned(1 << 20), symmarAlgoTwoShot) << d;
  }
}

TEST(Planner, BadArgumentsAreRejected) {
  symmarTopology_t t = topo(9, 0, symmarLinkNvSwitch, 8, 1);
  symmarAlgo_t a;
  EXPECT_EQ(symmarPlan(nullptr, 1, symmarFloat32, symmarSum, &a), symmarInvalidArgument);
  EXPECT_EQ(symmarPlan(&t, 1, symmarFloat32, symmarSum, nullptr), symmarInvalidArgument);
  EXPECT_EQ(symmarPlan(&t, 1, static_cast<symmarDataType_t>(9), symmarSum, &a), symmarInvalidArgument);
  EXPECT_EQ(symmarPlan(&t, 1, symmarFloat32, static_cast<symmarRedOp_t>(-1), &a), symmarInvalidArgument);
  EXPECT_EQ(symmarPlan(&t, SIZE_MAX / 2, symmarFloat32, symmarSum, &a), symmarInvalidArgument);
  EXPECT_NE(std::string(symmarGetLastError(nullptr)).find("overflows"), std::string::npos);
  symmarTopology_t bad = t;
  bad.world_size = 0;
  EXPECT_EQ(symmarPlan(&bad, 1, symmarFloat32, symmarSum, &a), symmarInvalidArgument);
  bad = t;
  bad.link = static_cast<symmarLink_t>(17);
  EXPECT_EQ(symmarPlan(&bad, 1, symmarFloat32, symmarSum, &a), symmarInvalidArgument);
}

TEST(Planner, EnvironmentForcesAndDisables) {
  setenv("SYMMAR_DISABLE", "lamport,oneshot,multimem", 1);
  reloadPlanEnv();
  symmarTopology_t t = topo(9, 0, symmarLinkNvSwitch, 8, 1);
  EXPECT_EQ(plan(t, 1024), symmarAlgoTwoShot);
  EXPECT_EQ(plan(t, 1 << 20), symmarAlgoTwoShot);
  unsetenv("SYMMAR_DISABLE");
  setenv("SYMMAR_ALGO", "nccl", 1);
  reloadPlanEnv();
  EXPECT_EQ(plan(t, 1024), symmarAlgoNccl);
  setenv("SYMMAR_ALGO", "bogus", 1);  // reported once and ignored
  reloadPlanEnv();
  EXPECT_EQ(plan(t, 1024), symmarAlgoLamport);
  unsetenv("SYMMAR_ALGO");
  reloadPlanEnv();
}

// A comm's remembered availability answers as availableAlgos does, per collective, dtype and op,
// and follows a change of the fallbacks or of the environment.
TEST(Planner, RememberedAvailabilityFollowsFallbacksAndTheEnvironment) {
  const symmarTopology_t host = topo(0, 0, symmarLinkHostMemory, 2, 0);
  const uint32_t mpi = algoBit(symmarAlgoMpi), lamport = algoBit(symmarAlgoLamport);
  AvailableAlgos memo;
  const Request sum{symmarFloat32, symmarSum, 0}, ints{symmarInt32, symmarSum, 0};
  const Request gather{symmarInt32, symmarSum, 0, Collective::kAllGather};
  for (int twice = 0; twice < 2; ++twice) {
    EXPECT_EQ(memo.of(host, sum, mpi), availableAlgos(host, sum, mpi));
    EXPECT_EQ(memo.of(host, ints, mpi) & lamport, 0u) << "no int32 lamport allreduce";
    EXPECT_NE(memo.of(host, gather, mpi) & lamport, 0u) << "an int32 lamport all-gather";
  }
  EXPECT_EQ(memo.of(host, sum, 0) & mpi, 0u) << "the fallback went away";
  EXPECT_NE(memo.of(host, sum, mpi) & mpi, 0u) << "and came back";
  setenv("SYMMAR_DISABLE", "lamport", 1);
  reloadPlanEnv();
  EXPECT_EQ(memo.of(host, sum, mpi) & lamport, 0u) << "SYMMAR_DISABLE read again";
  unsetenv("SYMMAR_DISABLE");
  reloadPlanEnv();
  EXPECT_NE(memo.of(host, sum, mpi) & lamport, 0u);
}
