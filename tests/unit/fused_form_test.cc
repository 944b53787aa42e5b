// The fused call's form (allreduce + residual add + RMSNorm): it gives way to the one-shot where
// only the one-shot's rows fit, says what a form needs where none serves, follows its own rows by
// message bytes (or the allreduce row without them), stops where the built-in rows say it lost,
// and leaves the unfused call past the rows cap.
#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <string>

#include "core/error.h"
#include "core/names.h"
#include "plan/planner.h"
#include "plan/table.h"
#include "planner_test_util.h"

using namespace symmar;
using plantest::kGpuLinks;
using plantest::topo;

namespace {

// A row of the given entries: an allreduce row, or the fused call's (kAddRmsNorm).
TableRow rowOf(Collective coll, std::initializer_list<TableEntry> entries) {
  TableRow row;
  row.coll = coll;
  for (const TableEntry& e : entries) row.entries[row.num_entries++] = e;
  return row;
}

}  // namespace

TEST(FusedForm, APlannedTwoShotThatDoesNotFitBecomesTheOneShot) {
  // 8191 float32 a row against a 32768-byte half: the one-shot stages 32764 bytes a row, the
  // two-shot publishes 65536 (two parts, each vector-aligned).
  AddRmsNormCall c{nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1.0f, 0.0f, 64, 8191, symmarFloat32};
  const size_t rows[2] = {32764, 65536};
  symmarAlgo_t algo = symmarAlgoTwoShot;
  c.planned = true;
  ASSERT_EQ(fitAddRmsNormForm(c, rows, 32768, &algo), symmarSuccess);
  EXPECT_EQ(algo, symmarAlgoOneShot);
  algo = symmarAlgoOneShot;
  ASSERT_EQ(fitAddRmsNormForm(c, rows, 32768, &algo), symmarSuccess);
  EXPECT_EQ(algo, symmarAlgoOneShot);
  algo = symmarAlgoTwoShot;
  ASSERT_EQ(fitAddRmsNormForm(c, rows, 65536, &algo), symmarSuccess) << "both fit: the plan stands";
  EXPECT_EQ(algo, symmarAlgoTwoShot);
}

TEST(FusedForm, AFormThatCannotServeSaysWhatARowOfItNeeds) {
  AddRmsNormCall c{nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1.0f, 0.0f, 64, 8191, symmarFloat32};
  const size_t rows[2] = {32764, 65536};
  symmarAlgo_t algo = symmarAlgoTwoShot;  // forced: not changed
  ASSERT_EQ(fitAddRmsNormForm(c, rows, 32768, &algo), symmarUnsupported);
  EXPECT_EQ(algo, symmarAlgoTwoShot);
  std::string why = threadLastError();
  EXPECT_NE(why.find("the fused twoshot form needs 65536 bytes"), std::string::npos) << why;
  EXPECT_NE(why.find("what it stages and publishes of a row"), std::string::npos) << why;
  EXPECT_NE(why.find("a half has 32768 bytes"), std::string::npos) << why;
  EXPECT_NE(why.find("the oneshot form fits"), std::string::npos) << why;
  // Neither fits, planned or not: the one-shot's need is named.
  c.planned = true;
  ASSERT_EQ(fitAddRmsNormForm(c, rows, 16384, &algo), symmarUnsupported);
  why = threadLastError();
  EXPECT_NE(why.find("the fused oneshot form needs 32764 bytes"), std::string::npos) << why;
  EXPECT_NE(why.find("a half has 16384 bytes"), std::string::npos) << why;
  EXPECT_EQ(why.find("fits"), std::string::npos) << why;
}

