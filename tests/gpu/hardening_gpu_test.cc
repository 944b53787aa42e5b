// What a first GPU run would have hit: ranks sharing a GPU must run at once (the co-scheduling
// probe keeps the kernels), a late rank after a peer's timeout must not produce data, grids follow
// the message size, and an NCCL-served call may be the first one captured in a CUDA graph.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "gpu_test_util.h"

namespace symmar_gpu_test {
namespace {

// Four ranks as threads on one GPU (CUDA_DEVICE_MAX_CONNECTIONS=32 is set before the first CUDA
// call): the probe must meet, so the symmetric kernels stay on and serve a call.
TEST(GpuCoSchedule, RanksSharingAGpuKeepTheKernels) {
  SKIP_WITHOUT_GPU();
  LocalWorld w({0, 0, 0, 0}, 10000, 0);
  ASSERT_TRUE(w.ok()) << w.error();
  symmarTopology_t topo;
  SYMMAR_OK(symmarCommTopology(w.comm(0), &topo));
  EXPECT_EQ(symmarLinkNvLink, topo.link) << "the co-scheduling probe turned the kernels off";
  const size_t count = 3584;  // one token of a 3584-wide model
  std::vector<float*> buf(4);
  std::vector<std::vector<unsigned char>> in(4);
  for (int r = 0; r < 4; ++r) {
    in[r] = makeInput(symmarFloat32, count, r, 3);
    CUDA_OK(devAlloc(&buf[r], count * 4));
    CUDA_OK(cudaMemcpyAsync(buf[r], in[r].data(), count * 4, cudaMemcpyHostToDevice, w.stream(r)));
  }
  for (int r = 0; r < 4; ++r) {
    SYMMAR_OK(symmarAllReduceAlgo(buf[r], buf[r], count, symmarFloat32, symmarSum, symmarAlgoOneShot, w.comm(r),
                                  w.stream(r)));
  }
  CUDA_OK(w.sync());
  const std::vector<double> ref = testref::reduceBuffers(symmarFloat32, symmarSum, in, count);
  std::vector<unsigned char> out(count * 4);
  for (int r = 0; r < 4; ++r) {
    CUDA_OK(cudaMemcpy(out.data(), buf[r], count * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(ref[i], testref::loadElement(out.data(), symmarFloat32, i)) << "rank " << r << " i " << i;
    }
    cudaFree(buf[r]);
  }
}

// Rank 1 calls alone and times out; then rank 0 calls late. Its kernel must exit at entry (rank 1
// pushed its failed word) without reading rank 1's data, write NaN over its output (no stale or
// partial result passes for one), and report symmarPeerFailure.
TEST(GpuFailure, AfterATimeoutTheLateRankProducesNoData) {
  SKIP_WITHOUT_GPU();
  LocalWorld w({0, 0}, 300, 0);
  ASSERT_TRUE(w.ok()) << w.error();
  const size_t count = 4096;
  std::vector<float*> buf(2);
  for (int r = 0; r < 2; ++r) CUDA_OK(devAlloc(&buf[r], count * 4));
  CUDA_OK(cudaMemset(buf[0], 0x5a, count * 4));
  CUDA_OK(cudaMemset(buf[1], 0, count * 4));
  CUDA_OK(cudaDeviceSynchronize());
  SYMMAR_OK(symmarAllReduceAlgo(buf[1], buf[1], count, symmarFloat32, symmarSum, symmarAlgoTwoShot, w.comm(1),
                                w.stream(1)));
  CUDA_OK(cudaStreamSynchronize(w.stream(1)));
  symmarResult_t async = symmarSuccess;
  SYMMAR_OK(symmarCommGetAsyncError(w.comm(1), &async));
  ASSERT_EQ(symmarTimeout, async);
  SYMMAR_OK(symmarAllReduceAlgo(buf[0], buf[0], count, symmarFloat32, symmarSum, symmarAlgoTwoShot, w.comm(0),
                                w.stream(0)));
  CUDA_OK(cudaStreamSynchronize(w.stream(0)));
  SYMMAR_OK(symmarCommGetAsyncError(w.comm(0), &async));
  EXPECT_EQ(symmarPeerFailure, async);
  std::vector<uint32_t> out(count);
  CUDA_OK(cudaMemcpy(out.data(), buf[0], count * 4, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(0x7fc00000u, out[i]) << "element " << i << " is not NaN after the failure";
  for (int r = 0; r < 2; ++r) cudaFree(buf[r]);
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

namespace symmar_gpu_test {
namespace {

// SYMMAR_P2P=off: the kernels stage through pinned host memory (link pcie-nop2p) even where peer
// access exists; on one GPU this runs the host-memory path that PCIe boxes without P2P take.
TEST(GpuHostStaged, P2pOffRunsTheKernelsThroughHostMemory) {
  SKIP_WITHOUT_GPU();
  setenv("SYMMAR_P2P", "off", 1);
  LocalWorld w({0, 0, 0}, 10000, size_t{64} << 10);
  unsetenv("SYMMAR_P2P");
  ASSERT_TRUE(w.ok()) << w.error();
  symmarTopology_t topo;
  SYMMAR_OK(symmarCommTopology(w.comm(0), &topo));
  ASSERT_EQ(symmarLinkPcieNoP2P, topo.link);
  const size_t count = 50000;  // several 64 KiB chunks in f32
  for (symmarAlgo_t algo : {symmarAlgoOneShot, symmarAlgoTwoShot}) {
    std::vector<float*> buf(3);
    std::vector<std::vector<unsigned char>> in(3);
    for (int r = 0; r < 3; ++r) {
      in[r] = makeInput(symmarFloat32, count, r, 11);
      CUDA_OK(devAlloc(&buf[r], count * 4));
      CUDA_OK(cudaMemcpyAsync(buf[r], in[r].data(), count * 4, cudaMemcpyHostToDevice, w.stream(r)));
    }
    for (int r = 0; r < 3; ++r) {
      SYMMAR_OK(symmarAllReduceAlgo(buf[r], buf[r], count, symmarFloat32, symmarSum, algo, w.comm(r), w.stream(r)));
    }
    CUDA_OK(w.sync());
    const std::vector<double> ref = testref::reduceBuffers(symmarFloat32, symmarSum, in, count);
    std::vector<unsigned char> out(count * 4);
    for (int r = 0; r < 3; ++r) {
      CUDA_OK(cudaMemcpy(out.data(), buf[r], count * 4, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(ref[i], testref::loadElement(out.data(), symmarFloat32, i))
            << symmarAlgoName(algo) << " rank " << r << " i " << i;
      }
      cudaFree(buf[r]);
    }
  }
}

}  // namespace
}  // namespace symmar_gpu_test

namespace symmar_gpu_test {
namespace {

// The fused allreduce + residual add + RMSNorm on the GPU, both forms, against a float64 reference.
TEST(GpuFused, AddRmsNormMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  LocalWorld w({0, 0}, 10000, 0);
  ASSERT_TRUE(w.ok()) << w.error();
  const size_t tokens = 7, hidden = 4096, n = tokens * hidden;
  for (symmarAlgo_t algo : {symmarAlgoOneShot, symmarAlgoTwoShot}) {
    std::vector<float*> in(2), res(2), norm(2), gamma(2);
    std::vector<std::vector<float>> host_in(2, std::vector<float>(n));
    std::vector<float> host_res(n), host_gamma(hidden, 1.0f);
    for (size_t i = 0; i < n; ++i) host_res[i] = static_cast<float>(i % 5) - 2.0f;
    for (int r = 0; r < 2; ++r) {
      for (size_t i = 0; i < n; ++i) host_in[r][i] = static_cast<float>((i * 3 + r) % 7) - 3.0f;
      CUDA_OK(devAlloc(&in[r], n * 4));
      CUDA_OK(devAlloc(&res[r], n * 4));
      CUDA_OK(devAlloc(&norm[r], n * 4));
      CUDA_OK(devAlloc(&gamma[r], hidden * 4));
      CUDA_OK(cudaMemcpyAsync(in[r], host_in[r].data(), n * 4, cudaMemcpyHostToDevice, w.stream(r)));
      CUDA_OK(cudaMemcpyAsync(res[r], host_res.data(), n * 4, cudaMemcpyHostToDevice, w.stream(r)));
      CUDA_OK(cudaMemcpyAsync(gamma[r], host_gamma.data(), hidden * 4, cudaMemcpyHostToDevice, w.stream(r)));
    }
    for (int r = 0; r < 2; ++r) {
      symmarAddRmsNormArgs_t a{};
      a.input = in[r];
      a.residual_in = res[r];
      a.residual_out = res[r];
      a.norm_out = norm[r];
      a.gamma = gamma[r];
      a.eps = 1e-6f;
      a.tokens = tokens;
      a.hidden = hidden;
      a.dtype = symmarFloat32;
      SYMMAR_OK(symmarAllReduceAddRmsNormAlgo(&a, algo, w.comm(r), w.stream(r)));
    }
    CUDA_OK(w.sync());
    std::vector<float> got_res(n), got_norm(n);
    CUDA_OK(cudaMemcpy(got_res.data(), res[1], n * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(got_norm.data(), norm[1], n * 4, cudaMemcpyDeviceToHost));
    for (size_t t = 0; t < tokens; ++t) {
      double ss = 0;
      for (size_t i = 0; i < hidden; ++i) {
        const double want = host_in[0][t * hidden + i] + host_in[1][t * hidden + i] + host_res[t * hidden + i];
        ASSERT_EQ(want, got_res[t * hidden + i]) << symmarAlgoName(algo);
        ss += want * want;
      }
      const double inv = 1.0 / std::sqrt(ss / hidden + 1e-6);
      for (size_t i = 0; i < hidden; ++i) {
        ASSERT_NEAR(got_res[t * hidden + i] * inv, got_norm[t * hidden + i], 1e-5) << symmarAlgoName(algo);
      }
    }
    for (int r = 0; r < 2; ++r) {
      cudaFree(in[r]);
      cudaFree(res[r]);
      cudaFree(norm[r]);
      cudaFree(gamma[r]);
    }
  }
}

}  // namespace
}  // namespace symmar_gpu_test
