// Architecture traits, and that a new architecture is data only: a table file's made-up "sm99"
// is listed by knownArchs, served by resolve() and planned from, with no code naming it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/names.h"
#include "plan/arch.h"
#include "plan/planner.h"
#include "plan/table.h"

using namespace symmar;

namespace {

TableRow row(int arch, symmarLink_t link, int world) {
  TableRow r;
  r.arch = arch;
  r.link = link;
  r.world = world;
  r.num_entries = 1;
  r.entries[0] = {symmarAlgoTwoShot, 4096};
  r.source = "test";
  return r;
}

// sm99 on an NVSwitch at world 8 only, with thresholds no built-in row has (sm90 ws=8 is
// oneshot <= 64 KiB, multimem <= 64 MiB), so a plan from it cannot come from the family row.
const char* kSm99 = R"({"rows": [
  {"arch": "sm99", "link": "nvswitch", "world": 8, "source": "made-up sm99",
   "algos": [{"algo": "twoshot", "max_bytes": "2K"}, {"algo": "multimem", "max_bytes": "8M"}]}
]})";

}  // namespace

TEST(Arch, TraitsOfTheKnownArchitectures) {
  struct Case {
    int arch, family;
    bool multimem;
  } cases[] = {{90, 9, true}, {100, 10, true}, {103, 10, true}, {120, 12, false}, {121, 12, false}};
  for (const Case& c : cases) {
    const ArchTraits* t = archTraits(c.arch);
    ASSERT_NE(t, nullptr) << c.arch;
    EXPECT_EQ(t->arch, c.arch);
    EXPECT_EQ(t->family, c.family) << c.arch;
    EXPECT_EQ(t->multimem, c.multimem) << c.arch;
    EXPECT_NE(std::string(t->name), "") << c.arch;
  }
  // Exact keys only: no family fallback, and the two special keys have no traits.
  for (int arch : {75, 89, 91, 99, 101, 122, 130, kArchDefault, kArchHost}) {
    EXPECT_EQ(archTraits(arch), nullptr) << arch;
  }
  EXPECT_EQ(archTraitsTable().size(), 5u);
}

TEST(Arch, MultimemSupport) {
  // Known: from the traits table. RTX / GeForce Blackwell and GB10 are sm_90+ but have no multicast.
  EXPECT_TRUE(archSupportsMultimem(9, 0));
  EXPECT_TRUE(archSupportsMultimem(10, 0));
  EXPECT_TRUE(archSupportsMultimem(10, 3));
  EXPECT_FALSE(archSupportsMultimem(12, 0));
  EXPECT_FALSE(archSupportsMultimem(12, 1));
  // Unknown: the family's answer, else the PTX rule cc_major >= 9 (an upper bound; the device's
  // multicast attribute decides).
  EXPECT_FALSE(archSupportsMultimem(7, 5));
  EXPECT_FALSE(archSupportsMultimem(8, 0));
  EXPECT_FALSE(archSupportsMultimem(8, 9));
  EXPECT_TRUE(archSupportsMultimem(9, 9));
  EXPECT_TRUE(archSupportsMultimem(11, 0));
  EXPECT_FALSE(archSupportsMultimem(12, 7)) << "a new RTX Blackwell part, like sm120";
  EXPECT_TRUE(archSupportsMultimem(13, 0));
  EXPECT_FALSE(archSupportsMultimem(0, 0)) << "host ranks";
}

TEST(Arch, BuiltinRowsAgreeWithTheTraits) {
  // An arch without multicast must never list multimem, on any link.
  for (const TableRow& r : Tables::builtin().rows()) {
    const ArchTraits* t = archTraits(r.arch);
    if (!t || t->multimem) continue;
    for (int i = 0; i < r.num_entries; ++i) {
      EXPECT_NE(r.entries[i].algo, symmarAlgoMultimem) << archKeyName(r.arch) << " ws" << r.world << " " << r.source;
    }
  }
}

TEST(Arch, KnownArchsListsRowsAndTraitsSortedWithDefaultAndHostLast) {
  const std::vector<int> builtin = {90, 100, 103, 120, 121, kArchDefault, kArchHost};
  EXPECT_EQ(knownArchs(Tables::builtin()), builtin);

  Tables t = Tables::builtin();
  t.put(row(1000, symmarLinkNvSwitch, 8));
  t.put(row(89, symmarLinkPcie, 2));
  t.put(row(89, symmarLinkPcie, 3));  // a second row of the same arch is listed once
  const std::vector<int> extended = {89, 90, 100, 103, 120, 121, 1000, kArchDefault, kArchHost};
  EXPECT_EQ(knownArchs(t), extended);

  // Arches of the traits table are listed without rows; special keys only where rows have them.
  const std::vector<int> traits_only = {90, 100, 103, 120, 121};
  EXPECT_EQ(knownArchs(Tables()), traits_only);
  Tables host_only;
  host_only.put(row(kArchHost, symmarLinkHostMemory, 2));
  const std::vector<int> with_host = {90, 100, 103, 120, 121, kArchHost};
  EXPECT_EQ(knownArchs(host_only), with_host);
}

