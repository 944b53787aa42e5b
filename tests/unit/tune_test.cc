// symmar_tune's row builder on synthetic measurements: expected thresholds, and a file that makes
// the planner pick the measured winner.
#include <cstdint>
#include <gtest/gtest.h>

#include "core/names.h"
#include "plan/planner.h"
#include "plan/table.h"
#include "tune_table.h"

using namespace tune;

namespace {

// oneshot wins to 64 KiB, twoshot to 8 MiB, the fallback above.
std::vector<Measurement> synthetic() {
  std::vector<Measurement> m;
  for (size_t b = 1024; b <= (size_t(64) << 20); b *= 2) {
    double one = 5 + b / 4000.0, two = 12 + b / 9000.0, nccl = 60 + b / 11000.0;
    m.push_back({symmarAlgoOneShot, b, one});
    m.push_back({symmarAlgoTwoShot, b, two});
    m.push_back({symmarAlgoNccl, b, nccl});
    m.push_back({symmarAlgoAuto, b, 1.0});  // auto is not a candidate
  }
  return m;
}

symmarAlgo_t winner(const std::vector<Measurement>& m, size_t bytes) {
  symmarAlgo_t best = symmarAlgoAuto;
  double t = 1e300;
  for (const Measurement& x : m) {
    if (x.bytes == bytes && x.algo != symmarAlgoAuto && x.time_us < t) {
      t = x.time_us;
      best = x.algo;
    }
  }
  return best;
}

}  // namespace

TEST(Tune, ThresholdsFollowTheCrossovers) {
  auto entries = tuneRow(synthetic(), 0.0);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].algo, symmarAlgoOneShot);
  EXPECT_EQ(entries[1].algo, symmarAlgoTwoShot);
  // one-shot: 5 + b/4000 < 12 + b/9000  <=>  b < 50400: last measured win is 32 KiB.
  EXPECT_EQ(entries[0].max_bytes, 32u << 10);
  // two-shot vs nccl: 12 + b/9000 < 60 + b/11000  <=>  b < 2.376 MB: last win 2 MiB; nccl serves above.
  EXPECT_EQ(entries[1].max_bytes, 2u << 20);
}

TEST(Tune, MarginKeepsTheIncumbentWhenTheDifferenceIsNoise) {
  std::vector<Measurement> m = {{symmarAlgoOneShot, 1024, 10.0}, {symmarAlgoTwoShot, 1024, 12.0},
                                {symmarAlgoOneShot, 2048, 10.2}, {symmarAlgoTwoShot, 2048, 10.0},  // 2% faster: noise
                                {symmarAlgoOneShot, 4096, 14.0}, {symmarAlgoTwoShot, 4096, 11.0}};
  auto loose = tuneRow(m, 0.05);
  ASSERT_EQ(loose.size(), 2u);
  EXPECT_EQ(loose[0].max_bytes, 2048u) << "one-shot keeps 2 KiB within the 5% margin";
  auto strict = tuneRow(m, 0.0);
  EXPECT_EQ(strict[0].max_bytes, 1024u);
  EXPECT_EQ(strict.back().max_bytes, UINT64_MAX) << "a symmetric winner at the top extends to any size";
}

TEST(Tune, NeverMoreThanFourEntries) {
  std::vector<Measurement> m;
  const symmarAlgo_t cycle[] = {symmarAlgoOneShot, symmarAlgoTwoShot, symmarAlgoMultimem};
  for (int i = 0; i < 12; ++i) {
    size_t b = size_t(1024) << i;
    for (symmarAlgo_t a : cycle) m.push_back({a, b, a == cycle[i % 3] ? 1.0 : 2.0});
  }
  auto entries = tuneRow(m, 0.0);
  EXPECT_LE(entries.size(), 4u);
  for (size_t i = 1; i < entries.size(); ++i) {
    EXPECT_GT(entries[i].max_bytes, entries[i - 1].max_bytes);
    EXPECT_NE(entries[i].algo, entries[i - 1].algo);
  }
}

TEST(Tune, WrittenFileLoadsAndAutoPicksTheMeasuredWinner) {
  auto m = synthetic();
  auto entries = tuneRow(m, 0.0);
  std::string json = tableFileJson("sm120", "pcie", 4, entries, "synthetic");
  symmar::Tables tables = symmar::Tables::builtin();
  ASSERT_EQ(tables.loadJson(json, "tuned.json"), symmarSuccess);
  const symmar::TableRow* row = tables.resolve(12, 0, symmarLinkPcie, 4);
  ASSERT_EQ(row->source, "synthetic");
  const uint32_t available = symmar::algoBit(symmarAlgoOneShot) | symmar::algoBit(symmarAlgoTwoShot) | symmar::algoBit(symmarAlgoNccl);
  for (const Measurement& x : m) {
    if (x.algo != symmarAlgoOneShot) continue;
    EXPECT_EQ(symmar::chooseAlgo(*row, available, x.bytes, 4), winner(m, x.bytes)) << x.bytes;
  }
}

