// symmarAllReduceAddRmsNorm on the host backend: ranks as threads (worlds 2..9) and processes,
// decode and prefill shapes, every dtype, with and without residual, in place and not, both forms;
// against a float64 reference (tolerances per dtype in add_rms_norm_cases.h) and bitwise identical
// on all ranks; FP8 against an independent quantizer; bad arguments refused with nothing written.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "mp/add_rms_norm_cases.h"

using namespace add_rms_norm_cases;  // NOLINT: the cases are this file's vocabulary

class AddRmsNorm : public ::testing::TestWithParam<int> {};

TEST_P(AddRmsNorm, ThreadRanksMatchTheReferenceBitForBit) {
  const int world = GetParam();
  expectCasesMatchOnThreadRanks(world, 1 << 20, shapes(world == 2));  // 513 x 7168 rows in several chunks
}

INSTANTIATE_TEST_SUITE_P(Worlds, AddRmsNorm, ::testing::Values(2, 3, 5, 8, 9),
                         [](const ::testing::TestParamInfo<int>& info) { return "world" + std::to_string(info.param); });

TEST(AddRmsNormProcesses, ForkedRanksAgree) {
  const int world = 4;
  const std::vector<Shape> cases = {{7, 4096, symmarBfloat16, true, false, true, symmarAlgoAuto},
                                    {64, 7168, symmarBfloat16, true, true, false, symmarAlgoTwoShot},
                                    {2, 128, symmarFloat16, false, false, true, symmarAlgoOneShot}};
  mp::SharedWords digests(cases.size() * world);
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  auto status = mp::runForked(world, [&](int rank) {
    symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
    cfg.device = SYMMAR_DEVICE_CPU;
    symmarComm_t comm = nullptr;
    if (symmarCommInitRank(&comm, world, id, rank, &cfg) != symmarSuccess) return 1;
    int bad = 0;
    for (size_t c = 0; c < cases.size(); ++c) bad += runShape(comm, rank, world, cases[c], &digests[c * world + rank]);
    return bad + (symmarCommDestroy(comm) != symmarSuccess);
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
  for (size_t c = 0; c < cases.size(); ++c) {
    for (int r = 1; r < world; ++r) EXPECT_EQ(digests[c * world + r], digests[c * world]) << name(cases[c]);
  }
}

TEST(AddRmsNormArgs, BadArgumentsAreRefusedAndNothingIsWritten) {
  symmarComm_t comm = nullptr;
  const int cpu = SYMMAR_DEVICE_CPU;
  ASSERT_EQ(symmarCommInitAll(&comm, 1, &cpu, nullptr), symmarSuccess);
  std::vector<float> in(64, 1.0f), out(64, 7.0f), norm(64, 7.0f), gamma(8, 1.0f);
  uint8_t q[64];
  std::memset(q, 0x5a, sizeof(q));
  symmarAddRmsNormArgs_t good{};
  good.input = in.data();
  good.residual_out = out.data();
  good.norm_out = norm.data();
  good.gamma = gamma.data();
  good.eps = 1e-6f;
  good.tokens = 8;
  good.hidden = 8;
  good.dtype = symmarFloat32;
  auto refused = [&](symmarAddRmsNormArgs_t a, const char* what) {
    EXPECT_EQ(symmarAllReduceAddRmsNorm(&a, comm, nullptr), symmarInvalidArgument) << what;
    EXPECT_NE(std::string(symmarGetLastError(comm)), "") << what;
    for (float x : out) ASSERT_EQ(x, 7.0f) << what << ": written";
    for (float x : norm) ASSERT_EQ(x, 7.0f) << what << ": written";
  };
  symmarAddRmsNormArgs_t a = good;
  a.dtype = symmarInt32;
  refused(a, "int32");
  a = good;
  a.gamma = nullptr;
  refused(a, "no gamma");
  a = good;
  a.norm_out = out.data();
  refused(a, "norm_out == residual_out");
  a = good;
  a.residual_out = in.data() + 1;
  refused(a, "residual_out overlapping input by one element");
  a = good;
  a.fp8_out = q;
  a.fp8_scale = 0.0f;
  refused(a, "fp8 scale 0");
  a = good;
  a.eps = -1.0f;
  refused(a, "negative eps");
  EXPECT_EQ(symmarAllReduceAddRmsNorm(nullptr, comm, nullptr), symmarInvalidArgument);
  EXPECT_EQ(symmarAllReduceAddRmsNormAlgo(&good, symmarAlgoMultimem, comm, nullptr), symmarInvalidArgument);
  // The lamport form is the GPU kernels': a host comm names why it refuses it.
  EXPECT_EQ(symmarAllReduceAddRmsNormAlgo(&good, symmarAlgoLamport, comm, nullptr), symmarUnsupported);
  EXPECT_NE(std::string(symmarGetLastError(comm)).find("runs on GPU comms only"), std::string::npos)
      << symmarGetLastError(comm);
  // And the good call works: one rank, x = 1 everywhere: residual 1, norm 1/sqrt(1 + eps).
  ASSERT_EQ(symmarAllReduceAddRmsNorm(&good, comm, nullptr), symmarSuccess) << symmarGetLastError(comm);
  EXPECT_EQ(out[5], 1.0f);
  EXPECT_NEAR(norm[5], 1.0f, 1e-6f);
  symmarCommDestroy(comm);
}

// A fused call never pairs with a peer's other call: another shape, a plain allreduce of the same
// element count, or the same call in the other form (what ranks planning from different rows
// would make) is a mismatch on both ranks (the call signature carries form, count, hidden).
TEST(AddRmsNormArgs, MismatchedCallsSucceedOnNoRank) {
  for (int variant = 0; variant < 3; ++variant) {
    std::vector<symmarComm_t> comms(2);
    symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
    cfg.device = SYMMAR_DEVICE_CPU;
    cfg.timeout_ms = 5000;
    ASSERT_EQ(symmarCommInitAll(comms.data(), 2, nullptr, &cfg), symmarSuccess);
    std::vector<symmarResult_t> res(2);
    mp::runThreads(2, [&](int rank) {
      std::vector<float> in(64, 1.0f), out(64), norm(64), gamma(16, 1.0f);
      symmarAddRmsNormArgs_t a{};
      a.input = in.data();
      a.residual_out = out.data();
      a.norm_out = norm.data();
      a.gamma = gamma.data();
      a.eps = 1e-6f;
      a.tokens = 4;
      a.hidden = 16;
      a.dtype = symmarFloat32;
      if (rank == 1 && variant == 0) {
        a.tokens = 2;  // 2 x 32: the same 64 elements, another shape
        a.hidden = 32;
      }
      if (rank == 1 && variant == 1) {
        res[rank] = symmarAllReduceAlgo(in.data(), out.data(), 64, symmarFloat32, symmarSum, symmarAlgoOneShot,
                                        comms[rank], nullptr);
      } else {
        const symmarAlgo_t form = rank == 1 && variant == 2 ? symmarAlgoTwoShot : symmarAlgoOneShot;
        res[rank] = symmarAllReduceAddRmsNormAlgo(&a, form, comms[rank], nullptr);
      }
      return 0;
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(res[r], symmarInvalidUsage) << "variant " << variant << " rank " << r;
      symmarCommDestroy(comms[r]);
    }
  }
}

// An empty call (tokens 0 or hidden 0, buffers NULL) is a successful no-op on every rank, in every
// form, and like an allreduce of count 0 it still takes part in call matching: a rank that makes
// it while its peer makes another call (a fused call of rows, or a plain allreduce of count 0) gets
// a mismatch, not a pairing with its peer's next call.
TEST(AddRmsNormShapes, EmptyCallsAreNoOpsThatStillTakePart) {
  const int world = 3;
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  cfg.timeout_ms = 5000;
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
  struct Empty {
    size_t tokens, hidden;
  };
  const Empty empties[] = {{0, 0}, {0, 8}, {5, 0}};
  auto errors = mp::runThreads(world, [&](int rank) {
    int bad = 0;
    for (const Empty& e : empties) {
      for (symmarAlgo_t algo : {symmarAlgoAuto, symmarAlgoOneShot, symmarAlgoTwoShot}) {
        symmarAddRmsNormArgs_t a{};
        a.tokens = e.tokens;
        a.hidden = e.hidden;
        a.dtype = symmarBfloat16;
        const symmarResult_t res = symmarAllReduceAddRmsNormAlgo(&a, algo, comms[rank], nullptr);
        if (res != symmarSuccess) {
          fprintf(stderr, "rank %d: empty %zux%zu %s: %s\n", rank, e.tokens, e.hidden, symmarAlgoName(algo),
                  symmarGetLastError(comms[rank]));
          ++bad;
        }
      }
    }
    return bad;
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[r], 0) << "rank " << r;
  // The comm is still good: a call with rows works after the empty ones.
  auto after = mp::runThreads(world, [&](int rank) {
    uint64_t digest = 0;
    return runShape(comms[rank], rank, world, {4, 9, symmarFloat32, true, false, false, symmarAlgoAuto}, &digest);
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(after[r], 0) << "rank " << r;
  for (int r = 0; r < world; ++r) symmarCommDestroy(comms[r]);

  for (int variant = 0; variant < 2; ++variant) {
    ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
    std::vector<symmarResult_t> res(world);
    mp::runThreads(world, [&](int rank) {
      std::vector<float> in(16, 1.0f), out(16), norm(16), gamma(8, 1.0f);
      symmarAddRmsNormArgs_t a{};
      a.input = in.data();
      a.residual_out = out.data();
      a.norm_out = norm.data();
      a.gamma = gamma.data();
      a.eps = 1e-6f;
      a.tokens = rank == 0 ? 0 : 2;  // rank 0 has no rows; its peers have two of 8
      a.hidden = 8;
      a.dtype = symmarFloat32;
      if (rank != 0 && variant == 1) {
        res[rank] =
            symmarAllReduceAlgo(nullptr, nullptr, 0, symmarFloat32, symmarSum, symmarAlgoOneShot, comms[rank], nullptr);
      } else {
        res[rank] = symmarAllReduceAddRmsNormAlgo(&a, symmarAlgoOneShot, comms[rank], nullptr);
      }
      return 0;
    });
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(res[r], symmarInvalidUsage) << "variant " << variant << " rank " << r;
      symmarCommDestroy(comms[r]);
    }
  }
}

// The shapes at the edges: one element a row, odd rows (the two-shot's published rows then have
// odd sizes), fewer rows than ranks, fp8 on odd rows; every form, against the reference.
TEST(AddRmsNormShapes, EdgeShapesMatchTheReference) {
  std::vector<Shape> cases;
  for (size_t tokens : {size_t(1), size_t(2), size_t(5)}) {
    for (size_t hidden : {size_t(1), size_t(3), size_t(17)}) {
      for (symmarDataType_t dt : {symmarFloat32, symmarFloat16, symmarBfloat16}) {
        for (symmarAlgo_t algo : {symmarAlgoAuto, symmarAlgoOneShot, symmarAlgoTwoShot}) {
          cases.push_back({tokens, hidden, dt, hidden != 3, hidden == 17, hidden != 1, algo});
        }
      }
    }
  }
  expectCasesMatchOnThreadRanks(3, 0, cases);
}

// norm_out over the input: each form reads a row's input before it writes that row's norm, and the
// two-shot reads its own rows from the input itself (it stages only its peers' rows), over several
// chunks of rows.
TEST(AddRmsNormShapes, NormOverTheInputMatchesTheReference) {
  std::vector<Shape> cases;
  for (size_t tokens : {size_t(2), size_t(5), size_t(513)}) {
    for (symmarDataType_t dt : {symmarFloat32, symmarBfloat16}) {
      for (symmarAlgo_t algo : {symmarAlgoAuto, symmarAlgoOneShot, symmarAlgoTwoShot}) {
        cases.push_back({tokens, 4096, dt, tokens != 5, false, tokens == 5, algo, true});
      }
    }
  }
  for (int world : {2, 3}) expectCasesMatchOnThreadRanks(world, 1 << 20, cases);  // 513 x 4096 in chunks
}

// Past a table row's last fused threshold the call runs unfused: the allreduce, then the add and
// norm on each rank. Every aliasing the arguments allow, among them the engines' own (residual
// updated in place, the norm written over the input), where the sums may not go to residual_out
// before residual_in is read. Each rank's bits equal; values within the dtype's tolerance (the
// allreduce rounds the sum before the residual is added).
TEST(AddRmsNormShapes, UnfusedPastTheTablesLastThresholdMatchesTheReference) {
  char path[] = "/tmp/symmar_unfused_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string table = R"({"rows": [{"arch": "host", "link": "host", "world": [2, 3], "collective": "addrmsnorm",
    "source": "test: every call past the last threshold", "algos": [{"algo": "twoshot", "max_bytes": 1}]}]})";
  ASSERT_EQ(write(fd, table.data(), table.size()), static_cast<ssize_t>(table.size()));
  close(fd);
  std::vector<Shape> cases;
  int k = 0;
  for (size_t tokens : {size_t(3), size_t(64)}) {
    for (size_t hidden : {size_t(7), size_t(4096)}) {
      for (symmarDataType_t dt : {symmarFloat32, symmarFloat16, symmarBfloat16}) {
        Shape s{tokens, hidden, dt, k % 3 != 0, k % 3 == 1, k % 4 == 2, symmarAlgoAuto};
        s.residual_in_place = k % 3 == 2;
        s.norm_over_input = k % 3 == 0 && k % 2 == 0;  // without residual: input and norm_out alone
        cases.push_back(s);
        ++k;
      }
    }
  }
  for (int world : {2, 3}) expectCasesMatchOnThreadRanks(world, 0, cases, path);
  unlink(path);
}

// A row that fits the one-shot form's staging layout but not the two-shot's (8191 float32: 32764
// bytes against a 32768-byte half; the two-shot publishes a residual and a norm row, each part
// vector-aligned, 65536 bytes):
// the planned form becomes the one-shot, and a forced two-shot is refused with a message that names
// the form, what a row of it needs and the half, not "does not fit".
TEST(AddRmsNormShapes, RowsThatFitOneFormOnly) {
  const int world = 2;
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  cfg.staging_bytes = 64 << 10;  // halves of 32768 bytes
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
  const Shape planned{4, 8191, symmarFloat32, true, false, false, symmarAlgoAuto};
  const Shape one{3, 8191, symmarFloat32, false, false, true, symmarAlgoOneShot};
  std::vector<uint64_t> digests(2 * world);
  auto errors = mp::runThreads(world, [&](int rank) {
    return runShape(comms[rank], rank, world, planned, &digests[rank]) +
           runShape(comms[rank], rank, world, one, &digests[world + rank]);
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[r], 0) << "rank " << r;
  EXPECT_EQ(digests[1], digests[0]);
  EXPECT_EQ(digests[3], digests[2]);

  std::vector<symmarResult_t> res(world);
  std::vector<std::string> why(world);
  mp::runThreads(world, [&](int rank) {
    std::vector<float> in(2 * 8191, 1.0f), out(in.size()), norm(in.size()), gamma(8191, 1.0f);
    symmarAddRmsNormArgs_t a{};
    a.input = in.data();
    a.residual_out = out.data();
    a.norm_out = norm.data();
    a.gamma = gamma.data();
    a.eps = 1e-6f;
    a.tokens = 2;
    a.hidden = 8191;
    a.dtype = symmarFloat32;
    res[rank] = symmarAllReduceAddRmsNormAlgo(&a, symmarAlgoTwoShot, comms[rank], nullptr);
    why[rank] = symmarGetLastError(comms[rank]);
    return 0;
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(res[r], symmarUnsupported) << "rank " << r;
    EXPECT_NE(why[r].find("twoshot form needs 65536 bytes"), std::string::npos) << why[r];
    EXPECT_NE(why[r].find("a half has 32768 bytes"), std::string::npos) << why[r];
    EXPECT_NE(why[r].find("the oneshot form fits"), std::string::npos) << why[r];
    symmarCommDestroy(comms[r]);
  }
}