TEST(Arch, MadeUpArchitectureFromATableFileIsServedAndPlanned) {
  Tables t = Tables::builtin();
  ASSERT_EQ(t.loadJson(kSm99, "sm99.json"), symmarSuccess) << threadLastError();

  std::vector<int> archs = knownArchs(t);
  EXPECT_NE(std::find(archs.begin(), archs.end(), 99), archs.end());

  const TableRow* r = t.resolve(9, 9, symmarLinkNvSwitch, 8);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->arch, 99);
  EXPECT_EQ(r->source, "made-up sm99");
  EXPECT_EQ(t.resolve(9, 9, symmarLinkNvSwitch, 16)->arch, 99) << "world 16 uses the nearest row, world 8";
  // Where sm99 has no row the family (sm90) serves: ws=4 is lamport <= 64 KiB, oneshot <= 512 KiB,
  // multimem <= 32 MiB.
  const TableRow* family = t.resolve(9, 9, symmarLinkNvSwitch, 4);
  EXPECT_EQ(family->arch, 90);
  EXPECT_EQ(family->entries[1].max_bytes, 512u * 1024);
  EXPECT_EQ(t.resolve(9, 9, symmarLinkPcie, 8)->arch, 90);

  // The planner takes sm99's thresholds: twoshot to 2 KiB, multimem to 8 MiB, NCCL above.
  const symmarTopology_t topo{9, 9, symmarLinkNvSwitch, 8, 1};
  const uint32_t nccl = algoBit(symmarAlgoNccl);
  EXPECT_EQ(planRequest(*r, topo, nccl, 1024 / 2, symmarBfloat16, symmarSum), symmarAlgoTwoShot);
  EXPECT_EQ(planRequest(*r, topo, nccl, 2048 / 2, symmarBfloat16, symmarSum), symmarAlgoTwoShot);
  EXPECT_EQ(planRequest(*r, topo, nccl, 2050 / 2, symmarBfloat16, symmarSum), symmarAlgoMultimem);
  EXPECT_EQ(planRequest(*r, topo, nccl, (4u << 20) / 2, symmarBfloat16, symmarSum), symmarAlgoMultimem);
  EXPECT_EQ(planRequest(*r, topo, nccl, (16u << 20) / 2, symmarBfloat16, symmarSum), symmarAlgoNccl);
  const uint32_t all = algoBit(symmarAlgoOneShot) | algoBit(symmarAlgoTwoShot) | algoBit(symmarAlgoMultimem) | nccl;
  EXPECT_EQ(chooseAlgo(*r, all, 8u << 20, 2), symmarAlgoMultimem);
  EXPECT_EQ(chooseAlgo(*r, all, (8u << 20) + 1, 2), symmarAlgoNccl);
}

TEST(Arch, MadeUpArchitectureThroughSymmarTableFile) {
  // The public planning entry point with SYMMAR_TABLE_FILE, as a deployment would use it.
  char path[] = "/tmp/symmar-sm99-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, kSm99, strlen(kSm99)), static_cast<ssize_t>(strlen(kSm99)));
  close(fd);
  setenv("SYMMAR_TABLE_FILE", path, 1);
  resetProcessTables();
  const symmarTopology_t topo{9, 9, symmarLinkNvSwitch, 8, 1};
  symmarAlgo_t small = symmarAlgoAuto, large = symmarAlgoAuto, family = symmarAlgoAuto;
  EXPECT_EQ(symmarPlan(&topo, 512, symmarBfloat16, symmarSum, &small), symmarSuccess) << symmarGetLastError(nullptr);
  EXPECT_EQ(symmarPlan(&topo, size_t(16) << 20, symmarBfloat16, symmarSum, &large), symmarSuccess);
  const symmarTopology_t ws4{9, 9, symmarLinkNvSwitch, 4, 1};
  EXPECT_EQ(symmarPlan(&ws4, 512, symmarBfloat16, symmarSum, &family), symmarSuccess);
  unsetenv("SYMMAR_TABLE_FILE");
  resetProcessTables();
  unlink(path);
  EXPECT_EQ(small, symmarAlgoTwoShot) << "1 KiB: sm99's twoshot (sm90 ws=8 would take oneshot)";
  EXPECT_EQ(large, symmarAlgoNccl) << "32 MiB: above sm99's 8 MiB (sm90 ws=8 would take multimem)";
  EXPECT_EQ(family, symmarAlgoLamport) << "ws=4 has no sm99 row: sm90's lamport";
}