// The fused call's own row chooses its form by the message's bytes (tokens x hidden elements):
// the first available form whose threshold holds the call, and the unfused calls past the last.
TEST(FusedForm, ItsOwnRowChoosesByTheMessageBytes) {
  const symmarTopology_t host = topo(0, 0, symmarLinkHostMemory, 2, 0);
  // The allreduce row says two-shot at every size: the fused row must win over it.
  const TableRow allreduce = rowOf(Collective::kAllReduce, {{symmarAlgoTwoShot, kUnbounded}});
  TableRow fused = rowOf(Collective::kAddRmsNorm, {{symmarAlgoOneShot, 64 * 1024}, {symmarAlgoTwoShot, 1024 * 1024}});
  // hidden 4096 bf16: 8 KiB a row.
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host, 0, 8, 4096, symmarBfloat16), symmarAlgoOneShot) << "64 KiB";
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host, 0, 9, 4096, symmarBfloat16), symmarAlgoTwoShot) << "72 KiB";
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host, 0, 128, 4096, symmarBfloat16), symmarAlgoTwoShot) << "1 MiB";
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host, 0, 129, 4096, symmarBfloat16), symmarAlgoAuto)
      << "past the last threshold: the allreduce, then the norm";
  // Fewer tokens than ranks where the row says two-shot: the one-shot where the allreduce of these
  // bytes is a one-shot, the unfused call where it is a two-shot (which splits within rows).
  fused.entries[0] = {symmarAlgoTwoShot, kUnbounded};
  fused.num_entries = 1;
  const symmarTopology_t host4 = topo(0, 0, symmarLinkHostMemory, 4, 0);
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host4, 0, 3, 4096, symmarBfloat16), symmarAlgoAuto);
  TableRow one_shot_allreduce = allreduce;
  one_shot_allreduce.entries[0] = {symmarAlgoOneShot, kUnbounded};
  EXPECT_EQ(planAddRmsNorm(one_shot_allreduce, fused, host4, 0, 3, 4096, symmarBfloat16), symmarAlgoOneShot);
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host4, 0, 4, 4096, symmarBfloat16), symmarAlgoTwoShot)
      << "a token per rank";
  // ... and where the row itself says one-shot, one-shot whatever the allreduce says.
  fused.entries[0] = {symmarAlgoOneShot, kUnbounded};
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host4, 0, 3, 4096, symmarBfloat16), symmarAlgoOneShot);
  // ... but past the row's last threshold, unfused however few the tokens: a row whose fused call
  // lost from the smallest size measured (1 byte) holds no call.
  fused.entries[0] = {symmarAlgoOneShot, 16 * 1024};
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, topo(0, 0, symmarLinkHostMemory, 4, 0), 0, 3, 4096, symmarBfloat16),
            symmarAlgoAuto);
  fused.entries[0] = {symmarAlgoOneShot, 1};
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host, 0, 1, 4096, symmarBfloat16), symmarAlgoAuto);
  // A form the environment disabled gives way to the other.
  fused.entries[0] = {symmarAlgoOneShot, 64 * 1024};
  fused.entries[1] = {symmarAlgoTwoShot, 1024 * 1024};
  fused.num_entries = 2;
  setenv("SYMMAR_DISABLE", "twoshot", 1);
  reloadPlanEnv();
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host, 0, 9, 4096, symmarBfloat16), symmarAlgoOneShot);
  setenv("SYMMAR_DISABLE", "oneshot", 1);
  reloadPlanEnv();
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host, 0, 8, 4096, symmarBfloat16), symmarAlgoTwoShot);
  unsetenv("SYMMAR_DISABLE");
  reloadPlanEnv();
}

// A fused row that names lamport first: the lamport form where it holds the call, can serve it
// (a GPU link with peer access, rows of whole 16-byte vectors, at most 256 KiB) and is not
// disabled; the next entry that holds the call otherwise. Also with fewer tokens than ranks.
TEST(FusedForm, ARowNamingLamportGivesItWhereTheFormServes) {
  const TableRow allreduce = rowOf(Collective::kAllReduce, {{symmarAlgoTwoShot, kUnbounded}});
  TableRow fused = rowOf(Collective::kAddRmsNorm, {{symmarAlgoLamport, 64 * 1024}, {symmarAlgoOneShot, 256 * 1024}});
  const symmarTopology_t nvl = topo(9, 0, symmarLinkNvLink, 8, 0);
  // hidden 4096 bf16: 8 KiB a row, a whole number of vectors.
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, nvl, 0, 1, 4096, symmarBfloat16), symmarAlgoLamport) << "1 token";
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, nvl, 0, 8, 4096, symmarBfloat16), symmarAlgoLamport) << "64 KiB";
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, nvl, 0, 9, 4096, symmarBfloat16), symmarAlgoOneShot) << "72 KiB";
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, nvl, 0, 2, 4095, symmarBfloat16), symmarAlgoOneShot)
      << "rows not of whole vectors";
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, topo(9, 0, symmarLinkPcieNoP2P, 2, 0), 0, 1, 4096, symmarBfloat16),
            symmarAlgoOneShot)
      << "no peer access";
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, topo(0, 0, symmarLinkHostMemory, 2, 0), 0, 1, 4096, symmarBfloat16),
            symmarAlgoOneShot)
      << "the host backend has no lamport form of the fused call";
  setenv("SYMMAR_DISABLE", "lamport", 1);
  reloadPlanEnv();
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, nvl, 0, 1, 4096, symmarBfloat16), symmarAlgoOneShot) << "disabled";
  unsetenv("SYMMAR_DISABLE");
  reloadPlanEnv();
  // Lamport beyond 256 KiB is never chosen, whatever the row says: the staged form that follows.
  fused.entries[0] = {symmarAlgoLamport, 1024 * 1024};
  fused.entries[1] = {symmarAlgoTwoShot, 2 * 1024 * 1024};
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, nvl, 0, 32, 4096, symmarBfloat16), symmarAlgoLamport) << "256 KiB";
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, nvl, 0, 33, 4096, symmarBfloat16), symmarAlgoTwoShot) << "264 KiB";
}

