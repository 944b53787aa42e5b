// Table files: a good file overrides rows; every kind of malformed file gives
// symmarInvalidArgument with the file, the field and the reason in the last error.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/error.h"
#include "plan/planner.h"
#include "plan/table.h"

using namespace symmar;

namespace {

std::string writeFile(const std::string& text) {
  char path[] = "/tmp/symmar-table-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  return path;
}

const char* kGood = R"({"rows": [
  {"arch": "sm120", "link": "pcie", "world": [2, 4], "source": "tuned on 4x RTX PRO 6000",
   "algos": [{"algo": "oneshot", "max_bytes": "256K"}, {"algo": "twoshot", "max_bytes": 33554432}]},
  {"arch": "sm89", "link": "pcie", "world": 2, "algos": [{"algo": "twoshot", "max_bytes": "unbounded"}]}
]})";

}  // namespace

TEST(TableFile, GoodFileOverridesAndAddsRows) {
  Tables t = Tables::builtin();
  std::string path = writeFile(kGood);
  ASSERT_EQ(t.loadFile(path.c_str()), symmarSuccess) << threadLastError();
  const TableRow* row = t.find(120, symmarLinkPcie, 4);
  ASSERT_NE(row, nullptr);
  ASSERT_EQ(row->num_entries, 2);
  EXPECT_EQ(row->entries[0].max_bytes, 256u << 10);
  EXPECT_EQ(row->entries[1].algo, symmarAlgoTwoShot);
  EXPECT_EQ(row->source, "tuned on 4x RTX PRO 6000");
  EXPECT_EQ(t.find(120, symmarLinkPcie, 3)->entries[0].max_bytes, Tables::builtin().find(120, symmarLinkPcie, 3)->entries[0].max_bytes)
      << "rows not in the file keep their built-in values";
  EXPECT_EQ(t.resolve(8, 9, symmarLinkPcie, 2)->arch, 89) << "a new arch key is served exactly";
  EXPECT_EQ(t.find(89, symmarLinkPcie, 2)->entries[0].max_bytes, kUnbounded);
  unlink(path.c_str());
}

TEST(TableFile, EnvironmentFileFeedsSymmarPlan) {
  std::string path = writeFile(
      R"({"rows": [{"arch": "sm90", "link": "nvswitch", "world": 8, "algos": [{"algo": "twoshot", "max_bytes": "1G"}]}]})");
  setenv("SYMMAR_TABLE_FILE", path.c_str(), 1);
  resetProcessTables();
  symmarTopology_t topo{9, 0, symmarLinkNvSwitch, 8, 1};
  symmarAlgo_t a;
  ASSERT_EQ(symmarPlan(&topo, 1024, symmarBfloat16, symmarSum, &a), symmarSuccess);
  EXPECT_EQ(a, symmarAlgoTwoShot);
  unsetenv("SYMMAR_TABLE_FILE");
  resetProcessTables();
  ASSERT_EQ(symmarPlan(&topo, 1024, symmarBfloat16, symmarSum, &a), symmarSuccess);
  EXPECT_EQ(a, symmarAlgoLamport) << "the built-in sm90 nvswitch ws=8 row again: lamport to 16 KiB";
  unlink(path.c_str());
}

struct BadCase {
  const char* name;
  const char* text;
  const char* field;   // must appear in the error
  const char* reason;  // must appear in the error
};

class MalformedTableFile : public ::testing::TestWithParam<BadCase> {};

