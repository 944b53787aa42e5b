// The cases of the host backend's fused-call tests (add_rms_norm_test.cc): shapes, one rank's run
// of a shape against a float64 reference (tolerances per dtype below), and a whole world of thread
// ranks whose outputs must agree bit for bit.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/reference.h"
#include "e4m3_reference.h"
#include "mp/mp_util.h"

namespace add_rms_norm_cases {

// Relative tolerances of residual_out (one rounding of an fp32 sum) and norm_out (the norm of the
// stored residual, rounded once; fp32 statistics): the dtype's epsilon, with headroom for fp32 sums.
inline double tolerance(symmarDataType_t dt) { return dt == symmarFloat32 ? 1e-5 : dt == symmarFloat16 ? 2e-3 : 1.6e-2; }

inline double inputAt(int rank, size_t t, size_t i) { return static_cast<double>(static_cast<int>((rank * 31 + t * 13 + i * 7) % 23) - 11) / 8.0; }
inline double residualAt(size_t t, size_t i) { return static_cast<double>(static_cast<int>((t * 5 + i * 3) % 19) - 9) / 4.0; }
inline double gammaAt(size_t i) { return 0.5 + static_cast<double>(i % 7) / 8.0; }

struct Shape {
  size_t tokens, hidden;
  symmarDataType_t dtype;
  bool residual, in_place, fp8;
  symmarAlgo_t algo;
  bool norm_over_input = false;  // norm_out is the input (residual_out apart)
  bool residual_in_place = false;  // residual_out is residual_in and norm_out the input, as engines call it
};

inline std::string name(const Shape& s) {
  return std::to_string(s.tokens) + "x" + std::to_string(s.hidden) + " dtype " + std::to_string(s.dtype) +
         (s.residual ? " +res" : "") + (s.in_place ? " inplace" : "") + (s.norm_over_input ? " norm-over-input" : "") +
         (s.residual_in_place ? " residual-in-place" : "") +
         (s.fp8 ? " fp8" : "") + " " +
         symmarAlgoName(s.algo);
}

/// Runs one shape on one rank; returns the number of wrong elements and the outputs' digest.
inline int runShape(symmarComm_t comm, int rank, int world, const Shape& s, uint64_t* digest) {
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
  if (s.residual_in_place) {
    a.residual_out = res.data();
    a.norm_out = in.data();
  }
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

inline std::vector<Shape> shapes(bool full) {
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

/// Runs every case on `world` thread ranks of a host comm (staging_bytes 0: the default; table_file
/// as symmarConfig_t's), each against the reference, and expects every rank's outputs to agree bit
/// for bit.
inline void expectCasesMatchOnThreadRanks(int world, size_t staging_bytes, const std::vector<Shape>& cases,
                                          const char* table_file = nullptr) {
  std::vector<symmarComm_t> comms(world);
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  cfg.staging_bytes = staging_bytes;
  cfg.table_file = table_file;
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

}  // namespace add_rms_norm_cases