// Without a row of its own the fused call follows the allreduce's row for the same bytes.
TEST(FusedForm, WithoutARowItFollowsTheAllreduceRow) {
  const symmarTopology_t host = topo(0, 0, symmarLinkHostMemory, 2, 0);
  const TableRow allreduce =
      rowOf(Collective::kAllReduce, {{symmarAlgoLamport, 16 * 1024}, {symmarAlgoTwoShot, kUnbounded}});
  const TableRow none;
  EXPECT_EQ(planAddRmsNorm(allreduce, none, host, 0, 2, 4096, symmarBfloat16), symmarAlgoOneShot) << "16 KiB: lamport";
  EXPECT_EQ(planAddRmsNorm(allreduce, none, host, 0, 4, 4096, symmarBfloat16), symmarAlgoTwoShot) << "32 KiB";
}

// GPU keys have fused rows of their own: the fused one-shot up to 128 KiB (where the first GPU run
// measured it ahead: 1-8 tokens of 7168 bf16), the unfused calls past it (behind from 32 tokens:
// 0.4-0.8x), at every link and world, and for capabilities without a row of their own.
TEST(FusedForm, BuiltinGpuRowsStopTheFusedFormWhereItLost) {
  const Tables& t = Tables::builtin();
  for (symmarLink_t link : kGpuLinks) {
    for (int world = 2; world <= 8; ++world) {
      for (int major : {9, 10, 12, 13}) {
        const symmarTopology_t gpu = topo(major, 0, link, world, 0);
        const TableRow* allreduce = t.resolve(major, 0, link, world);
        const TableRow* fused = t.resolve(major, 0, link, world, 1, Collective::kAddRmsNorm);
        ASSERT_GT(fused->num_entries, 0) << "sm" << major << "0 " << linkName(link) << " world " << world;
        const std::string at = "sm" + std::to_string(major) + "0 " + linkName(link) + " world " +
                               std::to_string(world);
        EXPECT_EQ(planAddRmsNorm(*allreduce, *fused, gpu, 0, 1, 7168, symmarBfloat16), symmarAlgoOneShot) << at;
        EXPECT_EQ(planAddRmsNorm(*allreduce, *fused, gpu, 0, 9, 7168, symmarBfloat16), symmarAlgoOneShot)
            << at << ": 126 KiB";
        EXPECT_EQ(planAddRmsNorm(*allreduce, *fused, gpu, 0, 16, 4096, symmarBfloat16), symmarAlgoOneShot)
            << at << ": 128 KiB";
        EXPECT_EQ(planAddRmsNorm(*allreduce, *fused, gpu, 0, 10, 7168, symmarBfloat16), symmarAlgoAuto)
            << at << ": 140 KiB, unfused";
        EXPECT_EQ(planAddRmsNorm(*allreduce, *fused, gpu, 0, 64, 7168, symmarBfloat16), symmarAlgoAuto)
            << at << ": 64 tokens, unfused";
        EXPECT_EQ(planAddRmsNorm(*allreduce, *fused, gpu, 0, 8192, 7168, symmarBfloat16), symmarAlgoAuto)
            << at << ": prefill, unfused";
      }
    }
  }
}

