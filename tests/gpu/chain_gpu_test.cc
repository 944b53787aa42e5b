// Calls launched back to back with nothing between them: the only place where programmatic
// dependent launch starts a kernel while the previous symmar kernel still runs, where ranks sharing
// a GPU are in different calls, and where lamport's buffer rotation meets barrier kernels on a GPU.
// Also lamport's call number across its 32-bit wrap, and the fused two-shot form with FP8 output
// at hidden sizes that are not multiples of 16 bytes (run under compute-sanitizer by
// scripts/gpu-check.sh: a misaligned access there kills the context).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_util.h"

namespace symmar_gpu_test {
namespace {

/// One call of the chain: the same on every rank.
struct ChainCall {
  symmarAlgo_t algo;  ///< symmarAlgoAuto stands for the fused call (two-shot form)
  symmarDataType_t dtype;
  size_t count;       ///< elements (fused: tokens x hidden)
};

std::vector<ChainCall> chainCalls(int n) {
  const symmarAlgo_t cycle[] = {symmarAlgoLamport, symmarAlgoOneShot, symmarAlgoTwoShot, symmarAlgoAuto};
  const size_t counts[] = {1, 1000, 4096, 25600, (size_t(1) << 18) + 3};  // 4 B .. 1 MiB + 12 B of f32
  const size_t lamport_counts[] = {1, 1000, 4096, 25600, 65536};          // up to lamport's 256 KiB
  std::vector<ChainCall> calls;
  for (int k = 0; k < n; ++k) {
    ChainCall c{cycle[k % 4], static_cast<symmarDataType_t>((k / 4) % 3), counts[(k / 3) % 5]};
    if (c.algo == symmarAlgoLamport) c.count = lamport_counts[(k / 3) % 5];
    if (c.algo == symmarAlgoAuto) c.count = 7168 * (1 + k % 4);  // 1-4 tokens of hidden 7168
    calls.push_back(c);
  }
  return calls;
}

/// Calls per chain: SYMMAR_CHAIN_CALLS, else 1,200.
int chainLength() {
  const char* v = std::getenv("SYMMAR_CHAIN_CALLS");
  return v && *v ? std::atoi(v) : 1200;
}

void runChain(const char* pdl) {
  SKIP_WITHOUT_GPU();
  setenv("SYMMAR_PDL", pdl, 1);
  const int world = 8;
  LocalWorld w(std::vector<int>(world, 0), 30000, 0);
  unsetenv("SYMMAR_PDL");
  ASSERT_TRUE(w.ok()) << w.error();
  const std::vector<ChainCall> calls = chainCalls(chainLength());
  // Every call has its own inputs and outputs, written and synchronised before the chain starts.
  std::vector<std::vector<void*>> send(calls.size(), std::vector<void*>(world)), recv = send;
  std::vector<void*> gamma(world);
  std::vector<std::vector<std::vector<unsigned char>>> in(calls.size());
  const size_t hidden = 7168;
  const std::vector<uint16_t> ones(hidden, testref::floatToBf16(1.0f));
  for (int r = 0; r < world; ++r) {
    CUDA_OK(devAlloc(&gamma[r], hidden * 2));
    CUDA_OK(cudaMemcpy(gamma[r], ones.data(), hidden * 2, cudaMemcpyHostToDevice));
  }
  for (size_t k = 0; k < calls.size(); ++k) {
    const ChainCall& c = calls[k];
    const symmarDataType_t t = c.algo == symmarAlgoAuto ? symmarBfloat16 : c.dtype;
    const size_t bytes = c.count * testref::elementSize(t);
    for (int r = 0; r < world; ++r) {
      in[k].push_back(makeInput(t, c.count, r, static_cast<uint32_t>(k + 1)));
      CUDA_OK(devAlloc(&send[k][r], bytes));
      CUDA_OK(devAlloc(&recv[k][r], bytes));
      CUDA_OK(cudaMemcpy(send[k][r], in[k][r].data(), bytes, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemset(recv[k][r], 0xff, bytes));
    }
  }
  CUDA_OK(cudaDeviceSynchronize());
  // The chain: every rank's calls queued back to back on its own stream.
  for (size_t k = 0; k < calls.size(); ++k) {
    const ChainCall& c = calls[k];
    for (int r = 0; r < world; ++r) {
      symmarResult_t res;
      if (c.algo == symmarAlgoAuto) {
        symmarAddRmsNormArgs_t a{};
        a.input = send[k][r];
        a.residual_out = recv[k][r];
        a.norm_out = send[k][r];  // the input is dead once staged: the norm may overwrite it
        a.gamma = gamma[r];
        a.eps = 1e-6f;
        a.tokens = c.count / hidden;
        a.hidden = hidden;
        a.dtype = symmarBfloat16;
        res = symmarAllReduceAddRmsNormAlgo(&a, symmarAlgoTwoShot, w.comm(r), w.stream(r));
      } else {
        res = symmarAllReduceAlgo(send[k][r], recv[k][r], c.count, c.dtype, symmarSum, c.algo, w.comm(r), w.stream(r));
      }
      ASSERT_EQ(res, symmarSuccess) << "call " << k << " rank " << r << ": " << symmarGetLastError(w.comm(r));
    }
  }
  CUDA_OK(w.sync());
  for (int r = 0; r < world; ++r) {
    symmarResult_t err = symmarSuccess;
    ASSERT_EQ(symmarCommGetAsyncError(w.comm(r), &err), symmarSuccess);
    ASSERT_EQ(err, symmarSuccess) << "rank " << r << ": " << symmarGetLastError(w.comm(r));
  }
  for (size_t k = 0; k < calls.size(); ++k) {
    const ChainCall& c = calls[k];
    const symmarDataType_t t = c.algo == symmarAlgoAuto ? symmarBfloat16 : c.dtype;
    const size_t bytes = c.count * testref::elementSize(t);
    // The fused call's residual_out is the plain sum (no residual in): the same reference.
    const std::vector<double> ref = testref::reduceBuffers(t, symmarSum, in[k], c.count);
    std::vector<unsigned char> first(bytes), out(bytes);
    for (int r = 0; r < world; ++r) {
      std::vector<unsigned char>& dst = r == 0 ? first : out;
      CUDA_OK(cudaMemcpy(dst.data(), recv[k][r], bytes, cudaMemcpyDeviceToHost));
      if (r > 0) {
        ASSERT_EQ(std::memcmp(first.data(), out.data(), bytes), 0) << "call " << k << ": rank " << r;
      }
    }
    for (size_t i = 0; i < c.count; ++i) {
      const double got = testref::loadElement(first.data(), t, i);
      ASSERT_LE(std::abs(got - ref[i]), testref::sumTolerance(t, ref[i], world))
          << "call " << k << " (" << (c.algo == symmarAlgoAuto ? "fused" : symmarAlgoName(c.algo)) << ", count "
          << c.count << ") element " << i;
    }
  }
  for (size_t k = 0; k < calls.size(); ++k) {
    for (int r = 0; r < world; ++r) {
      cudaFree(send[k][r]);
      cudaFree(recv[k][r]);
    }
  }
  for (void* p : gamma) cudaFree(p);
}

TEST(GpuChain, BackToBackMixedCallsPdlOn) { runChain("1"); }
TEST(GpuChain, BackToBackMixedCallsPdlOff) { runChain("0"); }

// lamport's call number starts 6 calls before its 32-bit wrap (SYMMAR_EPOCH_START seeds it); every
// call has other data, one-shot calls come in between.
TEST(GpuEpochs, LamportCallNumberWraps) {
  SKIP_WITHOUT_GPU();
  setenv("SYMMAR_EPOCH_START", "4294967290", 1);
  const int world = 4;
  LocalWorld w(std::vector<int>(world, 0), 20000, 0);
  unsetenv("SYMMAR_EPOCH_START");
  ASSERT_TRUE(w.ok()) << w.error();
  const size_t count = 3000;
  std::vector<float*> buf(world);
  for (int r = 0; r < world; ++r) CUDA_OK(devAlloc(&buf[r], count * 4));
  for (int it = 0; it < 16; ++it) {
    std::vector<std::vector<unsigned char>> in;
    for (int r = 0; r < world; ++r) {
      in.push_back(makeInput(symmarFloat32, count, r, static_cast<uint32_t>(100 + it)));
      CUDA_OK(cudaMemcpyAsync(buf[r], in[r].data(), count * 4, cudaMemcpyHostToDevice, w.stream(r)));
    }
    const symmarAlgo_t algo = it % 5 == 4 ? symmarAlgoOneShot : symmarAlgoLamport;
    for (int r = 0; r < world; ++r) {
      SYMMAR_OK(symmarAllReduceAlgo(buf[r], buf[r], count, symmarFloat32, symmarSum, algo, w.comm(r), w.stream(r)));
    }
    CUDA_OK(w.sync());
    const std::vector<double> ref = testref::reduceBuffers(symmarFloat32, symmarSum, in, count);
    for (int r = 0; r < world; ++r) {
      std::vector<unsigned char> out(count * 4);
      CUDA_OK(cudaMemcpy(out.data(), buf[r], count * 4, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < count; ++i) {
        const double got = testref::loadElement(out.data(), symmarFloat32, i);
        ASSERT_LE(std::abs(got - ref[i]), testref::sumTolerance(symmarFloat32, ref[i], world))
            << "call " << it << " rank " << r << " element " << i;
      }
    }
  }
  for (float* p : buf) cudaFree(p);
}

// Two-shot fused with FP8 output at hidden sizes whose rows are no multiple of 16 bytes: every row
// published after the first must stay aligned (a misaligned access is a dead context).
TEST(GpuFused, TwoShotFp8OddHidden) {
  SKIP_WITHOUT_GPU();
  LocalWorld w({0, 0}, 10000, 0);
  ASSERT_TRUE(w.ok()) << w.error();
  for (symmarDataType_t t : {symmarFloat16, symmarFloat32}) {
    for (size_t hidden : {size_t(7), size_t(4097)}) {
      const size_t tokens = 5, n = tokens * hidden, es = testref::elementSize(t);
      std::vector<void*> in(2), res(2), norm(2), gamma(2), q(2);
      for (int r = 0; r < 2; ++r) {
        const std::vector<unsigned char> x = makeInput(t, n, r, 7);
        CUDA_OK(devAlloc(&in[r], n * es));
        CUDA_OK(devAlloc(&res[r], n * es));
        CUDA_OK(devAlloc(&norm[r], n * es));
        CUDA_OK(devAlloc(&gamma[r], hidden * es));
        CUDA_OK(devAlloc(&q[r], n));
        CUDA_OK(cudaMemcpy(in[r], x.data(), n * es, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemset(gamma[r], 0, hidden * es));  // any gamma: this test is about addresses
      }
      for (int r = 0; r < 2; ++r) {
        symmarAddRmsNormArgs_t a{};
        a.input = in[r];
        a.residual_out = res[r];
        a.norm_out = norm[r];
        a.gamma = gamma[r];
        a.fp8_out = q[r];
        a.fp8_scale = 1.0f;
        a.eps = 1e-6f;
        a.tokens = tokens;
        a.hidden = hidden;
        a.dtype = t;
        SYMMAR_OK(symmarAllReduceAddRmsNormAlgo(&a, symmarAlgoTwoShot, w.comm(r), w.stream(r)));
      }
      CUDA_OK(w.sync());
      std::vector<unsigned char> r0(n * es), r1(n * es);
      CUDA_OK(cudaMemcpy(r0.data(), res[0], n * es, cudaMemcpyDeviceToHost));
      CUDA_OK(cudaMemcpy(r1.data(), res[1], n * es, cudaMemcpyDeviceToHost));
      EXPECT_EQ(std::memcmp(r0.data(), r1.data(), n * es), 0) << "dtype " << t << " hidden " << hidden;
      for (int r = 0; r < 2; ++r) {
        cudaFree(in[r]);
        cudaFree(res[r]);
        cudaFree(norm[r]);
        cudaFree(gamma[r]);
        cudaFree(q[r]);
      }
    }
  }
}

}  // namespace
}  // namespace symmar_gpu_test
