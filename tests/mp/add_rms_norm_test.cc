// symmarAllReduceAddRmsNorm on the host backend: ranks as threads (worlds 2..9) and processes,
// decode and prefill shapes, every dtype, with and without residual, in place and not, both forms;
// against a float64 reference (tolerances per dtype below) and bitwise identical on all ranks; FP8
// against an independent quantizer; bad arguments refused with nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/reference.h"
#include "mp/mp_util.h"

namespace {

// Relative tolerances of residual_out (one rounding of an fp32 sum) and norm_out (the norm of the
// stored residual, rounded once; fp32 statistics): the dtype's epsilon, with headroom for fp32 sums.
double tolerance(symmarDataType_t dt) { return dt == symmarFloat32 ? 1e-5 : dt == symmarFloat16 ? 2e-3 : 1.6e-2; }

double inputAt(int rank, size_t t, size_t i) { return static_cast<double>(static_cast<int>((rank * 31 + t * 13 + i * 7) % 23) - 11) / 8.0; }
double residualAt(size_t t, size_t i) { return static_cast<double>(static_cast<int>((t * 5 + i * 3) % 19) - 9) / 4.0; }
double gammaAt(size_t i) { return 0.5 + static_cast<double>(i % 7) / 8.0; }

struct Shape {
  size_t tokens, hidden;
  symmarDataType_t dtype;
  bool residual, in_place, fp8;
  symmarAlgo_t algo;
  bool norm_over_input = false;  // norm_out is the input (residual_out apart)
};

std::string name(const Shape& s) {
  return std::to_string(s.tokens) + "x" + std::to_string(s.hidden) + " dtype " + std::to_string(s.dtype) +
         (s.residual ? " +res" : "") + (s.in_place ? " inplace" : "") + (s.norm_over_input ? " norm-over-input" : "") +
         (s.fp8 ? " fp8" : "") + " " +
         symmarAlgoName(s.algo);
}

/// Runs one shape on one rank; returns the number of wrong elements and the outputs' digest.
int runShape(symmarComm_t comm, int rank, int world, const Shape& s, uint64_t* digest) {
  const size_t n = s.tokens * s.hidden, elem = symmarTypeSize(s.dtype);
  std::vector<char> in(n * elem), res(n * elem), res_out(n * elem), norm(n * elem), gamma(s.hidden * elem);
  std::vector<uint8_t> q(n);
  for (size_t t = 0; t < s.tokens; ++t) {
    for (size_t i = 0; i < s.hidden; ++i) {
      testref::storeElement(in.data(), s.dtype, t * s.hidden + i, inputAt(rank, t, i));
      testref::storeElement(res.data(), s.dtype, t * s.hidden + i, residualAt(t, i));
    }
  }
  for (size_t i = 0; i < s.hidden; ++i) testref::storeElement(gamma.data(), s.dtype, i, gammaAt(i));
  const std::vector<char> res_copy = res;
  symmarAddRmsNormArgs_t a{};
  a.input = in.data();
  a.residual_in = s.residual ? res.data() : nullptr;
  a.residual_out = s.in_place ? in.data() : res_out.data();  // residual in place over the input
  a.norm_out = s.in_place && s.residual ? res.data() : norm.data();  // and the norm over the residual
  if (s.norm_over_input) a.norm_out = in.data();
  a.gamma = gamma.data();
  a.fp8_out = s.fp8 ? q.data() : nullptr;
  a.fp8_scale = 0.05f;
  a.eps = 1e-6f;
  a.tokens = s.tokens;
  a.hidden = s.hidden;
  a.dtype = s.dtype;
  if (symmarAllReduceAddRmsNormAlgo(&a, s.algo, comm, nullptr) != symmarSuccess) {
    fprintf(stderr, "rank %d %s: %s\n", rank, name(s).c_str(), symmarGetLastError(comm));
    return 1000000;
  }
  int wrong = 0;
  const double tol = tolerance(s.dtype);
  const char* r_out = static_cast<const char*>(a.residual_out);
  const char* n_out = static_cast<const char*>(a.norm_out);
  for (size_t t = 0; t < s.tokens; ++t) {
    double ss = 0;
    for (size_t i = 0; i < s.hidden; ++i) {
      double want = s.residual ? testref::loadElement(res_copy.data(), s.dtype, t * s.hidden + i) : 0.0;
      want += testref::reduceRanks(s.dtype, symmarSum, world, [&](int r) { return inputAt(r, t, i); });
      const double got = testref::loadElement(r_out, s.dtype, t * s.hidden + i);
      if (std::fabs(got - want) > tol * std::fabs(want) + 1e-6 && wrong++ < 3) {
        fprintf(stderr, "%s: residual[%zu,%zu] = %g, expected %g\n", name(s).c_str(), t, i, got, want);
      }
      ss += got * got;
    }
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(s.hidden) + 1e-6);
    for (size_t i = 0; i < s.hidden; ++i) {
      const double r = testref::loadElement(r_out, s.dtype, t * s.hidden + i);
      const double want = r * inv * testref::loadElement(gamma.data(), s.dtype, i);
      const double got = testref::loadElement(n_out, s.dtype, t * s.hidden + i);
      if (std::fabs(got - want) > tol * std::fabs(want) + 1e-5 && wrong++ < 3) {
        fprintf(stderr, "%s: norm[%zu,%zu] = %g, expected %g\n", name(s).c_str(), t, i, got, want);
      }
      if (s.fp8) {
        // The kernel quantizes its fp32 norm; the reference its float64 one: one code apart at most,
        // and exactly the reference where the two cannot straddle a rounding boundary.
        const int want_q = e4m3_reference::quantize(want / a.fp8_scale);
        const int got_q = q[t * s.hidden + i];
        const bool near = std::fabs(e4m3_reference::value(got_q) - e4m3_reference::value(want_q)) <=
                          std::fabs(e4m3_reference::value(want_q)) * 0.0625 + std::ldexp(1.0, -9);
        if (!near && wrong++ < 3) {
          fprintf(stderr, "%s: fp8[%zu,%zu] = 0x%02x, expected 0x%02x\n", name(s).c_str(), t, i, got_q, want_q);
        }
      }
    }
  }
  *digest = testref::digest(q.data(), n, testref::digest(n_out, n * elem, testref::digest(r_out, n * elem)));
  return wrong;
}