// More tokens than the fused kernel's blocks (the comm's rows cap): the unfused call, whatever the
// row says; up to the cap the row decides.
TEST(FusedForm, PastTheRowsCapTheUnfusedCallServes) {
  const symmarTopology_t host = topo(0, 0, symmarLinkHostMemory, 2, 0);
  TableRow allreduce = rowOf(Collective::kAllReduce, {{symmarAlgoTwoShot, kUnbounded}});
  const TableRow fused = rowOf(Collective::kAddRmsNorm, {{symmarAlgoTwoShot, kUnbounded}});
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host, 0, 16, 64, symmarBfloat16, 16), symmarAlgoTwoShot);
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host, 0, 17, 64, symmarBfloat16, 16), symmarAlgoAuto);
  // At the cap with fewer tokens than ranks the fused one-shot where the allreduce is a one-shot.
  allreduce.entries[0] = {symmarAlgoOneShot, kUnbounded};
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host, 0, 1, 64, symmarBfloat16, 1), symmarAlgoOneShot);
  allreduce.entries[0] = {symmarAlgoTwoShot, kUnbounded};
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host, 0, 2, 64, symmarBfloat16, 1), symmarAlgoAuto);
  EXPECT_EQ(planAddRmsNorm(allreduce, fused, host, 0, 100000, 64, symmarBfloat16, 0), symmarAlgoTwoShot)
      << "0: no cap";
  const TableRow none;  // without a row of its own too
  EXPECT_EQ(planAddRmsNorm(allreduce, none, host, 0, 17, 64, symmarBfloat16, 16), symmarAlgoAuto);
}

// The built-in host rows, measured (tables_builtin.cc): at 2 ranks two-shot from 2 tokens of 7168 bf16
// to 438 (6 MiB) and one-shot above; from 3 ranks two-shot at every size with at least a token per
// rank. With fewer tokens than ranks the allreduce's row decides: one-shot to 32 KiB at 2 ranks and
// to 64 KiB at 4, so 1 token (14 KiB) at 2 ranks and 1-3 tokens (14-42 KiB) at 4 are the fused
// one-shot (at 2 ranks, 1 token of 4096-8192 bf16: 1.22-1.30x the allreduce and a separate norm,
// symmar_norm_perf, 3 runs, 2026-12-07).
TEST(FusedForm, BuiltinHostRowsGiveTheMeasuredFormAtDecodeSizes) {
  const Tables& t = Tables::builtin();
  for (int world : {2, 4}) {
    const symmarTopology_t host = topo(0, 0, symmarLinkHostMemory, world, 0);
    const TableRow* allreduce = t.resolve(0, 0, symmarLinkHostMemory, world);
    const TableRow* fused = t.resolve(0, 0, symmarLinkHostMemory, world, 1, Collective::kAddRmsNorm);
    for (int tokens = 1; tokens < world; ++tokens) {
      EXPECT_EQ(planAddRmsNorm(*allreduce, *fused, host, 0, tokens, 7168, symmarBfloat16), symmarAlgoOneShot)
          << "world " << world << ", " << tokens << " tokens of 7168 bf16";
    }
  }
  for (int world = 2; world <= 8; ++world) {
    const symmarTopology_t host = topo(0, 0, symmarLinkHostMemory, world, 0);
    const TableRow* allreduce = t.resolve(0, 0, symmarLinkHostMemory, world);
    const TableRow* fused = t.resolve(0, 0, symmarLinkHostMemory, world, 1, Collective::kAddRmsNorm);
    ASSERT_GT(fused->num_entries, 0) << "world " << world << " has a fused row";
    for (int tokens : {2, 3, 8, 13, 14, 64, 128, 192, 256, 384, 438, 439, 512}) {
      if (tokens < world) continue;  // above
      const bool two_shot = world > 2 || tokens <= 438;
      const symmarAlgo_t want = two_shot ? symmarAlgoTwoShot : symmarAlgoOneShot;
      EXPECT_EQ(planAddRmsNorm(*allreduce, *fused, host, 0, tokens, 7168, symmarBfloat16), want)
          << "world " << world << ", " << tokens << " tokens of 7168 bf16";
    }
  }
}