TEST(Tune, MergingHandsANoisyRunToTheNeighbourThatCostsLeast) {
  // A fallback "wins" the first size by noise; merging must not stretch it over sizes it lost.
  std::vector<Measurement> m;
  const double one[] = {1.0, 1.0, 1.2, 2.0, 4.0, 8.0, 16.0, 30.0};
  const double two[] = {1.3, 1.3, 1.1, 2.5, 3.0, 6.0, 17.0, 20.0};
  const double mpi[] = {0.9, 1.5, 1.6, 3.0, 6.0, 12.0, 24.0, 48.0};
  for (int i = 0; i < 8; ++i) {
    size_t b = size_t(1024) << i;
    m.push_back({symmarAlgoOneShot, b, one[i]});
    m.push_back({symmarAlgoTwoShot, b, two[i]});
    m.push_back({symmarAlgoMpi, b, mpi[i]});
  }
  // Winners: mpi, one, two, one, two, two, one, two: six runs -> four entries.
  auto entries = tuneRow(m, 0.0);
  ASSERT_LE(entries.size(), 4u);
  for (const Entry& e : entries) {
    if (e.algo == symmarAlgoMpi) {
      EXPECT_LE(e.max_bytes, 1024u) << "mpi keeps at most the size it won";
    }
  }
  EXPECT_EQ(entries.back().max_bytes, UINT64_MAX);
}

// The fused call's row: the faster form while it keeps up with the unfused path, and the row ends
// where the unfused path wins by more than the margin; the planner then runs the unfused path.
TEST(Tune, TheFusedRowEndsWhereTheUnfusedPathWins) {
  // hidden 4096 bf16: 8 KiB a token. One-shot ahead to 8 tokens, two-shot at 16, the unfused path
  // ahead by 3% at 32 (noise: kept) and by 40% at 64 and after (a later fused win does not count).
  const std::vector<FusedMeasurement> m = {
      {1 << 16, 10.0, 14.0, 20.0},  // listed out of order: sorted by size
      {1 << 13, 5.0, 9.0, 12.0},   {1 << 14, 6.0, 9.5, 12.5}, {1 << 17, 18.0, 12.0, 21.0},
      {1 << 18, 30.0, 25.0, 24.5}, {1 << 19, 60.0, 56.0, 40.0}, {1 << 20, 50.0, 45.0, 80.0}};
  const std::vector<Entry> entries = tuneFusedRow(m, 0.05);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].algo, symmarAlgoOneShot);
  EXPECT_EQ(entries[0].max_bytes, uint64_t(1) << 16);
  EXPECT_EQ(entries[1].algo, symmarAlgoTwoShot);
  EXPECT_EQ(entries[1].max_bytes, uint64_t(1) << 18);
  symmar::Tables tables = symmar::Tables::builtin();
  ASSERT_EQ(tables.loadJson(tableFileJson("sm90", "nvlink", 4, entries, "synthetic", 1, "addrmsnorm"), "t.json"),
            symmarSuccess);
  const symmar::TableRow* fused = tables.resolve(9, 0, symmarLinkNvLink, 4, 1, symmar::Collective::kAddRmsNorm);
  ASSERT_EQ(fused->source, "synthetic");
  const symmarTopology_t topo{9, 0, symmarLinkNvLink, 4, 0};
  const symmar::TableRow& allreduce = *tables.resolve(9, 0, symmarLinkNvLink, 4);
  EXPECT_EQ(symmar::planAddRmsNorm(allreduce, *fused, topo, 0, 8, 4096, symmarBfloat16), symmarAlgoOneShot);
  EXPECT_EQ(symmar::planAddRmsNorm(allreduce, *fused, topo, 0, 16, 4096, symmarBfloat16), symmarAlgoTwoShot);
  EXPECT_EQ(symmar::planAddRmsNorm(allreduce, *fused, topo, 0, 32, 4096, symmarBfloat16), symmarAlgoTwoShot);
  EXPECT_EQ(symmar::planAddRmsNorm(allreduce, *fused, topo, 0, 64, 4096, symmarBfloat16), symmarAlgoAuto);
  EXPECT_EQ(symmar::planAddRmsNorm(allreduce, *fused, topo, 0, 128, 4096, symmarBfloat16), symmarAlgoAuto);
}

