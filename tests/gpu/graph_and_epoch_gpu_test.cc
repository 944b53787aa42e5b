// Calls replayed and repeated: a CUDA graph replayed a hundred times, the epochs across their wrap,
// the NCCL fallback on one rank and as the first call inside a capture.
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

// The NCCL communicator exists from comm creation, so the first NCCL-served call may be captured.
TEST(GpuNccl, FirstCallInsideACapture) {
  SKIP_WITHOUT_GPU();
  LocalWorld w({0}, 20000, 0);
  ASSERT_TRUE(w.ok()) << w.error();
  const size_t count = 1000;
  float* buf = nullptr;
  CUDA_OK(devAlloc(&buf, count * 4));
  std::vector<float> in(count), out(count);
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(i % 13) - 6.0f;
  CUDA_OK(cudaMemcpyAsync(buf, in.data(), count * 4, cudaMemcpyHostToDevice, w.stream(0)));
  CUDA_OK(cudaStreamSynchronize(w.stream(0)));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(w.stream(0), cudaStreamCaptureModeThreadLocal));
  const symmarResult_t res = symmarAllReduceAlgo(buf, buf, count, symmarFloat32, symmarSum, symmarAlgoNccl, w.comm(0),
                                                 w.stream(0));
  const std::string why = symmarGetLastError(w.comm(0));
  CUDA_OK(cudaStreamEndCapture(w.stream(0), &graph));
  if (res == symmarUnsupported) GTEST_SKIP() << "NCCL not loadable: " << why;
  ASSERT_EQ(symmarSuccess, res) << why;
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, w.stream(0)));
  CUDA_OK(cudaStreamSynchronize(w.stream(0)));
  CUDA_OK(cudaMemcpy(out.data(), buf, count * 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(0, std::memcmp(in.data(), out.data(), count * 4)) << "one rank: the sum is the input";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(buf);
}

}  // namespace
}  // namespace symmar_gpu_test
