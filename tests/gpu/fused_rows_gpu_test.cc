// The fused allreduce + residual add + RMSNorm where a block runs several rows of a chunk and the
// call runs several chunks, the last one partial: the case the rows' block assignment (row r of
// every chunk to block r % grid on every rank) exists for. 8 ranks on one GPU (a grid of 8 blocks
// with PDL: 132 multiprocessors / (2 x 8)), a 64 KiB staging buffer (halves of 32 KiB: 16 rows of
// 2 KiB a chunk), 45 tokens (chunks of 16, 16 and 13 rows); each form with and without FP8 output,
// against a float64 reference. Inputs are small integers, so the sums are exact. And the lamport
// form with several rows a block; and calls of few rows on a wide grid, each row spread over a group
// of blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "../e4m3_reference.h"
#include "gpu_test_util.h"

namespace symmar_gpu_test {
namespace {

constexpr int kWorld = 8;
constexpr size_t kTokens = 45;
constexpr float kEps = 1e-6f;
constexpr float kFp8Scale = 0.5f;

double gammaOf(size_t i) { return 0.5 + 0.25 * static_cast<double>(i % 4); }

/// Runs the call in form `algo` on every rank (residual updated in place) and checks every rank's
/// outputs against the float64 reference; rank 0's FP8 bytes also against the E4M3 reference.
/// symmetric: the inputs come from symmarMemAlloc, so peers read them in place.
void expectManyRowsAPerBlock(const LocalWorld& w, symmarAlgo_t algo, size_t hidden, bool fp8, bool symmetric = false,
                             size_t tokens = kTokens) {
  const int world = w.size();
  const size_t n = tokens * hidden;
  std::vector<float*> in(world), res(world), norm(world), gamma(world);
  std::vector<unsigned char*> q(world, nullptr);
  std::vector<std::vector<float>> host_in(world, std::vector<float>(n));
  std::vector<float> host_res(n), host_gamma(hidden);
  testref::fillSmallInts(symmarFloat32, host_res.data(), n, world);  // a source beside the ranks'
  for (size_t i = 0; i < hidden; ++i) host_gamma[i] = static_cast<float>(gammaOf(i));
  for (int r = 0; r < world; ++r) {
    testref::fillSmallInts(symmarFloat32, host_in[r].data(), n, r);
    if (!symmetric) {
      CUDA_OK(devAlloc(&in[r], n * 4));
    }
    CUDA_OK(devAlloc(&res[r], n * 4));
    CUDA_OK(devAlloc(&norm[r], n * 4));
    CUDA_OK(devAlloc(&gamma[r], hidden * 4));
    if (fp8) {
      CUDA_OK(devAlloc(&q[r], n));
    }
    CUDA_OK(cudaMemcpy(res[r], host_res.data(), n * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(gamma[r], host_gamma.data(), hidden * 4, cudaMemcpyHostToDevice));
  }
  if (symmetric) {
    w.parallel([&](int r) {
      void* p = nullptr;
      EXPECT_EQ(symmarMemAlloc(w.comm(r), n * 4, &p), symmarSuccess) << symmarGetLastError(w.comm(r));
      in[r] = static_cast<float*>(p);
    });
    for (int r = 0; r < world; ++r) ASSERT_NE(in[r], nullptr) << "rank " << r;
  }
  for (int r = 0; r < world; ++r) CUDA_OK(cudaMemcpy(in[r], host_in[r].data(), n * 4, cudaMemcpyHostToDevice));
  w.parallel([&](int r) {
    symmarAddRmsNormArgs_t a{};
    a.input = in[r];
    a.residual_in = res[r];
    a.residual_out = res[r];
    a.norm_out = norm[r];
    a.gamma = gamma[r];
    a.fp8_out = q[r];
    a.fp8_scale = kFp8Scale;
    a.eps = kEps;
    a.tokens = tokens;
    a.hidden = hidden;
    a.dtype = symmarFloat32;
    EXPECT_EQ(symmarAllReduceAddRmsNormAlgo(&a, algo, w.comm(r), w.stream(r)), symmarSuccess)
        << "rank " << r << ": " << symmarGetLastError(w.comm(r));
  });
  CUDA_OK(w.sync());
  const std::string what = std::string(symmarAlgoName(algo)) + " " + std::to_string(tokens) + " x " +
                           std::to_string(hidden) +
                           (fp8 ? " fp8" : "") + (symmetric ? " symmetric" : "");
  std::vector<double> want_res(n), want_norm(n);
  for (size_t t = 0; t < tokens; ++t) {
    double ss = 0;
    for (size_t i = 0; i < hidden; ++i) {
      double x = host_res[t * hidden + i];
      for (int r = 0; r < world; ++r) x += host_in[r][t * hidden + i];
      want_res[t * hidden + i] = x;
      ss += x * x;
    }
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(hidden) + kEps);
    for (size_t i = 0; i < hidden; ++i) want_norm[t * hidden + i] = want_res[t * hidden + i] * inv * gammaOf(i);
  }
  std::vector<float> got_res(n), got_norm(n);
  std::vector<unsigned char> got_q(n);
  for (int r = 0; r < world; ++r) {
    CUDA_OK(cudaMemcpy(got_res.data(), res[r], n * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(got_norm.data(), norm[r], n * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(want_res[i], got_res[i]) << what << ", rank " << r << ", row " << i / hidden;
      ASSERT_NEAR(want_norm[i], got_norm[i], 1e-5 * (1.0 + std::fabs(want_norm[i])))
          << what << ", rank " << r << ", row " << i / hidden;
    }
    if (!fp8) continue;
    CUDA_OK(cudaMemcpy(got_q.data(), q[r], n, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) {
      // The kernel quantizes its float norm, which may sit a rounding away from a tie: one code off at most.
      const int want = e4m3_reference::quantize(want_norm[i] / kFp8Scale);
      ASSERT_LE(std::abs(int(got_q[i] & 0x7f) - (want & 0x7f)), 1) << what << ", rank " << r << ", element " << i;
      ASSERT_EQ(got_q[i] & 0x80, want & 0x80) << what << ", rank " << r << ", element " << i;
    }
  }
  if (symmetric) {
    w.parallel([&](int r) { EXPECT_EQ(symmarMemFree(w.comm(r), in[r]), symmarSuccess); });
  }
  for (int r = 0; r < world; ++r) {
    if (!symmetric) cudaFree(in[r]);
    cudaFree(res[r]);
    cudaFree(norm[r]);
    cudaFree(gamma[r]);
    if (q[r]) cudaFree(q[r]);
  }
}

TEST(GpuFused, SeveralRowsABlockAndAPartialLastChunk) {
  SKIP_WITHOUT_GPU();
  LocalWorld w(std::vector<int>(kWorld, 0), 30000, size_t(64) << 10);
  ASSERT_TRUE(w.ok()) << w.error();
  // Rows of 2 KiB (hidden 512 f32) in both forms: the two-shot stages and publishes rows of the
  // input's size (its FP8 output is written by every rank, not published).
  for (bool fp8 : {false, true}) {
    expectManyRowsAPerBlock(w, symmarAlgoOneShot, 512, fp8);
    expectManyRowsAPerBlock(w, symmarAlgoTwoShot, 512, fp8);
  }
}

// The same with inputs in the symmetric heap: peers read them in place (no staging pass), in both
// forms, the two-shot's residual written in place beside them.
TEST(GpuFused, SymmetricInputsAreReadInPlace) {
  SKIP_WITHOUT_GPU();
  LocalWorld w(std::vector<int>(kWorld, 0), 30000, size_t(64) << 10);
  ASSERT_TRUE(w.ok()) << w.error();
  for (bool fp8 : {false, true}) {
    expectManyRowsAPerBlock(w, symmarAlgoOneShot, 512, fp8, true);
    expectManyRowsAPerBlock(w, symmarAlgoTwoShot, 512, fp8, true);
  }
}

// Few rows on a wide grid: 2 ranks sharing the GPU (a cap of 33 blocks with PDL on 132
// multiprocessors), rows of 16384 float32 (4096 vectors: 8 parts of 512), 1-3 tokens, so each row is
// spread over a group of 8 blocks, which add their parts' sums of squares after a barrier of
// their own. Every form (the two-shot from 2 tokens, one a rank; lamport's 256-thread blocks also
// take 8 parts), inputs staged and read in place.
TEST(GpuFused, ARowSpreadOverAGroupOfBlocks) {
  SKIP_WITHOUT_GPU();
  LocalWorld w(std::vector<int>(2, 0), 30000, size_t(8) << 20);
  ASSERT_TRUE(w.ok()) << w.error();
  constexpr size_t kHidden = 16384;
  for (bool symmetric : {false, true}) {
    expectManyRowsAPerBlock(w, symmarAlgoOneShot, kHidden, true, symmetric, 1);
    expectManyRowsAPerBlock(w, symmarAlgoLamport, kHidden, !symmetric, symmetric, 1);
    for (size_t tokens : {size_t(2), size_t(3)}) {
      expectManyRowsAPerBlock(w, symmarAlgoOneShot, kHidden, !symmetric, symmetric, tokens);
      expectManyRowsAPerBlock(w, symmarAlgoTwoShot, kHidden, symmetric, symmetric, tokens);
      expectManyRowsAPerBlock(w, symmarAlgoLamport, kHidden, symmetric, symmetric, tokens);
    }
  }
}

// The lamport form (no barrier): 45 rows of 2 KiB (90 KiB, one lamport slot) on 8 blocks, so a
// block pushes and finishes several rows; four calls in a row, so the three lamport buffers rotate
// past their first reuse (each call clears the buffer its previous call read).
TEST(GpuFused, LamportFormSeveralRowsABlock) {
  SKIP_WITHOUT_GPU();
  LocalWorld w(std::vector<int>(kWorld, 0), 30000, size_t(64) << 10);
  ASSERT_TRUE(w.ok()) << w.error();
  for (bool symmetric : {false, true}) {
    for (bool fp8 : {false, true}) expectManyRowsAPerBlock(w, symmarAlgoLamport, 512, fp8, symmetric);
  }
}

}  // namespace
}  // namespace symmar_gpu_test
