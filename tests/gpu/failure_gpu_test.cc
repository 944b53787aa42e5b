// Failures on the GPU end in bounded time and never in wrong data: a rank that never calls makes its
// peers time out, a rank that arrives after its peer's timeout produces no data, and a failure
// symmar reports is not left in the CUDA runtime's sticky error.
#include <cstdlib>
#include <cstring>

#include "gpu_test_util.h"

namespace symmar_gpu_test {
namespace {

/// Rank 0 never calls: the others' kernels give up after timeout_ms and the comm reports it.
TEST(GpuFailure, MissingRankTimesOut) {
  SKIP_WITHOUT_GPU();
  const int world = 3;
  const size_t count = 4096;
  LocalWorld w(std::vector<int>(world, 0), 1000, 0);
  ASSERT_TRUE(w.ok()) << w.error();
  std::vector<float*> buf(world);
  for (int r = 0; r < world; ++r) CUDA_OK(devAlloc(&buf[r], count * sizeof(float)));
  for (int r = 1; r < world; ++r) {
    SYMMAR_OK(symmarAllReduceAlgo(buf[r], buf[r], count, symmarFloat32, symmarSum, symmarAlgoOneShot, w.comm(r),
                                  w.stream(r)));
  }
  CUDA_OK(w.sync());  // returns because every device wait is bounded
  for (int r = 1; r < world; ++r) {
    symmarResult_t async = symmarSuccess;
    SYMMAR_OK(symmarCommGetAsyncError(w.comm(r), &async));
    EXPECT_EQ(symmarTimeout, async) << "rank " << r;
    // Regression: the comm's text stayed empty here, a code without a cause for a caller that polls.
    EXPECT_NE(std::string::npos, std::string(symmarGetLastError(w.comm(r))).find("waited"))
        << "rank " << r << ": '" << symmarGetLastError(w.comm(r)) << "'";
    symmarResult_t next = symmarAllReduceAlgo(buf[r], buf[r], count, symmarFloat32, symmarSum, symmarAlgoOneShot,
                                              w.comm(r), w.stream(r));
    EXPECT_TRUE(next == symmarTimeout || next == symmarInvalidUsage) << symmarGetErrorString(next);
    EXPECT_NE(std::string::npos, std::string(symmarGetLastError(w.comm(r))).find("ms"))
        << symmarGetLastError(w.comm(r));
  }
  for (int r = 0; r < world; ++r) cudaFree(buf[r]);
}

// Rank 1 calls alone and times out; then rank 0 calls late. Its kernel must exit at entry (rank 1
// pushed its failed word) without reading rank 1's data, write NaN over its output (no stale or
// partial result passes for one), and report symmarPeerFailure. The two-shot and the lamport form
// (whose blocks each poison their own share of the output: together, all of it).
TEST(GpuFailure, AfterATimeoutTheLateRankProducesNoData) {
  SKIP_WITHOUT_GPU();
  for (symmarAlgo_t algo : {symmarAlgoTwoShot, symmarAlgoLamport}) {
    SCOPED_TRACE(symmarAlgoName(algo));
    LocalWorld w({0, 0}, 300, 0);
    ASSERT_TRUE(w.ok()) << w.error();
    const size_t count = 4096;
    std::vector<float*> buf(2);
    for (int r = 0; r < 2; ++r) CUDA_OK(devAlloc(&buf[r], count * 4));
    CUDA_OK(cudaMemset(buf[0], 0x5a, count * 4));
    CUDA_OK(cudaMemset(buf[1], 0, count * 4));
    CUDA_OK(cudaDeviceSynchronize());
    SYMMAR_OK(symmarAllReduceAlgo(buf[1], buf[1], count, symmarFloat32, symmarSum, algo, w.comm(1), w.stream(1)));
    CUDA_OK(cudaStreamSynchronize(w.stream(1)));
    symmarResult_t async = symmarSuccess;
    SYMMAR_OK(symmarCommGetAsyncError(w.comm(1), &async));
    ASSERT_EQ(symmarTimeout, async);
    SYMMAR_OK(symmarAllReduceAlgo(buf[0], buf[0], count, symmarFloat32, symmarSum, algo, w.comm(0), w.stream(0)));
    CUDA_OK(cudaStreamSynchronize(w.stream(0)));
    SYMMAR_OK(symmarCommGetAsyncError(w.comm(0), &async));
    EXPECT_EQ(symmarPeerFailure, async);
    std::vector<uint32_t> out(count);
    CUDA_OK(cudaMemcpy(out.data(), buf[0], count * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(0x7fc00000u, out[i]) << "element " << i << " is not NaN after the failure";
    }
    for (int r = 0; r < 2; ++r) cudaFree(buf[r]);
  }
}

/// A CUDA failure symmar reports in its own result does not surface again in the caller's next
/// cudaGetLastError (where it would blame the caller's own launch).
TEST(GpuErrors, AFailureSymmarReportsIsNotLeftInTheRuntimesLastError) {
  SKIP_WITHOUT_GPU();
  LocalWorld w({0}, 20000, 0);
  ASSERT_TRUE(w.ok()) << w.error();
  CUDA_OK(cudaSetDevice(w.device(0)));
  void* p = nullptr;
  EXPECT_EQ(symmarMemAlloc(w.comm(0), size_t{1} << 52, &p), symmarOutOfMemory) << symmarGetLastError(w.comm(0));
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
}

}  // namespace
}  // namespace symmar_gpu_test
