// Table entries for the wider dtypes only (min_elem_bytes): a dtype of narrower elements skips them
// in every planning path (the allreduce, the scatter-gather collectives, the fused call), and a table
// file carries them.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "plan/planner.h"
#include "plan/table.h"

using namespace symmar;

namespace {

constexpr uint32_t kSymmetric = (1u << symmarAlgoOneShot) | (1u << symmarAlgoTwoShot) | (1u << symmarAlgoLamport);

// oneshot <= 1 KiB for every dtype, oneshot <= 4 KiB for 4-byte and wider, twoshot <= 64 KiB.
TableRow rowWithAWideOnlyEntry() {
  TableRow row;
  row.num_entries = 3;
  row.entries[0] = {symmarAlgoOneShot, 1024};
  row.entries[1] = {symmarAlgoOneShot, 4096, 4};
  row.entries[2] = {symmarAlgoTwoShot, 65536};
  return row;
}

}  // namespace

TEST(ElemWidth, AnEntryForWideDtypesIsSkippedByNarrowerOnes) {
  const TableRow row = rowWithAWideOnlyEntry();
  const uint32_t all = kSymmetric | (1u << symmarAlgoMpi);
  for (size_t elem : {4, 8}) {
    EXPECT_EQ(chooseAlgo(row, all, 1024, elem), symmarAlgoOneShot) << elem;
    EXPECT_EQ(chooseAlgo(row, all, 4096, elem), symmarAlgoOneShot) << elem << "-byte dtypes take the entry";
    EXPECT_EQ(chooseAlgo(row, all, 4097, elem), symmarAlgoTwoShot) << elem;
  }
  for (size_t elem : {1, 2}) {
    EXPECT_EQ(chooseAlgo(row, all, 1024, elem), symmarAlgoOneShot) << elem;
    EXPECT_EQ(chooseAlgo(row, all, 1025, elem), symmarAlgoTwoShot) << elem << "-byte dtypes skip it";
    EXPECT_EQ(chooseAlgo(row, all, 4096, elem), symmarAlgoTwoShot) << elem;
  }
  EXPECT_EQ(chooseAlgo(row, all, 65537, 2), symmarAlgoMpi) << "past the last threshold: the fallback";
}

TEST(ElemWidth, WithoutAFallbackAWideOnlyLastEntryDoesNotServeNarrowDtypes) {
  TableRow row;
  row.num_entries = 2;
  row.entries[0] = {symmarAlgoTwoShot, 1024};
  row.entries[1] = {symmarAlgoOneShot, kUnbounded, 8};
  EXPECT_EQ(chooseAlgo(row, kSymmetric, 1 << 20, 8), symmarAlgoOneShot);
  EXPECT_EQ(chooseAlgo(row, kSymmetric, 1 << 20, 4), symmarAlgoTwoShot)
      << "the largest entry that serves 4-byte dtypes, chunked";
}

TEST(ElemWidth, TheFusedRowsEntriesForWideDtypesAreSkippedByNarrowerOnes) {
  const symmarTopology_t host{0, 0, symmarLinkHostMemory, 2, 0};
  TableRow allreduce;  // two-shot at every size
  allreduce.num_entries = 1;
  allreduce.entries[0] = {symmarAlgoTwoShot, kUnbounded};
  TableRow fused;
  fused.coll = Collective::kAddRmsNorm;
  fused.num_entries = 1;
  fused.entries[0] = {symmarAlgoOneShot, 64 * 1024, 4};
  // hidden 1024: 4 KiB a float32 row, 2 KiB a bf16 row.
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host, 0, 16, 1024, symmarFloat32), symmarAlgoOneShot) << "64 KiB";
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host, 0, 17, 1024, symmarFloat32), symmarAlgoAuto)
      << "past the float32 row's last threshold: unfused";
  // For bf16 the row has no entry: the allreduce's row decides (two-shot), at every size.
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host, 0, 16, 1024, symmarBfloat16), symmarAlgoTwoShot);
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host, 0, 64, 1024, symmarBfloat16), symmarAlgoTwoShot)
      << "the float32 threshold is no limit for bf16";
}

TEST(ElemWidth, ScatterGatherRowsSkipThemByTheRequestsDtype) {
  const symmarTopology_t host{0, 0, symmarLinkHostMemory, 2, 0};
  TableRow row;
  row.coll = Collective::kReduceScatter;
  row.num_entries = 2;
  row.entries[0] = {symmarAlgoLamport, 4096, 4};
  row.entries[1] = {symmarAlgoOneShot, kUnbounded};
  const uint32_t all = kSymmetric;
  // 1 KiB a rank: 2 KiB the whole buffer.
  EXPECT_EQ(planScatterGather(row, host, 0, Request{symmarFloat32, symmarSum, 1024, Collective::kReduceScatter}, all),
            symmarAlgoLamport);
  EXPECT_EQ(planScatterGather(row, host, 0, Request{symmarBfloat16, symmarSum, 1024, Collective::kReduceScatter}, all),
            symmarAlgoOneShot);
}

TEST(ElemWidth, ATableFileCarriesTheWidth) {
  Tables t = Tables::builtin();
  ASSERT_EQ(t.loadJson(R"({"rows": [{"arch": "host", "link": "host", "world": 3,
                                     "algos": [{"algo": "oneshot", "max_bytes": "1K"},
                                               {"algo": "oneshot", "max_bytes": "8K", "min_elem_bytes": 4},
                                               {"algo": "twoshot", "max_bytes": "unbounded"}]}]})",
                       "widths.json"),
            symmarSuccess)
      << threadLastError();
  const TableRow* row = t.find(kArchHost, symmarLinkHostMemory, 3);
  ASSERT_NE(row, nullptr);
  ASSERT_EQ(row->num_entries, 3);
  EXPECT_EQ(row->entries[0].min_elem_bytes, 0);
  EXPECT_EQ(row->entries[1].min_elem_bytes, 4);
  EXPECT_EQ(row->entries[2].min_elem_bytes, 0);
  EXPECT_EQ(chooseAlgo(*row, kSymmetric, 8192, 4), symmarAlgoOneShot);
  EXPECT_EQ(chooseAlgo(*row, kSymmetric, 8192, 2), symmarAlgoTwoShot);
}