std::vector<Shape> shapes(bool full) {
  std::vector<Shape> out;
  int k = 0;
  for (size_t tokens : {size_t(1), size_t(2), size_t(7), size_t(64), size_t(513)}) {
    for (size_t hidden : {size_t(7), size_t(128), size_t(4096), size_t(7168)}) {
      if (!full && tokens * hidden > 64 * 4096) continue;
      for (symmarDataType_t dt : {symmarFloat32, symmarFloat16, symmarBfloat16}) {
        const symmarAlgo_t algo = k % 3 == 0 ? symmarAlgoAuto : k % 3 == 1 ? symmarAlgoOneShot : symmarAlgoTwoShot;
        out.push_back({tokens, hidden, dt, k % 2 == 0, k % 4 == 1, k % 5 == 2, algo});
        ++k;
      }
    }
  }
  return out;
}

/// Runs every case on `world` thread ranks of a host comm (staging_bytes 0: the default), each against
/// the reference, and expects every rank's outputs to agree bit for bit.
void expectCasesMatchOnThreadRanks(int world, size_t staging_bytes, const std::vector<Shape>& cases) {
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  cfg.staging_bytes = staging_bytes;
  ASSERT_EQ(symmarCommInitAll(comms.data(), world, nullptr, &cfg), symmarSuccess);
  std::vector<uint64_t> digests(cases.size() * world);
  auto errors = mp::runThreads(world, [&](int rank) {
    int bad = 0;
    for (size_t c = 0; c < cases.size(); ++c) bad += runShape(comms[rank], rank, world, cases[c], &digests[c * world + rank]);
    return bad;
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[r], 0) << "world " << world << " rank " << r;
    symmarCommDestroy(comms[r]);
  }
  for (size_t c = 0; c < cases.size(); ++c) {
    for (int r = 1; r < world; ++r) EXPECT_EQ(digests[c * world + r], digests[c * world]) << name(cases[c]);
  }
}

}  // namespace

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
