// Host backend allreduce across ranks: forked processes meeting through a unique id, and threads
// of one process (symmarCommInitAll). Every case is checked against a float64 reference and the
// outputs must be bitwise identical on all ranks.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "mp/mp_util.h"

namespace {

constexpr size_t kStaging = 256 << 10;  // small, so large counts run through many chunks

symmarConfig_t testConfig() {
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  cfg.staging_bytes = kStaging;
  cfg.timeout_ms = 60000;
  return cfg;
}

// Runs every case on comm; digests[case * world + rank] receives the output hash.
int runMatrix(symmarComm_t comm, int rank, int world, const std::vector<mp::Case>& cases, uint64_t* digests) {
  int errors = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    uint64_t d = 0;
    errors += mp::runCase(comm, rank, world, cases[i], &d);
    digests[i * world + rank] = d;
  }
  return errors;
}

void expectIdentical(const std::vector<mp::Case>& cases, int world, const std::function<uint64_t(size_t)>& digest) {
  for (size_t i = 0; i < cases.size(); ++i) {
    for (int r = 1; r < world; ++r) {
      ASSERT_EQ(digest(i * world + r), digest(i * world)) << mp::describe(cases[i]) << ": rank " << r << " differs";
    }
  }
}

}  // namespace

class HostAllReduce : public ::testing::TestWithParam<int> {};

TEST_P(HostAllReduce, ForkedRanksWithUniqueId) {
  const int world = GetParam();
  const auto cases = mp::caseMatrix(kStaging, world <= 3);
  mp::SharedWords digests(cases.size() * world);
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  auto status = mp::runForked(world, [&](int rank) {
    symmarConfig_t cfg = testConfig();
    symmarComm_t comm = nullptr;
    if (symmarCommInitRank(&comm, world, id, rank, &cfg) != symmarSuccess) {
      fprintf(stderr, "rank %d: init failed: %s\n", rank, symmarGetLastError(nullptr));
      return 1;
    }
    int errors = runMatrix(comm, rank, world, cases, &digests[0]);
    return errors + (symmarCommDestroy(comm) != symmarSuccess);
  });
  for (int r = 0; r < world; ++r) ASSERT_EQ(status[r], 0) << "rank " << r;
  expectIdentical(cases, world, [&](size_t i) { return digests[i]; });
}

TEST_P(HostAllReduce, ThreadRanksWithInitAll) {
  const int world = GetParam();
  const auto cases = mp::caseMatrix(kStaging, false);
  std::vector<uint64_t> digests(cases.size() * world);
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = testConfig();
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess) << symmarGetLastError(nullptr);
  auto errors = mp::runThreads(world, [&](int rank) { return runMatrix(comms[rank], rank, world, cases, digests.data()); });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[r], 0) << "rank " << r;
    EXPECT_EQ(symmarCommDestroy(comms[r]), symmarSuccess);
  }
  expectIdentical(cases, world, [&](size_t i) { return digests[i]; });
}

INSTANTIATE_TEST_SUITE_P(Worlds, HostAllReduce, ::testing::Values(2, 3, 4, 5, 8),
                         [](const ::testing::TestParamInfo<int>& info) { return "world" + std::to_string(info.param); });

TEST(HostAllReduce, SymmetricBuffersFromMemAlloc) {
  const int world = 3;
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = testConfig();
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
  auto errors = mp::runThreads(world, [&](int rank) {
    int bad = 0;
    const size_t n = 300001;
    float* buf = nullptr;
    if (symmarMemAlloc(comms[rank], n * sizeof(float), reinterpret_cast<void**>(&buf)) != symmarSuccess) return 1;
    for (symmarAlgo_t algo : {symmarAlgoOneShot, symmarAlgoTwoShot, symmarAlgoAuto}) {
      for (size_t i = 0; i < n; ++i) buf[i] = static_cast<float>((i % 13) + rank);
      if (symmarAllReduceAlgo(buf, buf, n, symmarFloat32, symmarSum, algo, comms[rank], nullptr) != symmarSuccess) {
        return 1;
      }
      for (size_t i = 0; i < n; ++i) bad += buf[i] != static_cast<float>(3 * (i % 13) + 3);
    }
    void* huge = nullptr;
    bad += symmarMemAlloc(comms[rank], size_t(1) << 40, &huge) != symmarOutOfMemory;
    bad += symmarMemFree(comms[rank], buf) != symmarSuccess;
    return bad;
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[r], 0) << "rank " << r;
    symmarCommDestroy(comms[r]);
  }
}

