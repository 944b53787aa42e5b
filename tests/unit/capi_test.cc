// C ABI argument checks: every bad input gets a specific code and a last-error text, never a crash.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "symmar/symmar.h"
#include "symmar/symmar.hpp"

namespace {

symmarComm_t hostComm(size_t staging = 0) {
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  cfg.staging_bytes = staging;
  symmarComm_t comm = nullptr;
  EXPECT_EQ(symmarCommInitAll(&comm, 1, nullptr, &cfg), symmarSuccess) << symmarGetLastError(nullptr);
  return comm;
}

std::string lastError(symmarComm_t c) { return symmarGetLastError(c); }

}  // namespace

TEST(CApi, EveryResultHasADistinctName) {
  std::vector<std::string> names;
  for (int r = 0; r < symmarNumResults; ++r) {
    std::string n = symmarGetErrorString(static_cast<symmarResult_t>(r));
    EXPECT_EQ(n.rfind("symmar", 0), 0u) << n;
    for (const std::string& other : names) EXPECT_NE(n, other);
    names.push_back(n);
  }
  EXPECT_STREQ(symmarGetErrorString(static_cast<symmarResult_t>(99)), "unknown result");
  EXPECT_STREQ(symmarGetErrorString(symmarTimeout), "symmarTimeout");
}

TEST(CApi, VersionAndNames) {
  int v = 0;
  ASSERT_EQ(symmarGetVersion(&v), symmarSuccess);
  EXPECT_EQ(v, SYMMAR_VERSION_CODE);
  EXPECT_EQ(symmarGetVersion(nullptr), symmarInvalidArgument);
  const char* expect[] = {"auto", "oneshot", "twoshot", "multimem", "nccl", "mpi", "lamport"};
  static_assert(sizeof(expect) / sizeof(expect[0]) == symmarNumAlgos, "a name for every algorithm");
  for (int a = 0; a < symmarNumAlgos; ++a) EXPECT_STREQ(symmarAlgoName(static_cast<symmarAlgo_t>(a)), expect[a]);
  EXPECT_STREQ(symmarAlgoName(static_cast<symmarAlgo_t>(42)), "unknown");
  EXPECT_EQ(symmarTypeSize(symmarBfloat16), 2u);
  EXPECT_EQ(symmarTypeSize(static_cast<symmarDataType_t>(7)), 0u);
}

TEST(CApi, NullPointersGetInvalidArgument) {
  float x = 1;
  EXPECT_EQ(symmarAllReduce(&x, &x, 1, symmarFloat32, symmarSum, nullptr, nullptr), symmarInvalidArgument);
  EXPECT_NE(lastError(nullptr).find("comm is NULL"), std::string::npos);
  EXPECT_EQ(symmarGetUniqueId(nullptr), symmarInvalidArgument);
  symmarUniqueId id{};
  EXPECT_EQ(symmarCommInitRank(nullptr, 2, id, 0, nullptr), symmarInvalidArgument);
  EXPECT_EQ(symmarCommInitAll(nullptr, 2, nullptr, nullptr), symmarInvalidArgument);
  EXPECT_EQ(symmarCommInitExternal(nullptr, 2, 0, nullptr, nullptr, nullptr), symmarInvalidArgument);
  symmarComm_t c = nullptr;
  EXPECT_EQ(symmarCommInitExternal(&c, 2, 0, nullptr, nullptr, nullptr), symmarInvalidArgument);
  EXPECT_NE(lastError(nullptr).find("allgather is NULL"), std::string::npos);
  EXPECT_EQ(symmarCommDestroy(nullptr), symmarInvalidArgument);
  EXPECT_EQ(symmarMemAlloc(nullptr, 16, nullptr), symmarInvalidArgument);
  EXPECT_EQ(symmarCommTopology(nullptr, nullptr), symmarInvalidArgument);
  symmarResult_t async;
  EXPECT_EQ(symmarCommGetAsyncError(nullptr, &async), symmarInvalidArgument);
}