// The lamport form where it was measured and won (the smallest sizes; 0: not measured past its
// slot), written into the row and planned from the file: hidden 4096 bf16, 8 ranks on NVLink.
TEST(Tune, TheFusedRowNamesLamportWhereItWon) {
  const std::vector<FusedMeasurement> m = {{1 << 13, 9.0, 12.0, 14.0, 6.0},
                                           {1 << 15, 10.0, 12.5, 15.0, 7.5},
                                           {1 << 17, 12.0, 13.0, 17.0, 12.4},  // within 5%: lamport keeps it
                                           {1 << 18, 13.0, 14.0, 18.0, 15.0},
                                           {1 << 19, 20.0, 18.0, 24.0}};
  const std::vector<Entry> entries = tuneFusedRow(m, 0.05);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].algo, symmarAlgoLamport);
  EXPECT_EQ(entries[0].max_bytes, uint64_t(1) << 17);
  EXPECT_EQ(entries[1].algo, symmarAlgoOneShot);
  EXPECT_EQ(entries[1].max_bytes, uint64_t(1) << 18);
  EXPECT_EQ(entries[2].algo, symmarAlgoTwoShot);
  symmar::Tables tables = symmar::Tables::builtin();
  ASSERT_EQ(tables.loadJson(tableFileJson("sm90", "nvlink", 8, entries, "synthetic", 1, "addrmsnorm"), "t.json"),
            symmarSuccess);
  const symmar::TableRow* fused = tables.resolve(9, 0, symmarLinkNvLink, 8, 1, symmar::Collective::kAddRmsNorm);
  const symmarTopology_t topo{9, 0, symmarLinkNvLink, 8, 0};
  const symmar::TableRow& allreduce = *tables.resolve(9, 0, symmarLinkNvLink, 8);
  EXPECT_EQ(symmar::planAddRmsNorm(allreduce, *fused, topo, 0, 1, 4096, symmarBfloat16), symmarAlgoLamport);
  EXPECT_EQ(symmar::planAddRmsNorm(allreduce, *fused, topo, 0, 16, 4096, symmarBfloat16), symmarAlgoLamport);
  EXPECT_EQ(symmar::planAddRmsNorm(allreduce, *fused, topo, 0, 17, 4096, symmarBfloat16), symmarAlgoOneShot);
  EXPECT_EQ(symmar::planAddRmsNorm(allreduce, *fused, topo, 0, 64, 4096, symmarBfloat16), symmarAlgoTwoShot);
}

// Losing from the smallest size: a row that holds no call (an empty row would defer to the
// allreduce's row, which runs a fused form).
TEST(Tune, AFusedCallThatAlwaysLosesGetsARowOfOneByte) {
  const std::vector<Entry> entries = tuneFusedRow({{1 << 13, 20.0, 22.0, 10.0}, {1 << 14, 25.0, 21.0, 12.0}}, 0.05);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].max_bytes, 1u);
}

TEST(Tune, AReduceScatterOrAllGatherRowIsKeyedByItsCollective) {
  const std::vector<Entry> entries = {{symmarAlgoOneShot, 65536}};
  for (const char* name : {"reducescatter", "allgather"}) {
    std::string json = tableFileJson("sm120", "pcie", 4, entries, "synthetic", 1, name);
    symmar::Tables tables = symmar::Tables::builtin();
    ASSERT_EQ(tables.loadJson(json, "tuned.json"), symmarSuccess) << json;
    symmar::Collective coll;
    ASSERT_TRUE(symmar::parseCollectiveName(name, &coll));
    const symmar::TableRow* row = tables.resolve(12, 0, symmarLinkPcie, 4, 1, coll);
    EXPECT_EQ(row->source, "synthetic") << name;
    EXPECT_EQ(row->entries[0].max_bytes, 65536u);
    EXPECT_NE(tables.resolve(12, 0, symmarLinkPcie, 4)->source, "synthetic") << "the allreduce row is untouched";
  }
}

// symmar_tune -C addrmsnorm times the unfused path as the auto call of a comm made with these rows:
// whatever the comm's key (every arch family, link and world), its fused call must plan unfused at
// every size, and its allreduce rows must stay as they were.
TEST(Tune, TheUnfusedTableSendsEveryFusedCallOfEveryKeyToTheUnfusedPath) {
  symmar::Tables tables = symmar::Tables::builtin();
  ASSERT_EQ(tables.loadJson(unfusedTableJson(), "unfused.json"), symmarSuccess) << unfusedTableJson();
  const symmar::Tables builtin = symmar::Tables::builtin();
  struct Key {
    int major, minor;
    symmarLink_t link;
  };
  std::vector<Key> keys = {{0, 0, symmarLinkHostMemory}};
  for (const auto& cc : {std::pair<int, int>{8, 0}, {9, 0}, {10, 0}, {10, 3}, {12, 0}, {12, 1}, {15, 0}}) {
    for (symmarLink_t l : {symmarLinkNvSwitch, symmarLinkNvLink, symmarLinkPcie, symmarLinkPcieNoP2P}) {
      keys.push_back({cc.first, cc.second, l});
    }
  }
  for (const Key& k : keys) {
    for (int world = 2; world <= 8; ++world) {
      const symmarTopology_t topo{k.major, k.minor, k.link, world, 0};
      const symmar::TableRow& allreduce = *tables.resolve(k.major, k.minor, k.link, world);
      const symmar::TableRow& fused =
          *tables.resolve(k.major, k.minor, k.link, world, 1, symmar::Collective::kAddRmsNorm);
      EXPECT_EQ(allreduce.source, builtin.resolve(k.major, k.minor, k.link, world)->source);
      for (size_t tokens : {1, 8, 64, 4096}) {
        EXPECT_EQ(symmar::planAddRmsNorm(allreduce, fused, topo, 0, tokens, 4096, symmarBfloat16), symmarAlgoAuto)
            << "sm" << k.major << k.minor << " " << symmar::linkName(k.link) << " world " << world << ", " << tokens
            << " tokens";
      }
    }
  }
}
