// The planner and the built-in tables: every key answers, the lookup chain never fails, and the
// availability rules hold.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/names.h"
#include "plan/planner.h"
#include "plan/table.h"

using namespace symmar;

namespace {

symmarTopology_t topo(int major, int minor, symmarLink_t link, int world, int multicast) {
  return symmarTopology_t{major, minor, link, world, multicast};
}

symmarAlgo_t plan(const symmarTopology_t& t, size_t bytes, symmarDataType_t dtype = symmarBfloat16,
                  symmarRedOp_t op = symmarSum) {
  symmarAlgo_t a = symmarAlgoAuto;
  EXPECT_EQ(symmarPlan(&t, bytes / symmarTypeSize(dtype), dtype, op, &a), symmarSuccess) << symmarGetLastError(nullptr);
  return a;
}

const symmarLink_t kGpuLinks[] = {symmarLinkNvSwitch, symmarLinkNvLink, symmarLinkPcie};
const int kCaps[][2] = {{9, 0}, {10, 0}, {10, 3}, {12, 0}, {12, 1}, {8, 0}};  // 8.0 -> default row

}  // namespace

TEST(Planner, EveryKeyAndSizeGetsAnAlgorithm) {
  for (const auto& cc : kCaps) {
    for (symmarLink_t link : kGpuLinks) {
      for (int world = 2; world <= 8; ++world) {
        for (int mc = 0; mc <= 1; ++mc) {
          for (size_t bytes = 2; bytes <= (size_t(256) << 20); bytes *= 2) {
            for (size_t b : {bytes, bytes + 2}) {
              symmarAlgo_t a = plan(topo(cc[0], cc[1], link, world, mc), b);
              ASSERT_TRUE(a == symmarAlgoOneShot || a == symmarAlgoTwoShot || a == symmarAlgoMultimem ||
                          a == symmarAlgoNccl)
                  << cc[0] << "." << cc[1] << " " << linkName(link) << " ws" << world << " " << b << " -> " << a;
              if (!mc || link != symmarLinkNvSwitch) {
                ASSERT_NE(a, symmarAlgoMultimem) << "no multicast, no multimem";
              }
            }
          }
        }
      }
    }
  }
}

TEST(Planner, BuiltinTablesHaveEveryRow) {
  const Tables& t = Tables::builtin();
  for (int arch : {90, 100, 103, 120, 121, kArchDefault}) {
    for (symmarLink_t link : kGpuLinks) {
      for (int w = 2; w <= 8; ++w) {
        const TableRow* row = t.find(arch, link, w);
        ASSERT_NE(row, nullptr) << archKeyName(arch) << " " << linkName(link) << " " << w;
        EXPECT_FALSE(row->source.empty()) << "every row names its source";
        for (int i = 1; i < row->num_entries; ++i) EXPECT_GT(row->entries[i].max_bytes, row->entries[i - 1].max_bytes);
        if (link != symmarLinkNvSwitch) {
          for (int i = 0; i < row->num_entries; ++i) EXPECT_NE(row->entries[i].algo, symmarAlgoMultimem);
        }
      }
    }
  }
  for (int w = 2; w <= 8; ++w) EXPECT_NE(t.find(kArchHost, symmarLinkHostMemory, w), nullptr);
}

TEST(Planner, LookupChainForUnknownCapabilities) {
  const Tables& t = Tables::builtin();
  struct Case {
    int major, minor, expect_arch;
  } cases[] = {{8, 9, kArchDefault}, {11, 0, kArchDefault}, {12, 1, 121}, {13, 0, kArchDefault},
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
                       algoBit(symmarAlgoNccl);
  for (const TableRow& row : Tables::builtin().rows()) {
    if (row.link == symmarLinkHostMemory) continue;
    for (int i = 0; i < row.num_entries; ++i) {
      const uint64_t max = row.entries[i].max_bytes;
      EXPECT_EQ(chooseAlgo(row, all, max), row.entries[i].algo) << row.source;
      symmarAlgo_t next = i + 1 < row.num_entries ? row.entries[i + 1].algo : symmarAlgoNccl;
      if (max != kUnbounded) {
        EXPECT_EQ(chooseAlgo(row, all, max + 1), next) << row.source;
      }
    }
  }
}

TEST(Planner, MissingMulticastRemovesOnlyMultimem) {
  // sm90 NVSwitch ws=8 serves 1 MiB with multimem; without multicast two-shot takes the range.
  EXPECT_EQ(plan(topo(9, 0, symmarLinkNvSwitch, 8, 1), 1 << 20), symmarAlgoMultimem);
  EXPECT_EQ(plan(topo(9, 0, symmarLinkNvSwitch, 8, 0), 1 << 20), symmarAlgoTwoShot);
  EXPECT_EQ(plan(topo(9, 0, symmarLinkNvSwitch, 8, 0), 8 << 10), symmarAlgoOneShot);
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

TEST(Planner, HostRowsServeEverySizeWithoutMpi) {
  symmarTopology_t t = topo(0, 0, symmarLinkHostMemory, 2, 0);
  const TableRow* row = Tables::builtin().resolve(0, 0, symmarLinkHostMemory, 2);
  uint32_t no_fallback = availableAlgos(t, symmarFloat32, symmarSum, 0);
  for (size_t bytes = 4; bytes <= (size_t(1) << 30); bytes *= 4) {
    symmarAlgo_t a = chooseAlgo(*row, no_fallback, bytes);
    EXPECT_TRUE(a == symmarAlgoOneShot || a == symmarAlgoTwoShot);
  }
  // Host memory on several hosts (unknown link) has only the mpi fallback, or nothing.
  symmarTopology_t remote = topo(0, 0, symmarLinkUnknown, 2, 0);
  EXPECT_EQ(availableAlgos(remote, symmarFloat32, symmarSum, algoBit(symmarAlgoMpi)), 0u)
      << "a CPU topology with unknown link has no symmetric path";
  symmarAlgo_t a;
  EXPECT_EQ(symmarPlan(&remote, 16, symmarFloat32, symmarSum, &a), symmarUnsupported);
  EXPECT_NE(std::string(symmarGetLastError(nullptr)), "");
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
  setenv("SYMMAR_DISABLE", "oneshot,multimem", 1);
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
  EXPECT_EQ(plan(t, 1024), symmarAlgoOneShot);
  unsetenv("SYMMAR_ALGO");
  reloadPlanEnv();
}
