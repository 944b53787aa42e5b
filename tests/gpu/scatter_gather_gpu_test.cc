// Reduce-scatter and all-gather kernels on a GPU: one-shot on ranks sharing one GPU and on one GPU
// each, multimem where the GPUs have multicast; every dtype of the kernels, every op, counts around
// vectors and chunks, caller and symmetric send buffers, in place; against the float64 reference
// (rank r's block of the reduction of the whole buffers; the gathered bytes exactly).
#include <algorithm>
#include <cstring>

#include "gpu_test_util.h"

namespace symmar_gpu_test {
namespace {

constexpr size_t kStaging = size_t{64} << 10;  // small, so large counts run through many chunks
constexpr int kTimeoutMs = 20000;
const size_t kCounts[] = {0, 1, 7, 1000, 65537, 5 * (kStaging / 4) + 3};
constexpr size_t kMaxBytes = (5 * (kStaging / 4) + 3) * 4 * 8;  // the largest count's whole buffer at 8 ranks

enum Mode { kOutOfPlace, kInPlace, kSymmetric, kNumModes };
const char* modeName(int m) {
  static const char* names[] = {"out-of-place", "in-place", "symmetric"};
  return names[m];
}

struct Buffers {
  std::vector<void*> whole, block;  // per rank: nranks blocks, and one block
  bool symmetric = false;
};

bool allocBuffers(const LocalWorld& w, bool symmetric, Buffers* b) {
  const size_t n = static_cast<size_t>(w.size());
  b->whole.assign(n, nullptr);
  b->block.assign(n, nullptr);
  b->symmetric = symmetric;
  std::vector<int> ok(n, 0);
  w.parallel([&](int r) {
    auto alloc = [&](void** p) {
      return symmetric ? symmarMemAlloc(w.comm(r), kMaxBytes, p) == symmarSuccess : cudaMalloc(p, kMaxBytes) == cudaSuccess;
    };
    ok[r] = alloc(&b->whole[r]) && alloc(&b->block[r]);
  });
  return std::all_of(ok.begin(), ok.end(), [](int v) { return v != 0; });
}

void freeBuffers(const LocalWorld& w, Buffers* b) {
  w.parallel([&](int r) {
    for (void* p : {b->block[r], b->whole[r]}) {
      if (b->symmetric) symmarMemFree(w.comm(r), p);
      else cudaFree(p);
    }
  });
}

/// One reduce-scatter (scatter) or all-gather on every rank and its check; "" on success.
std::string runCase(const LocalWorld& w, const Buffers& b, int mode, bool scatter, symmarAlgo_t algo,
                    symmarDataType_t t, symmarRedOp_t op, size_t count, uint32_t seed) {
  const int n = w.size();
  const size_t es = testref::elementSize(t), block = count * es, whole = block * static_cast<size_t>(n);
  std::vector<std::vector<unsigned char>> in(static_cast<size_t>(n));
  std::vector<char*> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    char* w_buf = static_cast<char*>(b.whole[r]);
    char* own = mode == kInPlace ? w_buf + static_cast<size_t>(r) * block : static_cast<char*>(b.block[r]);
    send[r] = scatter ? w_buf : own;
    recv[r] = scatter ? own : w_buf;
    in[r] = makeInput(t, scatter ? count * static_cast<size_t>(n) : count, r, seed);
    cudaSetDevice(w.device(r));
    if (count && cudaMemcpyAsync(send[r], in[r].data(), in[r].size(), cudaMemcpyHostToDevice, w.stream(r)) != cudaSuccess) {
      return "H2D copy";
    }
    if (mode != kInPlace && cudaMemsetAsync(recv[r], 0xff, scatter ? block : whole, w.stream(r)) != cudaSuccess) {
      return "memset";
    }
  }
  for (int r = 0; r < n; ++r) {
    const symmarResult_t res =
        scatter ? symmarReduceScatterAlgo(send[r], recv[r], count, t, op, algo, w.comm(r), w.stream(r))
                : symmarAllGatherAlgo(send[r], recv[r], count, t, algo, w.comm(r), w.stream(r));
    if (res != symmarSuccess) {
      return "rank " + std::to_string(r) + ": " + symmarGetErrorString(res) + ": " + symmarGetLastError(w.comm(r));
    }
  }
  if (cudaError_t e = w.sync(); e != cudaSuccess) return std::string("stream sync: ") + cudaGetErrorString(e);
  if (count == 0) return "";
  const std::vector<double> ref = scatter ? testref::reduceBuffers(t, op, in, count * static_cast<size_t>(n))
                                          : std::vector<double>();
  std::vector<unsigned char> out(scatter ? block : whole);
  for (int r = 0; r < n; ++r) {
    if (cudaMemcpy(out.data(), recv[r], out.size(), cudaMemcpyDeviceToHost) != cudaSuccess) return "D2H copy";
    if (scatter) {
      const std::string err = testref::checkResult(t, out.data(), ref.data() + static_cast<size_t>(r) * count, count,
                                                   n, testref::Match::kSumTolerance);
      if (!err.empty()) return "rank " + std::to_string(r) + ": " + err;
      continue;
    }
    for (int q = 0; q < n; ++q) {
      if (std::memcmp(out.data() + static_cast<size_t>(q) * block, in[q].data(), block) != 0) {
        return "rank " + std::to_string(r) + ": block " + std::to_string(q) + " is not rank " + std::to_string(q) +
               "'s input";
      }
    }
  }
  return "";
}

void sweep(const LocalWorld& w, symmarAlgo_t algo) {
  for (int mode = 0; mode < kNumModes; ++mode) {
    Buffers b;
    ASSERT_TRUE(allocBuffers(w, mode == kSymmetric, &b)) << "buffer allocation failed (" << modeName(mode) << ")";
    uint32_t seed = 1;
    for (symmarDataType_t t : {symmarFloat32, symmarFloat16, symmarBfloat16}) {
      for (size_t count : kCounts) {
        for (symmarRedOp_t op : {symmarSum, symmarMax, symmarMin}) {
          if (algo == symmarAlgoMultimem && t == symmarFloat32 && op != symmarSum) continue;  // not in the switch
          const std::string err = runCase(w, b, mode, true, algo, t, op, count, ++seed);
          ASSERT_EQ("", err) << "reduce-scatter " << symmarAlgoName(algo) << " world " << w.size() << " dtype " << t
                             << " op " << op << " count " << count << " " << modeName(mode);
        }
        const std::string err = runCase(w, b, mode, false, algo, t, symmarSum, count, ++seed);
        ASSERT_EQ("", err) << "all-gather " << symmarAlgoName(algo) << " world " << w.size() << " dtype " << t
                           << " count " << count << " " << modeName(mode);
      }
    }
    freeBuffers(w, &b);
  }
}

class SharedGpuScatterGather : public ::testing::TestWithParam<int> {};

TEST_P(SharedGpuScatterGather, OneShotMatchesReference) {
  SKIP_WITHOUT_GPU();
  LocalWorld w(std::vector<int>(static_cast<size_t>(GetParam()), 0), kTimeoutMs, kStaging);
  ASSERT_TRUE(w.ok()) << w.error();
  sweep(w, symmarAlgoOneShot);
}

INSTANTIATE_TEST_SUITE_P(Worlds, SharedGpuScatterGather, ::testing::Values(2, 3, 8),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

/// One rank per GPU: one-shot over the peer links, multimem where the GPUs have multicast.
TEST(DistinctGpusScatterGather, OneShotAndMultimem) {
  std::string why;
  const int gpus = gpuCount(&why);
  if (gpus < 2) GTEST_SKIP() << "needs 2+ GPUs (" << gpus << " present) " << why;
  std::vector<int> devices;
  for (int d = 0; d < std::min(gpus, 8); ++d) devices.push_back(d);
  LocalWorld w(devices, kTimeoutMs, kStaging);
  ASSERT_TRUE(w.ok()) << w.error();
  symmarTopology_t topo;
  SYMMAR_OK(symmarCommTopology(w.comm(0), &topo));
  if (topo.link == symmarLinkUnknown) GTEST_SKIP() << "no peer access between the GPUs";
  sweep(w, symmarAlgoOneShot);
  if (!topo.multicast) GTEST_SKIP() << "one-shot passed; no multicast for multimem (link " << topo.link << ")";
  sweep(w, symmarAlgoMultimem);
}

}  // namespace
}  // namespace symmar_gpu_test