TEST(CApi, BadConfigsAreRejected) {
  symmarComm_t c = nullptr;
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.size = 8;
  EXPECT_EQ(symmarCommInitAll(&c, 1, nullptr, &cfg), symmarInvalidArgument);
  EXPECT_NE(lastError(nullptr).find("config.size"), std::string::npos);
  cfg = SYMMAR_CONFIG_INIT;
  cfg.timeout_ms = -5;
  EXPECT_EQ(symmarCommInitAll(&c, 1, nullptr, &cfg), symmarInvalidArgument);
  EXPECT_NE(lastError(nullptr).find("negative"), std::string::npos);
  cfg = SYMMAR_CONFIG_INIT;
  cfg.device = -7;
  EXPECT_EQ(symmarCommInitAll(&c, 1, nullptr, &cfg), symmarInvalidArgument);
  cfg = SYMMAR_CONFIG_INIT;
  cfg.staging_bytes = 100;
  EXPECT_EQ(symmarCommInitAll(&c, 1, nullptr, &cfg), symmarInvalidArgument);
  EXPECT_NE(lastError(nullptr).find("staging_bytes"), std::string::npos);
  cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  cfg.table_file = "/nonexistent/table.json";
  EXPECT_EQ(symmarCommInitAll(&c, 1, nullptr, &cfg), symmarInvalidArgument);
  EXPECT_NE(lastError(nullptr).find("/nonexistent/table.json"), std::string::npos);
  EXPECT_EQ(symmarCommInitAll(&c, 0, nullptr, nullptr), symmarInvalidArgument);
}

TEST(CApi, BadRanksAndCorruptIdsFailBeforeConnecting) {
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  symmarComm_t c = nullptr;
  EXPECT_EQ(symmarCommInitRank(&c, 2, id, 2, nullptr), symmarInvalidArgument);
  EXPECT_EQ(symmarCommInitRank(&c, 2, id, -1, nullptr), symmarInvalidArgument);
  EXPECT_EQ(symmarCommInitRank(&c, 0, id, 0, nullptr), symmarInvalidArgument);
  symmarUniqueId bad = id;
  bad.internal[20] ^= 0x5a;  // inside the nonce: checksum no longer matches
  EXPECT_EQ(symmarCommInitRank(&c, 2, bad, 1, nullptr), symmarInvalidArgument);
  EXPECT_NE(lastError(nullptr).find("checksum"), std::string::npos);
  symmarUniqueId zero{};
  EXPECT_EQ(symmarCommInitRank(&c, 2, zero, 1, nullptr), symmarInvalidArgument);
  EXPECT_NE(lastError(nullptr).find("not a symmar id"), std::string::npos);
  EXPECT_EQ(c, nullptr);
}