TEST_P(MalformedTableFile, GivesInvalidArgumentNamingFileFieldAndReason) {
  const BadCase& c = GetParam();
  Tables t = Tables::builtin();
  std::string path = writeFile(c.text);
  EXPECT_EQ(t.loadFile(path.c_str()), symmarInvalidArgument);
  const std::string& err = threadLastError();
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find(c.field), std::string::npos) << err;
  EXPECT_NE(err.find(c.reason), std::string::npos) << err;
  EXPECT_EQ(t.rows().size(), Tables::builtin().rows().size()) << "a bad file changes nothing";
  unlink(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, MalformedTableFile,
    ::testing::Values(
        BadCase{"NotJson", "{\"rows\": [", "(document)", "not valid JSON"}, BadCase{"NoRows", "{}", "rows", "missing"},
        BadCase{"UnknownTopField", R"({"rows": [], "rowz": 1})", "rowz", "unknown field"},
        BadCase{
            "UnknownAlgo",
            R"({"rows": [{"arch": "sm90", "link": "pcie", "world": 2, "algos": [{"algo": "ring", "max_bytes": 1}]}]})",
            "rows[0].algos[0].algo", "unknown algorithm"},
        BadCase{
            "NonIncreasing",
            R"({"rows": [{"arch": "sm90", "link": "pcie", "world": 2, "algos": [{"algo": "oneshot", "max_bytes": 4096},
                   {"algo": "twoshot", "max_bytes": 4096}]}]})",
            "rows[0].algos[1].max_bytes", "thresholds must increase"},
        BadCase{"BadArch", R"({"rows": [{"arch": "volta", "link": "pcie", "world": 2, "algos": []}]})", "rows[0].arch",
                "unknown arch key"},
        BadCase{"BadLink", R"({"rows": [{"arch": "sm90", "link": "infiniband", "world": 2, "algos": []}]})",
                "rows[0].link", "unknown link"},
        BadCase{"WorldOutOfRange", R"({"rows": [{"arch": "sm90", "link": "pcie", "world": 9, "algos": []}]})",
                "rows[0].world", "outside 2..8"},
        BadCase{"UnknownRowField",
                R"({"rows": [{"arch": "sm90", "link": "pcie", "world": 2, "algos": [], "prio": 1}]})", "rows[0].prio",
                "unknown field"},
        BadCase{
            "BadSize",
            R"({"rows": [{"arch": "sm90", "link": "pcie", "world": 2, "algos": [{"algo": "oneshot", "max_bytes": "lots"}]}]})",
            "rows[0].algos[0].max_bytes", "expected a byte count"},
        BadCase{"UnknownCollective",
                R"({"rows": [{"arch": "sm90", "link": "pcie", "world": 2, "collective": "alltoall", "algos": []}]})",
                "rows[0].collective",
                "expected \"allreduce\", \"reducescatter\", \"allgather\" or \"addrmsnorm\", got \"alltoall\""},
        BadCase{"FusedRowNamingAnotherAlgorithm",
                R"({"rows": [{"arch": "host", "link": "host", "world": 2, "collective": "addrmsnorm",
                              "algos": [{"algo": "oneshot", "max_bytes": 1024}, {"algo": "multimem", "max_bytes": 4096}]}]})",
                "rows[0].algos[1].algo", "the fused forms are lamport, oneshot and twoshot, not \"multimem\""},
        BadCase{"CollectiveNotAString",
                R"({"rows": [{"arch": "sm90", "link": "pcie", "world": 2, "collective": 1, "algos": []}]})",
                "rows[0].collective", "expected \"allreduce\""},
        BadCase{"TooManyEntries",
                R"({"rows": [{"arch": "sm90", "link": "pcie", "world": 2, "algos": [{"algo": "oneshot", "max_bytes": 1},
                   {"algo": "oneshot", "max_bytes": 2}, {"algo": "oneshot", "max_bytes": 3}, {"algo": "oneshot", "max_bytes": 4},
                   {"algo": "oneshot", "max_bytes": 5}]}]})",
                "rows[0].algos", "at most 4"},
        BadCase{"MinElemBytesNotAWidth",
                R"({"rows": [{"arch": "host", "link": "host", "world": 2,
                              "algos": [{"algo": "oneshot", "max_bytes": 1024, "min_elem_bytes": 3}]}]})",
                "rows[0].algos[0].min_elem_bytes", "expected 2, 4 or 8"},
        BadCase{"MinElemBytesAsAString",
                R"({"rows": [{"arch": "host", "link": "host", "world": 2,
                              "algos": [{"algo": "oneshot", "max_bytes": 1024, "min_elem_bytes": "4"}]}]})",
                "rows[0].algos[0].min_elem_bytes", "expected 2, 4 or 8"},
        BadCase{"UnknownEntryField",
                R"({"rows": [{"arch": "host", "link": "host", "world": 2,
                              "algos": [{"algo": "oneshot", "max_bytes": 1024, "dtype": "float"}]}]})",
                "rows[0].algos[0]", "optionally \"min_elem_bytes\""}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

TEST(TableFile, MissingFileIsAnError) {
  Tables t = Tables::builtin();
  EXPECT_EQ(t.loadFile("/nonexistent/symmar.json"), symmarInvalidArgument);
  EXPECT_NE(threadLastError().find("cannot be opened"), std::string::npos);
}

TEST(TableFile, BadEnvironmentFileFailsSymmarPlanWithItsReason) {
  std::string path = writeFile("[1, 2]");
  setenv("SYMMAR_TABLE_FILE", path.c_str(), 1);
  resetProcessTables();
  symmarTopology_t topo{9, 0, symmarLinkNvSwitch, 8, 1};
  symmarAlgo_t a;
  EXPECT_EQ(symmarPlan(&topo, 1024, symmarBfloat16, symmarSum, &a), symmarInvalidArgument);
  EXPECT_NE(std::string(symmarGetLastError(nullptr)).find("top level must be an object"), std::string::npos);
  unsetenv("SYMMAR_TABLE_FILE");
  resetProcessTables();
  unlink(path.c_str());
}

// Regression: a FIFO blocked comm creation forever and /dev/zero ate memory.
TEST(TableFile, OnlyBoundedRegularFilesAreRead) {
  Tables t = Tables::builtin();
  char dir[] = "/tmp/symmar-fifo-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/table";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(t.loadFile(fifo.c_str()), symmarInvalidArgument);  // returns at once, no writer needed
  EXPECT_NE(threadLastError().find("not a regular file"), std::string::npos) << threadLastError();
  unlink(fifo.c_str());
  rmdir(dir);
  EXPECT_EQ(t.loadFile("/dev/zero"), symmarInvalidArgument);
  EXPECT_NE(threadLastError().find("not a regular file"), std::string::npos) << threadLastError();
  std::string big = std::string(R"({"rows": [], "comment": ")") + std::string(kMaxTableFileBytes, 'x') + "\"}";
  std::string path = writeFile(big);
  EXPECT_EQ(t.loadFile(path.c_str()), symmarInvalidArgument);
  EXPECT_NE(threadLastError().find("allowed"), std::string::npos) << threadLastError();
  unlink(path.c_str());
}

// Regression (found by fuzz_table_file): a world of 2^32 + 2 was narrowed to 2 and accepted.
TEST(TableFile, WorldSizesAreCheckedBeforeNarrowing) {
  for (const char* world : {"1", "9", "[1, 3]", "4294967298", "-4294967294", "18446744073709551615", "[2, 4294967300]"}) {
    Tables t = Tables::builtin();
    std::string text = std::string(R"({"rows": [{"arch": "sm90", "link": "pcie", "world": )") + world +
                       R"(, "algos": []}]})";
    EXPECT_EQ(t.loadJson(text, "test"), symmarInvalidArgument) << world;
    EXPECT_NE(threadLastError().find("outside 2..8"), std::string::npos) << threadLastError();
  }
}