TEST(HostAllReduce, MixedSymmetricAndPrivateInputs) {
  const int world = 3;
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = testConfig();
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
  auto errors = mp::runThreads(world, [&](int rank) {
    const size_t n = 200003;  // several chunks
    void* sym = nullptr;
    if (symmarMemAlloc(comms[rank], n * sizeof(double), &sym) != symmarSuccess) return 1;
    std::vector<double> priv(n);
    double* in = rank == 1 ? priv.data() : static_cast<double*>(sym);  // rank 1 stages, the others do not
    std::vector<double> out(n);
    int bad = 0;
    for (int in_place = 0; in_place < 2; ++in_place) {
      for (size_t i = 0; i < n; ++i) in[i] = static_cast<double>(i % 1000) * (rank + 1);
      double* dst = in_place ? in : out.data();
      if (symmarAllReduceAlgo(in, dst, n, symmarFloat64, symmarSum, symmarAlgoTwoShot, comms[rank], nullptr) !=
          symmarSuccess) {
        return 1;
      }
      for (size_t i = 0; i < n; ++i) bad += dst[i] != static_cast<double>(i % 1000) * 6;
    }
    return bad + (symmarMemFree(comms[rank], sym) != symmarSuccess);
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[r], 0) << "rank " << r;
    symmarCommDestroy(comms[r]);
  }
}

TEST(HostAllReduce, MismatchedCallsAreReportedOnEveryRank) {
  const int world = 2;
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = testConfig();
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
  std::vector<symmarResult_t> first(world), second(world);
  std::vector<std::string> text(world);
  mp::runThreads(world, [&](int rank) {
    std::vector<float> buf(300, 1.0f);
    // Rank 1 reduces a different count: detected at the first barrier, nothing is corrupted.
    first[rank] = symmarAllReduceAlgo(buf.data(), buf.data(), rank == 0 ? 100 : 200, symmarFloat32, symmarSum,
                                      symmarAlgoOneShot, comms[rank], nullptr);
    text[rank] = symmarGetLastError(comms[rank]);
    second[rank] = symmarAllReduce(buf.data(), buf.data(), 300, symmarFloat32, symmarSum, comms[rank], nullptr);
    return 0;
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(first[r], symmarInvalidUsage) << "rank " << r;
    EXPECT_NE(text[r].find("mismatch"), std::string::npos) << text[r];
    EXPECT_EQ(second[r], symmarSuccess) << "a mismatch does not fail the comm";
    symmarCommDestroy(comms[r]);
  }
}

TEST(HostAllReduce, RanksAskingForDifferentStagingSizesAgree) {
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  auto errors = mp::runThreads(2, [&](int rank) {
    symmarConfig_t cfg = testConfig();
    cfg.staging_bytes = rank == 0 ? (64 << 10) : (1 << 20);  // the comm uses the smaller one
    symmarComm_t comm = nullptr;
    if (symmarCommInitRank(&comm, 2, id, rank, &cfg) != symmarSuccess) return 1;
    int bad = 0;
    uint64_t digest;
    for (symmarAlgo_t algo : {symmarAlgoOneShot, symmarAlgoTwoShot}) {
      bad += mp::runCase(comm, rank, 2, {symmarFloat32, symmarSum, 300001, false, algo, false}, &digest);
    }
    return bad + (symmarCommDestroy(comm) != symmarSuccess);
  });
  EXPECT_EQ(errors[0], 0);
  EXPECT_EQ(errors[1], 0);
}