TEST(CApi, CollectiveArgumentChecks) {
  symmarComm_t comm = hostComm();
  ASSERT_NE(comm, nullptr);
  std::vector<float> buf(64, 1.0f);
  EXPECT_EQ(symmarAllReduce(buf.data(), buf.data(), 4, static_cast<symmarDataType_t>(5), symmarSum, comm, nullptr),
            symmarInvalidArgument);
  EXPECT_NE(lastError(comm).find("invalid dtype"), std::string::npos);
  EXPECT_EQ(symmarAllReduce(buf.data(), buf.data(), 4, symmarFloat32, static_cast<symmarRedOp_t>(3), comm, nullptr),
            symmarInvalidArgument);
  EXPECT_NE(lastError(comm).find("invalid op"), std::string::npos);
  EXPECT_EQ(symmarAllReduceAlgo(buf.data(), buf.data(), 4, symmarFloat32, symmarSum, static_cast<symmarAlgo_t>(9),
                                comm, nullptr),
            symmarInvalidArgument);
  EXPECT_EQ(symmarAllReduce(buf.data(), buf.data(), SIZE_MAX / 2, symmarFloat32, symmarSum, comm, nullptr),
            symmarInvalidArgument);
  EXPECT_NE(lastError(comm).find("overflows"), std::string::npos);
  EXPECT_EQ(symmarAllReduce(nullptr, buf.data(), 4, symmarFloat32, symmarSum, comm, nullptr), symmarInvalidArgument);
  EXPECT_EQ(symmarAllReduce(buf.data(), buf.data() + 1, 8, symmarFloat32, symmarSum, comm, nullptr),
            symmarInvalidArgument);
  EXPECT_NE(lastError(comm).find("overlap"), std::string::npos);
  EXPECT_EQ(symmarAllReduce(reinterpret_cast<char*>(buf.data()) + 1, buf.data() + 32, 4, symmarFloat32, symmarSum,
                            comm, nullptr),
            symmarInvalidArgument);
  EXPECT_NE(lastError(comm).find("aligned"), std::string::npos);
  int dummy_stream;
  EXPECT_EQ(symmarAllReduce(buf.data(), buf.data(), 4, symmarFloat32, symmarSum, comm, &dummy_stream),
            symmarInvalidArgument);
  EXPECT_NE(lastError(comm).find("stream must be NULL"), std::string::npos);
  EXPECT_EQ(symmarAllReduceAlgo(buf.data(), buf.data(), 4, symmarFloat32, symmarSum, symmarAlgoMultimem, comm, nullptr),
            symmarUnsupported) << "no multimem on the host";
  EXPECT_EQ(symmarAllReduceAlgo(buf.data(), buf.data(), 4, symmarFloat32, symmarSum, symmarAlgoMpi, comm, nullptr),
            symmarUnsupported) << "no MPI fallback installed";
  EXPECT_NE(lastError(comm).find("cannot serve"), std::string::npos);
  // count 0 succeeds even with NULL buffers; a good call clears nothing else but succeeds.
  EXPECT_EQ(symmarAllReduce(nullptr, nullptr, 0, symmarFloat32, symmarSum, comm, nullptr), symmarSuccess);
  EXPECT_EQ(symmarAllReduce(buf.data(), buf.data(), 64, symmarFloat32, symmarSum, comm, nullptr), symmarSuccess);
  EXPECT_EQ(buf[5], 1.0f) << "world 1: the sum is the input";
  void* p = nullptr;
  EXPECT_EQ(symmarMemAlloc(comm, 0, &p), symmarInvalidArgument);
  EXPECT_EQ(symmarMemFree(comm, buf.data()), symmarInvalidArgument);
  EXPECT_NE(lastError(comm).find("not returned by symmarMemAlloc"), std::string::npos);
  symmarAlgo_t algo;
  EXPECT_EQ(symmarCommPlan(comm, 16, symmarFloat32, symmarSum, nullptr), symmarInvalidArgument);
  EXPECT_EQ(symmarCommPlan(comm, 16, symmarFloat32, symmarSum, &algo), symmarSuccess);
  EXPECT_TRUE(algo == symmarAlgoLamport || algo == symmarAlgoOneShot || algo == symmarAlgoTwoShot);
  symmarTopology_t topo;
  ASSERT_EQ(symmarCommTopology(comm, &topo), symmarSuccess);
  EXPECT_EQ(topo.link, symmarLinkHostMemory);
  EXPECT_EQ(topo.world_size, 1);
  EXPECT_EQ(symmarCommAdoptNccl(comm, &dummy_stream), symmarInvalidUsage);
  EXPECT_EQ(symmarCommDestroy(comm), symmarSuccess);
}

// Groups belong to the calling thread and nest; an unmatched end is refused with a message, and
// calls inside a group still complete (the host backend completes every call on return).
TEST(CApi, GroupsNestPerThreadAndAnUnmatchedEndIsRefused) {
  EXPECT_EQ(symmarGroupEnd(), symmarInvalidUsage);
  EXPECT_NE(std::string(symmarGetLastError(nullptr)).find("without a symmarGroupStart"), std::string::npos);
  std::vector<symmarComm_t> comms(1);
  const int cpu = SYMMAR_DEVICE_CPU;
  ASSERT_EQ(symmarCommInitAll(comms.data(), 1, &cpu, nullptr), symmarSuccess);
  ASSERT_EQ(symmarGroupStart(), symmarSuccess);
  ASSERT_EQ(symmarGroupStart(), symmarSuccess);
  float x[3] = {1.5f, -2.0f, 4.0f};
  EXPECT_EQ(symmarAllReduce(x, x, 3, symmarFloat32, symmarSum, comms[0], nullptr), symmarSuccess);
  EXPECT_EQ(x[0], 1.5f);  // one rank: the sum is the input
  EXPECT_EQ(symmarGroupEnd(), symmarSuccess);
  std::thread other([] { EXPECT_EQ(symmarGroupEnd(), symmarInvalidUsage) << "another thread has no open group"; });
  other.join();
  EXPECT_EQ(symmarGroupEnd(), symmarSuccess);
  EXPECT_EQ(symmarGroupEnd(), symmarInvalidUsage) << "both levels closed";
  EXPECT_EQ(symmarCommDestroy(comms[0]), symmarSuccess);
}

