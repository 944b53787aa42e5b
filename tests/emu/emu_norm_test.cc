// The row statistic of the fused add + RMSNorm kernels (cuda/norm.cuh's rowInvRms) on the emulated
// runtime, at block sizes the allreduce suites do not run (they use one warp a block): several
// warps, each reduced with shuffles, then the warps' sums added in order. Every thread must end with
// the same bits, and the value must match a float64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

// clang-format off
#include "emu/emu_runtime.h"
#include "cuda/norm.cuh"
// clang-format on

namespace symmar {
namespace emu {
namespace {

constexpr int kRows = 3;  // rows one after another in a block, as a kernel finishes them

/// Each thread's sum of squares for row r at send[r * Threads + thread]; every thread's 1 / RMS of
/// the row to recv at the same index.
template <int Threads>
void rowStatisticKernel(const gpu::KernelArgs a) {
  SYMMAR_BLOCK_SHARED(gpu::NormShared<Threads>, ns);
  const float* ss = static_cast<const float*>(a.send);
  float* inv = static_cast<float*>(a.recv);
  for (int r = 0; r < kRows; ++r) {
    const size_t i = static_cast<size_t>(r) * Threads + threadIdx.x;
    inv[i] = gpu::rowInvRms(&ns, ss[i], a.hidden, a.eps);
  }
}

template <int Threads>
void checkRowStatistic(unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(0.0f, 4.0f);
  std::vector<float> ss(kRows * Threads), inv(kRows * Threads, -1.0f);
  for (float& v : ss) v = dist(gen);
  gpu::KernelArgs args{};
  args.send = ss.data();
  args.recv = inv.data();
  args.hidden = 7168;
  args.eps = 1e-5f;
  runConcurrently({Launch{reinterpret_cast<const void*>(&rowStatisticKernel<Threads>), 1, args, nullptr, Threads}});
  for (int r = 0; r < kRows; ++r) {
    double sum = 0.0;
    for (int t = 0; t < Threads; ++t) sum += ss[static_cast<size_t>(r * Threads + t)];
    const double want = 1.0 / std::sqrt(sum / 7168.0 + 1e-5);
    const float first = inv[static_cast<size_t>(r * Threads)];
    EXPECT_NEAR(first, want, want * 1e-5) << Threads << " threads, row " << r;
    for (int t = 1; t < Threads; ++t) {
      const float got = inv[static_cast<size_t>(r * Threads + t)];
      ASSERT_EQ(std::memcmp(&got, &first, sizeof(got)), 0) << Threads << " threads, row " << r << " thread " << t;
    }
  }
}

TEST(RowStatistic, EveryThreadGetsTheSameBitsAtEveryBlockSize) {
  checkRowStatistic<16>(1);   // the emulated lamport block: less than a warp
  checkRowStatistic<32>(2);   // one warp
  checkRowStatistic<64>(3);   // two warps: the warps' sums added
  checkRowStatistic<256>(4);  // the GPU's lamport block
}

// A hand-worked value: every thread's squares sum to 2, 64 threads, h = 128: mean square 1.
TEST(RowStatistic, AHandWorkedRow) {
  std::vector<float> ss(kRows * 64, 2.0f), inv(kRows * 64, -1.0f);
  gpu::KernelArgs args{};
  args.send = ss.data();
  args.recv = inv.data();
  args.hidden = 128;
  args.eps = 0.0f;
  runConcurrently({Launch{reinterpret_cast<const void*>(&rowStatisticKernel<64>), 1, args, nullptr, 64}});
  for (float v : inv) ASSERT_EQ(v, 1.0f);
}

}  // namespace
}  // namespace emu
}  // namespace symmar
