// The paths a shared-GPU comm takes: the topology it reports, the co-scheduling probe that keeps
// the kernels, the host-staged path (SYMMAR_P2P=off), and the fused allreduce + add + RMSNorm.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api/comm.h"
#include "gpu_test_util.h"
#include "plan/planner.h"

namespace symmar_gpu_test {
namespace {

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

// The fused allreduce + residual add + RMSNorm on w's two ranks, in form `algo` (symmarAlgoAuto:
// as planned), residual updated in place, against a float64 reference.
void expectAddRmsNormMatchesTheReference(const LocalWorld& w, symmarAlgo_t algo) {
  const size_t tokens = 7, hidden = 4096, n = tokens * hidden;
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
    if (algo == symmarAlgoAuto) {
      SYMMAR_OK(symmarAllReduceAddRmsNorm(&a, w.comm(r), w.stream(r)));
    } else {
      SYMMAR_OK(symmarAllReduceAddRmsNormAlgo(&a, algo, w.comm(r), w.stream(r)));
    }
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

// Both fused forms.
TEST(GpuFused, AddRmsNormMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  LocalWorld w({0, 0}, 10000, 0);
  ASSERT_TRUE(w.ok()) << w.error();
  for (symmarAlgo_t algo : {symmarAlgoOneShot, symmarAlgoTwoShot}) expectAddRmsNormMatchesTheReference(w, algo);
}

// Unfused, as past a table row's last fused threshold: the allreduce, then the add + RMSNorm kernel
// on each rank (the sums go to norm_out, since residual_out is residual_in). The rows cover the
// keys two ranks on one or two GPUs of this machine may get.
TEST(GpuFused, UnfusedPastTheLastThresholdMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  char path[] = "/tmp/symmar_gpu_unfused_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string table = R"({"rows": [)";
  for (const char* arch : {"sm90", "sm100", "sm103", "sm120", "sm121", "default"}) {
    for (const char* link : {"nvswitch", "nvlink", "pcie"}) {
      table += std::string(table.back() == '[' ? "" : ",") + R"({"arch": ")" + arch + R"(", "link": ")" + link +
               R"(", "world": 2, "collective": "addrmsnorm", "source": "test", "algos": [{"algo": "twoshot", "max_bytes": 1}]})";
    }
  }
  table += "]}";
  ASSERT_EQ(write(fd, table.data(), table.size()), static_cast<ssize_t>(table.size()));
  close(fd);
  setenv("SYMMAR_TABLE_FILE", path, 1);
  symmar::resetProcessTables();  // the tables load once a process: an earlier test may have loaded them
  {
    LocalWorld w({0, 0}, 10000, 0);
    ASSERT_TRUE(w.ok()) << w.error();
    expectAddRmsNormMatchesTheReference(w, symmarAlgoAuto);
    for (int r = 0; r < 2; ++r) EXPECT_EQ(w.comm(r)->unfused_calls.load(), 1u) << "rank " << r << " ran fused";
  }
  unsetenv("SYMMAR_TABLE_FILE");
  symmar::resetProcessTables();
  unlink(path);
}

}  // namespace
}  // namespace symmar_gpu_test
