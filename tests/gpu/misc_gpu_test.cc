// CUDA-graph replay, bounded waits (a rank that never calls), epoch wrap, the NCCL fallback and
// the topology a shared-GPU comm reports.
#include <cstdlib>
#include <cstring>

#include "gpu_test_util.h"

namespace symmar_gpu_test {
namespace {

std::vector<float> hostFloats(size_t count, int rank) {
  std::vector<unsigned char> b = makeInput(symmarFloat32, count, rank, 7);
  std::vector<float> f(count);
  std::memcpy(f.data(), b.data(), b.size());
  return f;
}

TEST(GpuTopology, SharedGpuReportsPeerLink) {
  SKIP_WITHOUT_GPU();
  LocalWorld w({0, 0, 0}, 10000, 0);
  ASSERT_TRUE(w.ok()) << w.error();
  symmarTopology_t topo;
  SYMMAR_OK(symmarCommTopology(w.comm(0), &topo));
  EXPECT_EQ(3, topo.world_size);
  EXPECT_GE(topo.cc_major, 7);
  EXPECT_EQ(symmarLinkNvLink, topo.link) << "ranks on one GPU share local memory";
  EXPECT_EQ(0, topo.multicast) << "a multicast object cannot bind one GPU twice";
}

/// 100 replays of one captured graph per rank: the barrier epochs advance on the device.
TEST(GpuGraph, HundredReplays) {
  SKIP_WITHOUT_GPU();
  const int world = 4;
  const size_t count = 70001;
  for (symmarAlgo_t algo : {symmarAlgoOneShot, symmarAlgoTwoShot}) {
    LocalWorld w(std::vector<int>(world, 0), 20000, size_t{64} << 10);
    ASSERT_TRUE(w.ok()) << w.error();
    std::vector<float*> src(world), buf(world);
    std::vector<std::vector<float>> in(world);
    std::vector<cudaGraphExec_t> exec(world);
    for (int r = 0; r < world; ++r) {
      in[r] = hostFloats(count, r);
      CUDA_OK(devAlloc(&src[r], count * sizeof(float)));
      CUDA_OK(devAlloc(&buf[r], count * sizeof(float)));
      CUDA_OK(cudaMemcpy(src[r], in[r].data(), count * sizeof(float), cudaMemcpyHostToDevice));
    }
    CUDA_OK(cudaDeviceSynchronize());  // the graphs run on non-blocking streams: inputs must be in place
    // Each graph: restore the input, then reduce in place.
    for (int r = 0; r < world; ++r) {
      cudaGraph_t graph;
      CUDA_OK(cudaStreamBeginCapture(w.stream(r), cudaStreamCaptureModeThreadLocal));
      CUDA_OK(cudaMemcpyAsync(buf[r], src[r], count * sizeof(float), cudaMemcpyDeviceToDevice, w.stream(r)));
      SYMMAR_OK(symmarAllReduceAlgo(buf[r], buf[r], count, symmarFloat32, symmarSum, algo, w.comm(r), w.stream(r)));
      CUDA_OK(cudaStreamEndCapture(w.stream(r), &graph));
      CUDA_OK(cudaGraphInstantiate(&exec[r], graph, 0));
      CUDA_OK(cudaGraphDestroy(graph));
    }
    std::vector<float> expect(count, 0.0f);
    for (size_t i = 0; i < count; ++i) {
      for (int r = 0; r < world; ++r) expect[i] += in[r][i];
    }
    std::vector<float> out(count);
    for (int it = 0; it < 100; ++it) {
      for (int r = 0; r < world; ++r) CUDA_OK(cudaGraphLaunch(exec[r], w.stream(r)));
      if (it % 25 == 24) {
        CUDA_OK(w.sync());
        for (int r = 0; r < world; ++r) {
          CUDA_OK(cudaMemcpy(out.data(), buf[r], count * sizeof(float), cudaMemcpyDeviceToHost));
          ASSERT_EQ(0, std::memcmp(out.data(), expect.data(), count * sizeof(float)))
              << symmarAlgoName(algo) << " replay " << it << " rank " << r;
        }
      }
    }
    symmarResult_t async = symmarSuccess;
    SYMMAR_OK(symmarCommGetAsyncError(w.comm(0), &async));
    EXPECT_EQ(symmarSuccess, async);
    for (int r = 0; r < world; ++r) {
      cudaGraphExecDestroy(exec[r]);
      cudaFree(src[r]);
      cudaFree(buf[r]);
    }
  }
}

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
    symmarResult_t next = symmarAllReduceAlgo(buf[r], buf[r], count, symmarFloat32, symmarSum, symmarAlgoOneShot,
                                              w.comm(r), w.stream(r));
    EXPECT_TRUE(next == symmarTimeout || next == symmarInvalidUsage) << symmarGetErrorString(next);
    EXPECT_NE(std::string::npos, std::string(symmarGetLastError(w.comm(r))).find("ms"))
        << symmarGetLastError(w.comm(r));
  }
  for (int r = 0; r < world; ++r) cudaFree(buf[r]);
}

