// Every algorithm is one record (plan/algorithms.cc): each record has a name that parses back, is
// listed by the environment texts and the Python binding, can be written in a table file, and
// every refusal comes with its reason, which the forced paths print.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/names.h"
#include "plan/algorithms.h"
#include "plan/planner.h"
#include "plan/table.h"
#include "planner_test_util.h"

using namespace symmar;
using plantest::topo;

namespace {

std::string readSource(const char* relative) {
  std::ifstream in(std::string(SYMMAR_SOURCE_DIR) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}


TEST(AlgorithmRecords, EveryAlgorithmHasOneRecordInEnumOrder) {
  size_t n = 0;
  const AlgorithmTraits* traits = algorithmTraitsTable(&n);
  ASSERT_EQ(n, static_cast<size_t>(symmarNumAlgos - 1)) << "every symmarAlgo_t but auto has a record";
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(traits[i].algo, static_cast<symmarAlgo_t>(i + 1));
  EXPECT_EQ(canImplement(symmarAlgoAuto, topo(0, 0, symmarLinkHostMemory, 2, 0), {symmarFloat32, symmarSum, 4}, 0),
            Refusal::kNotAnAlgorithm);
}

TEST(AlgorithmRecords, EveryRecordIsNamedInEveryPlaceThatListsAlgorithms) {
  const std::string env_algo = envInfo("SYMMAR_ALGO")->values;
  const std::string env_disable = envInfo("SYMMAR_DISABLE")->values;
  const std::string python = readSource("python/symmar/_args.py");
  ASSERT_FALSE(python.empty()) << "python/symmar/_args.py not found under " << SYMMAR_SOURCE_DIR;
  size_t n = 0;
  const AlgorithmTraits* traits = algorithmTraitsTable(&n);
  for (size_t i = 0; i < n; ++i) {
    const symmarAlgo_t a = traits[i].algo;
    const std::string name = algoName(a);
    SCOPED_TRACE(name);
    EXPECT_NE(name, "unknown");
    EXPECT_EQ(std::string(symmarAlgoName(a)), name) << "the C API's name";
    symmarAlgo_t back;
    ASSERT_TRUE(parseAlgoName(name.c_str(), &back));
    EXPECT_EQ(back, a);
    EXPECT_NE(env_algo.find(name), std::string::npos) << "SYMMAR_ALGO's values: " << env_algo;
    EXPECT_NE(env_disable.find(name), std::string::npos) << "SYMMAR_DISABLE's values: " << env_disable;
    EXPECT_NE(algoNameList(",").find(name), std::string::npos);
    // The Python binding names it with the C enum's value.
    EXPECT_NE(python.find("\"" + name + "\": " + std::to_string(static_cast<int>(a))), std::string::npos);
    // A table file may give it a threshold.
    char path[] = "/tmp/symmar_record_XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    const std::string file = R"({"rows": [{"arch": "sm90", "link": "nvlink", "world": 2, "algos": [{"algo": ")" + name +
                             R"(", "max_bytes": 4096}]}]})";
    ASSERT_EQ(write(fd, file.data(), file.size()), static_cast<ssize_t>(file.size()));
    close(fd);
    Tables t;
    EXPECT_EQ(t.loadFile(path), symmarSuccess) << file;
    unlink(path);
  }
}

// The Python binding spells the C enums out (it must import without loading the library): every
// dtype and link name with its value, as core/names.cc has them.
TEST(AlgorithmRecords, ThePythonBindingsEnumsMatchTheLibrarys) {
  const std::string python = readSource("python/symmar/_args.py");
  for (int d = 0; d < symmarNumTypes; ++d) {
    const std::string entry =
        "\"" + std::string(dtypeName(static_cast<symmarDataType_t>(d))) + "\": " + std::to_string(d);
    EXPECT_NE(python.find(entry), std::string::npos) << entry;
  }
  for (int l = 0; l < symmarNumLinks; ++l) {
    const std::string entry = "\"" + std::string(linkName(static_cast<symmarLink_t>(l))) + "\": " + std::to_string(l);
    EXPECT_NE(python.find(entry), std::string::npos) << entry;
  }
  for (int o = 0; o < symmarNumOps; ++o) {
    const std::string entry = "\"" + std::string(opName(static_cast<symmarRedOp_t>(o))) + "\": " + std::to_string(o);
    EXPECT_NE(python.find(entry), std::string::npos) << entry;
  }
}

TEST(AlgorithmRecords, EachRefusalSaysWhy) {
  const Request small{symmarFloat32, symmarSum, 4096};
  const symmarTopology_t nvswitch = topo(9, 0, symmarLinkNvSwitch, 8, 1);
  EXPECT_EQ(canImplement(symmarAlgoMultimem, nvswitch, small, 0), Refusal::kNone);
  EXPECT_EQ(canImplement(symmarAlgoMultimem, topo(9, 0, symmarLinkNvLink, 4, 0), small, 0), Refusal::kNoSwitch);
  EXPECT_EQ(canImplement(symmarAlgoMultimem, topo(9, 0, symmarLinkNvSwitch, 8, 0), small, 0), Refusal::kNoMulticast);
  EXPECT_EQ(canImplement(symmarAlgoMultimem, topo(8, 0, symmarLinkNvSwitch, 8, 1), small, 0), Refusal::kArch);
  EXPECT_EQ(canImplement(symmarAlgoMultimem, nvswitch, {symmarFloat32, symmarMax, 4096}, 0), Refusal::kOp);
  EXPECT_EQ(canImplement(symmarAlgoOneShot, nvswitch, {symmarInt32, symmarSum, 4096}, 0), Refusal::kDtype);
  EXPECT_EQ(canImplement(symmarAlgoLamport, topo(12, 0, symmarLinkPcieNoP2P, 2, 0), small, 0), Refusal::kLink)
      << "staging in host memory is no peer access";
  const uint64_t limit = algorithmTraits(symmarAlgoLamport).max_bytes;
  EXPECT_EQ(canImplement(symmarAlgoLamport, nvswitch, {symmarFloat32, symmarSum, limit}, 0), Refusal::kNone);
  EXPECT_EQ(canImplement(symmarAlgoLamport, nvswitch, {symmarFloat32, symmarSum, limit + 4}, 0), Refusal::kTooLarge);
  const symmarTopology_t host = topo(0, 0, symmarLinkHostMemory, 2, 0);
  EXPECT_EQ(canImplement(symmarAlgoNccl, host, small, algoBit(symmarAlgoNccl)), Refusal::kNotGpu);
  EXPECT_EQ(canImplement(symmarAlgoMultimem, host, small, 0), Refusal::kNoSwitch);
  EXPECT_EQ(canImplement(symmarAlgoMpi, nvswitch, small, algoBit(symmarAlgoMpi)), Refusal::kNotHost);
  EXPECT_EQ(canImplement(symmarAlgoMpi, host, small, 0), Refusal::kNoFallback);
  EXPECT_EQ(canImplement(symmarAlgoMpi, host, small, algoBit(symmarAlgoMpi)), Refusal::kNone);
  // Every reason has its own words.
  std::set<std::string> texts;
  for (Refusal r : {Refusal::kNotAnAlgorithm, Refusal::kDtype, Refusal::kOp, Refusal::kLink, Refusal::kNoSwitch,
                    Refusal::kNotGpu, Refusal::kNotHost, Refusal::kNoMulticast, Refusal::kArch, Refusal::kTooLarge,
                    Refusal::kNoFallback, Refusal::kDisabled, Refusal::kCollective}) {
    EXPECT_TRUE(texts.insert(refusalText(r)).second) << refusalText(r);
  }
}

TEST(AlgorithmRecords, TheForcedPathsPrintTheReason) {
  symmarComm_t comm = nullptr;
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  ASSERT_EQ(symmarCommInitAll(&comm, 1, nullptr, &cfg), symmarSuccess);
  const size_t over = algorithmTraits(symmarAlgoLamport).max_bytes / 4 + 1;
  std::vector<float> buf(over, 1.0f);
  EXPECT_EQ(
      symmarAllReduceAlgo(buf.data(), buf.data(), over, symmarFloat32, symmarSum, symmarAlgoLamport, comm, nullptr),
      symmarUnsupported);
  const std::string err = symmarGetLastError(comm);
  EXPECT_NE(err.find(refusalText(Refusal::kTooLarge)), std::string::npos) << err;
  EXPECT_NE(err.find(std::to_string(algorithmTraits(symmarAlgoLamport).max_bytes) + " bytes at most"),
            std::string::npos)
      << err;
  EXPECT_EQ(symmarAllReduceAlgo(buf.data(), buf.data(), 4, symmarInt32, symmarSum, symmarAlgoLamport, comm, nullptr),
            symmarUnsupported);
  EXPECT_NE(std::string(symmarGetLastError(comm)).find(refusalText(Refusal::kDtype)), std::string::npos);
  // A host comm forced onto NCCL or multimem is told why those cannot serve it, not about peer access.
  EXPECT_EQ(symmarAllReduceAlgo(buf.data(), buf.data(), 4, symmarFloat32, symmarSum, symmarAlgoNccl, comm, nullptr),
            symmarUnsupported);
  EXPECT_NE(std::string(symmarGetLastError(comm)).find("NCCL serves GPU comms only"), std::string::npos)
      << symmarGetLastError(comm);
  EXPECT_EQ(symmarAllReduceAlgo(buf.data(), buf.data(), 4, symmarFloat32, symmarSum, symmarAlgoMultimem, comm, nullptr),
            symmarUnsupported);
  EXPECT_NE(std::string(symmarGetLastError(comm)).find(refusalText(Refusal::kNoSwitch)), std::string::npos)
      << symmarGetLastError(comm);
  setenv("SYMMAR_DISABLE", "oneshot", 1);
  reloadPlanEnv();
  EXPECT_EQ(symmarAllReduceAlgo(buf.data(), buf.data(), 4, symmarFloat32, symmarSum, symmarAlgoOneShot, comm, nullptr),
            symmarUnsupported);
  EXPECT_NE(std::string(symmarGetLastError(comm)).find("SYMMAR_DISABLE"), std::string::npos);
  unsetenv("SYMMAR_DISABLE");
  reloadPlanEnv();
  EXPECT_EQ(symmarAllReduceAlgo(buf.data(), buf.data(), 4, symmarFloat32, symmarSum, symmarAlgoOneShot, comm, nullptr),
            symmarSuccess);
  EXPECT_EQ(symmarCommDestroy(comm), symmarSuccess);
}

}  // namespace