TEST(CApi, CppWrapperThrowsWithTheLastError) {
  auto comms = symmar::Comm::initAll(1, {SYMMAR_DEVICE_CPU});
  ASSERT_EQ(comms.size(), 1u);
  EXPECT_EQ(comms[0].size(), 1);
  EXPECT_EQ(comms[0].topology().link, symmarLinkHostMemory);
  float x[4] = {1, 2, 3, 4};
  comms[0].allReduce(x, x, 4, symmarFloat32);
  EXPECT_EQ(x[3], 4.0f);
  try {
    comms[0].allReduce(x, x, 4, static_cast<symmarDataType_t>(12));
    FAIL() << "expected symmar::Error";
  } catch (const symmar::Error& e) {
    EXPECT_EQ(e.code(), symmarInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("invalid dtype"), std::string::npos);
  }
  void* p = comms[0].memAlloc(1024);
  EXPECT_NE(p, nullptr);
  comms[0].memFree(p);
}

// On one host: the layout says so, and an inter-host engine is refused with the reason (no
// collective step is taken for what every rank sees alike).
// A host comm's line names the SIMD target its reductions run (benchmark output then says which).
TEST(CApi, HostCommDescriptionNamesItsSimdTarget) {
  symmarComm_t comm = hostComm();
  char text[4096];
  ASSERT_EQ(symmarCommDescribe(comm, text, sizeof(text)), symmarSuccess);
  const std::string line(text);
  const size_t at = line.find(", simd ");
  ASSERT_NE(at, std::string::npos) << line;
  const std::string target = line.substr(at + 7, line.find(';', at) - at - 7);
  EXPECT_FALSE(target.empty()) << line;
  EXPECT_EQ(target.find(' '), std::string::npos) << "one name: " << target;
  EXPECT_EQ(symmarCommDestroy(comm), symmarSuccess);
}

TEST(CApi, HostLayoutOfASingleHostCommAndNoInterHostEngine) {
  symmarComm_t comm = hostComm();
  int hosts = 0, host = -1, local_rank = -1, local_size = 0;
  ASSERT_EQ(symmarCommHostLayout(comm, &hosts, &host, &local_rank, &local_size), symmarSuccess);
  EXPECT_EQ(hosts, 1);
  EXPECT_EQ(host, 0);
  EXPECT_EQ(local_rank, 0);
  EXPECT_EQ(local_size, 1);
  EXPECT_EQ(symmarCommHostLayout(comm, nullptr, nullptr, nullptr, nullptr), symmarSuccess) << "every pointer optional";
  auto never = [](const void* const*, void*, size_t, int, void*) { return symmarSuccess; };
  EXPECT_EQ(symmarCommSetInterHost(comm, never, nullptr, nullptr, "test"), symmarUnsupported);
  EXPECT_NE(lastError(comm).find("one host"), std::string::npos) << lastError(comm);
  char text[1024];
  ASSERT_EQ(symmarCommDescribe(comm, text, sizeof(text)), symmarSuccess);
  EXPECT_EQ(std::string(text).find("hosts"), std::string::npos) << "nothing about hosts on one host: " << text;
  EXPECT_EQ(symmarCommDestroy(comm), symmarSuccess);
  EXPECT_EQ(symmarCommHostLayout(nullptr, &hosts, nullptr, nullptr, nullptr), symmarInvalidArgument);
}