/// Barrier epochs near 2^32 wrap during the run and keep working.
TEST(GpuEpochs, WrapAround) {
  SKIP_WITHOUT_GPU();
  setenv("SYMMAR_EPOCH_START", "4294967280", 1);
  const int world = 2;
  LocalWorld w(std::vector<int>(world, 0), 20000, size_t{64} << 10);
  unsetenv("SYMMAR_EPOCH_START");
  ASSERT_TRUE(w.ok()) << w.error();
  const size_t count = 100000;  // several chunks: several barriers per call
  std::vector<float*> buf(world);
  std::vector<std::vector<float>> in(world);
  for (int r = 0; r < world; ++r) {
    in[r] = hostFloats(count, r);
    CUDA_OK(devAlloc(&buf[r], count * sizeof(float)));
  }
  std::vector<float> out(count);
  for (int it = 0; it < 8; ++it) {
    for (int r = 0; r < world; ++r) {
      CUDA_OK(cudaSetDevice(w.device(r)));
      CUDA_OK(cudaMemcpyAsync(buf[r], in[r].data(), count * sizeof(float), cudaMemcpyHostToDevice, w.stream(r)));
    }
    const symmarAlgo_t algo = it % 2 ? symmarAlgoTwoShot : symmarAlgoOneShot;
    for (int r = 0; r < world; ++r) {
      SYMMAR_OK(symmarAllReduceAlgo(buf[r], buf[r], count, symmarFloat32, symmarSum, algo, w.comm(r), w.stream(r)));
    }
    CUDA_OK(w.sync());
    CUDA_OK(cudaMemcpy(out.data(), buf[1], count * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; i += 997) ASSERT_EQ(in[0][i] + in[1][i], out[i]) << "iteration " << it;
  }
  for (int r = 0; r < world; ++r) cudaFree(buf[r]);
}

/// The NCCL fallback at world 1 (NCCL cannot put two ranks on one GPU): every dtype.
TEST(GpuNccl, WorldOne) {
  SKIP_WITHOUT_GPU();
  LocalWorld w({0}, 20000, 0);
  ASSERT_TRUE(w.ok()) << w.error();
  const size_t count = 1025;
  void* buf = nullptr;
  CUDA_OK(devAlloc(&buf, count * 8));
  std::vector<unsigned char> in(count * 8), out(count * 8);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i * 7 % 61);  // finite in every type
  for (symmarDataType_t t : {symmarFloat32, symmarFloat16, symmarBfloat16, symmarInt32, symmarFloat64}) {
    const size_t bytes = count * symmarTypeSize(t);
    CUDA_OK(cudaSetDevice(w.device(0)));
    CUDA_OK(cudaMemcpyAsync(buf, in.data(), bytes, cudaMemcpyHostToDevice, w.stream(0)));
    symmarResult_t res = symmarAllReduceAlgo(buf, buf, count, t, symmarSum, symmarAlgoNccl, w.comm(0), w.stream(0));
    if (res == symmarUnsupported) GTEST_SKIP() << "NCCL not loadable: " << symmarGetLastError(w.comm(0));
    ASSERT_EQ(symmarSuccess, res) << symmarGetLastError(w.comm(0));
    CUDA_OK(w.sync());
    CUDA_OK(cudaMemcpy(out.data(), buf, bytes, cudaMemcpyDeviceToHost));
    EXPECT_EQ(0, std::memcmp(in.data(), out.data(), bytes)) << "dtype " << t;
  }
  cudaFree(buf);
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
